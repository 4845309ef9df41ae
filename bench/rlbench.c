/*
 * rlbench.c -- how fast and how big is libratelimit's in-process store?
 *
 * It measures two things through the public API only, each beside a
 * reference measured in the same run on the same machine.  (1) Latency:
 * nanoseconds per rl_allow() on the "memory://" store, median (p50) and
 * 99th percentile (p99), with --keys distinct keys (1M by default) already
 * in the store, on 1 thread and then on 2 threads sharing one limiter.  Keys
 * are strings like "user:123456" made before timing; every thread draws
 * them uniformly from the same set along a sequence fixed before timing.
 * Each call is timed alone with clock_gettime(CLOCK_MONOTONIC), so every
 * sample also carries the clock's own cost (an empty sample's median is
 * printed as timer_overhead_ns); the *_mean_untimed lines repeat the run
 * without per-call clocks and give the plain mean.  The reference,
 * "bare_hash_lookup", is the least any store must do: hash the same key
 * string (FNV-1a with a 64-bit finalizer) and find its slot in a plain
 * open-addressing, linear-probing, power-of-two table of 24-byte slots
 * (64-bit hash + 16 bytes of state), read-only and lock-free, timed the same
 * way on the same keys.  Library and reference alternate block by block so
 * drift on a shared machine hits both alike.  (2) Memory: bytes per tracked
 * key, i.e. the growth of the resident set (/proc/self/statm) while N new
 * keys are charged through rl_allow() on a fresh limiter, divided by N, at
 * --keys and at --big keys (10M by default); the empty limiter's own
 * footprint is shown apart as empty_store_bytes.  Each memory figure is
 * taken first, in a forked child of a still-small parent, so no freed heap
 * can be refilled unseen.  References: the design note's budget of 100 B
 * per key ("design_note") and the bare table above holding the same N keys
 * at a load factor of at most 0.75 ("bare_hash_table").
 *
 * Reading the ratios: ratio = value / ref.  For latency it is what the
 * library's check (argument checks, rule lookup, clock, algorithm, locking)
 * costs over a bare lookup of the same key; 1.0 would be free, and a
 * 2-thread ratio well above the 1-thread one means the store scales worse
 * than an uncontended read (cpu_share below 1 means something else took the
 * CPU and the 2-thread figures are suspect).  The timed reference looks
 * slower than its untimed mean because the clock reads stop the CPU from
 * overlapping one lookup's cache misses with the next; rl_allow() gains
 * little from that overlap, so the untimed ratio is the larger.  For memory,
 * a ratio below 1 against design_note is within budget, and the ratio
 * against bare_hash_table says how close the store is to a minimal table.
 * Rules use a limit of 10^9 so nothing is denied (a denial takes the same
 * path); any denial is counted in the "denied" field.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ratelimit.h"
#include "benchutil.h"

#define RULE_ID "bench"
#define RULE_LIMIT 1000000000LL
#define RULE_WINDOW 60
#define KEY_STRIDE 16 /* "user:" + up to 10 digits + NUL */
#define DESIGN_NOTE_BYTES_PER_KEY 100.0
#define TARGET_BYTES_PER_KEY_BIG 48.0
#define MAX_KEYS 100000000ULL
#define MAX_SAMPLES 50000000ULL

/* ---- options -------------------------------------------------------- */

typedef struct options {
    unsigned long long keys;    /* key set for latency and first memory figure */
    unsigned long long big;     /* second memory figure; 0 skips it           */
    unsigned long long samples; /* timed calls per thread per run             */
    const char *algo;           /* rule algorithm                             */
    int json;
    int quick;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rlbench [--json] [--quick] [--keys N] [--big N] "
            "[--samples N] [--algo NAME]\n"
            "\n"
            "Measures libratelimit's memory store: ns per rl_allow() (p50, p99;\n"
            "1 and 2 threads) and bytes per tracked key, each beside a reference\n"
            "measured in the same run.  ratio = value / ref.\n"
            "\n"
            "  --json       one JSON object per line (first: name \"params\")\n"
            "  --keys N     distinct keys for latency and memory (default 1000000)\n"
            "  --big N      keys for the second memory figure (default 10000000;\n"
            "               0 skips it)\n"
            "  --samples N  timed calls per thread per run (default 2000000)\n"
            "  --algo NAME  sliding_window (default), token_bucket, fixed_window,\n"
            "               gcra\n"
            "  --quick      smoke run: 100k keys, 1M big, 200k samples\n"
            "  --help       this text\n"
            "N may end in k, M or G (powers of 1000).\n");
}

/* Returns 0 to run, 1 to exit 0 (help), 2 on a usage error. */
static int parse_args(int argc, char **argv, options *o)
{
    int have_keys = 0, have_big = 0, have_samples = 0;

    memset(o, 0, sizeof *o);
    o->algo = "sliding_window";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        unsigned long long *dst = NULL;
        int *have = NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        } else if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
            continue;
        }
        if (strncmp(a, "--keys", 6) == 0)
            dst = &o->keys, have = &have_keys, val = a + 6;
        else if (strncmp(a, "--big", 5) == 0)
            dst = &o->big, have = &have_big, val = a + 5;
        else if (strncmp(a, "--samples", 9) == 0)
            dst = &o->samples, have = &have_samples, val = a + 9;
        else if (strncmp(a, "--algo", 6) == 0)
            val = a + 6;
        else {
            fprintf(stderr, "rlbench: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (*val == '=')
            val++;
        else if (*val == '\0') {
            if (i + 1 >= argc) {
                fprintf(stderr, "rlbench: option '%s' needs a value\n", a);
                return 2;
            }
            val = argv[++i];
        } else {
            fprintf(stderr, "rlbench: unknown option '%s'\n", a);
            return 2;
        }
        if (dst == NULL) { /* --algo */
            if (strcmp(val, "sliding_window") != 0 &&
                strcmp(val, "token_bucket") != 0 &&
                strcmp(val, "fixed_window") != 0 && strcmp(val, "gcra") != 0) {
                fprintf(stderr, "rlbench: unknown algorithm '%s'\n", val);
                return 2;
            }
            o->algo = val;
            continue;
        }
        if (parse_count(val, dst) != 0) {
            fprintf(stderr, "rlbench: bad number '%s' for %s\n", val, a);
            return 2;
        }
        *have = 1;
    }
    if (!have_keys)
        o->keys = o->quick ? 100000ULL : 1000000ULL;
    if (!have_big)
        o->big = o->quick ? 1000000ULL : 10000000ULL;
    if (!have_samples)
        o->samples = o->quick ? 200000ULL : 2000000ULL;
    if (o->keys < 1 || o->keys > MAX_KEYS) {
        fprintf(stderr, "rlbench: --keys must be 1..%llu\n", MAX_KEYS);
        return 2;
    }
    if (o->big > MAX_KEYS) {
        fprintf(stderr, "rlbench: --big must be 0..%llu\n", MAX_KEYS);
        return 2;
    }
    if (o->samples < 100 || o->samples > MAX_SAMPLES) {
        fprintf(stderr, "rlbench: --samples must be 100..%llu\n", MAX_SAMPLES);
        return 2;
    }
    return 0;
}

/* ---- small helpers ---------------------------------------------------- */

/* Writes "user:<i>" and its NUL into buf (at least KEY_STRIDE bytes). */
static void fmt_key(char *buf, uint32_t i)
{
    char digits[10];
    int n = 0;

    memcpy(buf, "user:", 5);
    do {
        digits[n++] = (char)('0' + i % 10);
        i /= 10;
    } while (i != 0);
    for (int j = 0; j < n; j++)
        buf[5 + j] = digits[n - 1 - j];
    buf[5 + n] = '\0';
}

/* Resident set size in bytes, from /proc/self/statm; 0 if unreadable.
 * Uses no heap so that reading it does not disturb what it measures. */
static uint64_t rss_bytes(void)
{
    char buf[128];
    unsigned long long size = 0, resident = 0;
    ssize_t got;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return 0;
    buf[got] = '\0';
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double percentile(const uint32_t *sorted, size_t n, double p)
{
    size_t rank = (size_t)((double)n * p + 0.999999);

    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return (double)sorted[rank - 1];
}

/* ---- the reference: a bare open-addressing hash table ----------------- */

typedef struct bare_slot {
    uint64_t h;    /* 64-bit hash of the key; 0 marks an empty slot */
    uint64_t s[2]; /* 16 bytes of per-key state                     */
} bare_slot;

typedef struct bare_table {
    bare_slot *slots;
    size_t mask;
    size_t count;
} bare_table;

static uint64_t bare_hash(const char *key)
{
    uint64_t h = 0xCBF29CE484222325ULL; /* FNV-1a 64 ...            */

    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001B3ULL;
    h ^= h >> 33; /* ... with murmur3's finalizer so low bits mix */
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return h != 0 ? h : 1;
}

/* The smallest power of two holding n keys at a load factor <= 0.75. */
static int bare_init(bare_table *t, size_t n)
{
    size_t cap = 16;

    while (cap * 3 < n * 4)
        cap <<= 1;
    t->slots = calloc(cap, sizeof *t->slots);
    t->mask = cap - 1;
    t->count = 0;
    return t->slots != NULL ? 0 : -1;
}

static void bare_free(bare_table *t)
{
    free(t->slots);
    t->slots = NULL;
}

static void bare_insert(bare_table *t, const char *key)
{
    uint64_t h = bare_hash(key);
    size_t i = (size_t)h & t->mask;

    while (t->slots[i].h != 0 && t->slots[i].h != h)
        i = (i + 1) & t->mask;
    if (t->slots[i].h == 0) {
        t->slots[i].h = h;
        t->count++;
    }
    t->slots[i].s[0]++;
    t->slots[i].s[1] = h;
}

static const bare_slot *bare_lookup(const bare_table *t, const char *key)
{
    uint64_t h = bare_hash(key);
    size_t i = (size_t)h & t->mask;

    for (;;) {
        const bare_slot *s = &t->slots[i];
        if (s->h == h)
            return s;
        if (s->h == 0)
            return NULL;
        i = (i + 1) & t->mask;
    }
}

/* ---- limiter setup ------------------------------------------------------ */

static int make_limiter(const options *o, unsigned long long nkeys,
                        rl_limiter **out, char *err)
{
    rl_config *cfg;
    rl_limiter *lim = NULL;
    char cap[32], rules[512];
    unsigned long long gib;
    int rc;

    *out = NULL;
    /* 8 GiB, or 256 B per key if that is more: the cap must never bind. */
    gib = (nkeys * 256ULL + (1ULL << 30) - 1) >> 30;
    if (gib < 8)
        gib = 8;
    snprintf(cap, sizeof cap, "%lluG", gib);

    cfg = rl_config_new();
    if (cfg == NULL) {
        set_err(err, "rl_config_new", RL_ENOMEM, NULL);
        return RL_ENOMEM;
    }
    rc = rl_config_set(cfg, "store", "memory://");
    if (rc != RL_OK) {
        set_err(err, "rl_config_set(store, memory://)", rc, errtext(NULL));
        rl_config_free(cfg);
        return rc;
    }
    rc = rl_config_set(cfg, "memory_max_bytes", cap);
    if (rc != RL_OK) {
        char what[96];
        snprintf(what, sizeof what, "rl_config_set(memory_max_bytes, %s)", cap);
        set_err(err, what, rc, errtext(NULL));
        rl_config_free(cfg);
        return rc;
    }
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    if (rc != RL_OK) {
        set_err(err, "rl_limiter_new", rc, errtext(NULL));
        rl_limiter_free(lim);
        return rc;
    }
    snprintf(rules, sizeof rules,
             "{\"rules\":[{\"rule_id\":\"" RULE_ID "\",\"dimension\":\"user\","
             "\"limit\":%lld,\"window_seconds\":%d,\"algorithm\":\"%s\"}]}",
             RULE_LIMIT, RULE_WINDOW, o->algo);
    rc = rl_rules_load_string(lim, rules);
    if (rc != RL_OK) {
        set_err(err, "rl_rules_load_string", rc, errtext(lim));
        rl_limiter_free(lim);
        return rc;
    }
    *out = lim;
    return RL_OK;
}

/* ---- latency workers ------------------------------------------------------ */

/*
 * The library and the reference take turns, block by block, so that drift
 * on a shared machine (other processes, turbo, a neighbour's cache traffic)
 * lands on both alike.  Both run the same key sequence, but the reference
 * runs it half a round later, so it never finds the keys the library has
 * just pulled into cache (nor the other way round).
 */
#define NBLOCKS 8
#define LIB 0
#define REF 1

typedef struct worker {
    rl_limiter *lim;        /* LIB: the limiter under test           */
    const bare_table *tab;  /* REF: the reference table              */
    const char *keys;       /* KEY_STRIDE bytes per key              */
    const uint32_t *seq;    /* key indexes, nseq of them             */
    size_t nseq;
    uint32_t *lat[2];       /* out: ns per timed call, nseq each     */
    pthread_barrier_t *bar;
    double untimed_ns[2];   /* out: mean ns per call, untimed pass   */
    double cpu_share[2];    /* out: thread CPU time / wall, same pass */
    unsigned long long denied;
    uint64_t sink;
    int rc;
    char err[ERRLEN];
} worker;

static int one_call(worker *w, int which, const char *key)
{
    if (which == LIB) {
        rl_result res;
        int rc = rl_allow(w->lim, key, RULE_ID, 1, &res);
        if (rc != RL_OK) {
            /* rl_errmsg() is per thread: capture it here. */
            char what[64];
            snprintf(what, sizeof what, "rl_allow(%s)", key);
            set_err(w->err, what, rc, errtext(w->lim));
            w->rc = rc;
            return rc;
        }
        if (!res.allowed)
            w->denied++;
        return RL_OK;
    } else {
        const bare_slot *s = bare_lookup(w->tab, key);
        if (s == NULL) {
            snprintf(w->err, ERRLEN, "bare table lost key %s", key);
            w->rc = -100;
            return w->rc;
        }
        w->sink += s->s[0];
        return RL_OK;
    }
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The sample range [*lo, *hi) that `which` runs at `step`. */
static void block_of(size_t nseq, int step, int which, size_t *lo, size_t *hi)
{
    size_t bs = (nseq + NBLOCKS - 1) / NBLOCKS;
    int b = which == LIB ? step : (step + NBLOCKS / 2) % NBLOCKS;

    *lo = (size_t)b * bs < nseq ? (size_t)b * bs : nseq;
    *hi = *lo + bs < nseq ? *lo + bs : nseq;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    size_t warm = w->nseq / 10;
    uint64_t wall[2] = {0, 0}, cpu[2] = {0, 0};

    /* Warm-up (untimed), the timed run, then the untimed run.  Barriers
     * keep the threads in the same phase; a thread that failed still
     * meets every barrier. */
    for (int which = LIB; which <= REF; which++)
        for (size_t i = 0; i < warm && w->rc == 0; i++)
            one_call(w, which, w->keys + (size_t)w->seq[i] * KEY_STRIDE);
    w->denied = 0;
    for (int step = 0; step < NBLOCKS; step++) {
        for (int which = LIB; which <= REF; which++) {
            size_t lo, hi;

            block_of(w->nseq, step, which, &lo, &hi);
            pthread_barrier_wait(w->bar);
            for (size_t i = lo; i < hi && w->rc == 0; i++) {
                const char *key = w->keys + (size_t)w->seq[i] * KEY_STRIDE;
                struct timespec a, b;
                int64_t d;

                clock_gettime(CLOCK_MONOTONIC, &a);
                one_call(w, which, key);
                clock_gettime(CLOCK_MONOTONIC, &b);
                d = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000LL +
                    (b.tv_nsec - a.tv_nsec);
                w->lat[which][i] = d < 0                      ? 0
                                   : d > (int64_t)UINT32_MAX ? UINT32_MAX
                                                              : (uint32_t)d;
            }
        }
    }
    for (int step = 0; step < NBLOCKS; step++) {
        for (int which = LIB; which <= REF; which++) {
            size_t lo, hi;
            uint64_t t0, c0;

            block_of(w->nseq, step, which, &lo, &hi);
            pthread_barrier_wait(w->bar);
            c0 = thread_cpu_ns();
            t0 = now_ns();
            for (size_t i = lo; i < hi && w->rc == 0; i++)
                one_call(w, which, w->keys + (size_t)w->seq[i] * KEY_STRIDE);
            wall[which] += now_ns() - t0;
            cpu[which] += thread_cpu_ns() - c0;
        }
    }
    for (int which = LIB; which <= REF; which++) {
        w->untimed_ns[which] = (double)wall[which] / (double)w->nseq;
        /* Below 1: the thread was off its CPU part of the time (another
         * process, or the other thread on a single core). */
        w->cpu_share[which] =
            wall[which] > 0 ? (double)cpu[which] / (double)wall[which] : 1.0;
    }
    return NULL;
}

typedef struct lat_figs {
    double p50, p99, p999, mean, untimed;
    double cpu_share; /* the lowest of the threads' */
    unsigned long long denied;
} lat_figs;

static void summarize(uint32_t *lat, size_t n, lat_figs *f)
{
    double sum = 0;

    for (size_t i = 0; i < n; i++)
        sum += lat[i];
    f->mean = sum / (double)n;
    qsort(lat, n, sizeof *lat, cmp_u32);
    f->p50 = percentile(lat, n, 0.50);
    f->p99 = percentile(lat, n, 0.99);
    f->p999 = percentile(lat, n, 0.999);
}

/* Runs nthreads workers, each over the limiter and the reference table;
 * lat[LIB] and lat[REF] hold nthreads * nseq samples each. */
static int run_latency(rl_limiter *lim, const bare_table *tab,
                       const char *keys, uint32_t *const *seqs, size_t nseq,
                       int nthreads, uint32_t *const *lat, lat_figs *out,
                       char *err)
{
    worker w[2];
    pthread_t tid[2];
    pthread_barrier_t bar;
    int rc = 0;

    if (pthread_barrier_init(&bar, NULL, (unsigned)nthreads) != 0) {
        snprintf(err, ERRLEN, "pthread_barrier_init failed");
        return -1;
    }
    for (int t = 0; t < nthreads; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].lim = lim;
        w[t].tab = tab;
        w[t].keys = keys;
        w[t].seq = seqs[t];
        w[t].nseq = nseq;
        w[t].lat[LIB] = lat[LIB] + (size_t)t * nseq;
        w[t].lat[REF] = lat[REF] + (size_t)t * nseq;
        w[t].bar = &bar;
    }
    for (int t = 0; t < nthreads; t++) {
        if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0) {
            /* The threads already started wait at a barrier forever. */
            fprintf(stderr, "rlbench: pthread_create failed\n");
            exit(1);
        }
    }
    for (int t = 0; t < nthreads; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&bar);

    for (int which = LIB; which <= REF; which++) {
        memset(&out[which], 0, sizeof out[which]);
        out[which].cpu_share = 1.0;
    }
    for (int t = 0; t < nthreads; t++) {
        if (w[t].rc != 0 && rc == 0) {
            rc = w[t].rc;
            memcpy(err, w[t].err, ERRLEN);
        }
        for (int which = LIB; which <= REF; which++) {
            out[which].untimed += w[t].untimed_ns[which] / nthreads;
            if (w[t].cpu_share[which] < out[which].cpu_share)
                out[which].cpu_share = w[t].cpu_share[which];
        }
        out[LIB].denied += w[t].denied;
    }
    if (rc != 0)
        return rc;
    for (int which = LIB; which <= REF; which++)
        summarize(lat[which], (size_t)nthreads * nseq, &out[which]);
    return 0;
}

/* Median cost of one clock_gettime(CLOCK_MONOTONIC) pair, in ns: what
 * every timed sample carries on top of the call it times. */
static double timer_overhead(uint32_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t d = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000LL +
                    (b.tv_nsec - a.tv_nsec);
        buf[i] = d < 0 ? 0 : (uint32_t)d;
    }
    qsort(buf, n, sizeof *buf, cmp_u32);
    return percentile(buf, n, 0.50);
}

/* ---- memory figures (each in a forked child) --------------------------- */

typedef struct mem_result {
    int rc;
    double bytes_per_key;   /* (RSS after inserts - RSS before) / N */
    double empty_bytes;     /* RSS growth of creating the empty store */
    double insert_ns;       /* mean ns per first-time insert          */
    unsigned long long denied;
    char err[ERRLEN];
} mem_result;

static void mem_limiter(const options *o, size_t n, mem_result *r)
{
    rl_limiter *lim = NULL;
    char key[KEY_STRIDE];
    uint64_t r0, r1, r2, t0, t1;

    r0 = rss_bytes();
    r->rc = make_limiter(o, n, &lim, r->err);
    if (r->rc != RL_OK)
        return;
    r1 = rss_bytes();
    t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        rl_result res;
        int rc;

        fmt_key(key, (uint32_t)i);
        rc = rl_allow(lim, key, RULE_ID, 1, &res);
        if (rc != RL_OK) {
            char what[64];
            snprintf(what, sizeof what, "rl_allow(%s) while filling", key);
            set_err(r->err, what, rc, errtext(lim));
            r->rc = rc;
            rl_limiter_free(lim);
            return;
        }
        if (!res.allowed)
            r->denied++;
    }
    t1 = now_ns();
    r2 = rss_bytes();
    rl_limiter_free(lim);
    r->bytes_per_key = ((double)r2 - (double)r1) / (double)n;
    r->empty_bytes = (double)r1 - (double)r0;
    r->insert_ns = (double)(t1 - t0) / (double)n;
}

static void mem_table(const options *o, size_t n, mem_result *r)
{
    bare_table t;
    char key[KEY_STRIDE];
    uint64_t r0, r1, r2, t0, t1;

    (void)o;
    r0 = rss_bytes();
    if (bare_init(&t, n) != 0) {
        snprintf(r->err, ERRLEN, "bare table: out of memory");
        r->rc = RL_ENOMEM;
        return;
    }
    r1 = rss_bytes();
    t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        fmt_key(key, (uint32_t)i);
        bare_insert(&t, key);
    }
    t1 = now_ns();
    r2 = rss_bytes();
    if (t.count != n) {
        snprintf(r->err, ERRLEN, "bare table holds %zu keys, not %zu (hash "
                 "collision)", t.count, n);
        r->rc = -100;
    }
    bare_free(&t);
    /* calloc'd pages cost nothing until touched, so measure from r0. */
    r->bytes_per_key = ((double)r2 - (double)r0) / (double)n;
    r->empty_bytes = (double)r1 - (double)r0;
    r->insert_ns = (double)(t1 - t0) / (double)n;
}

static int run_in_child(void (*fn)(const options *, size_t, mem_result *),
                        const options *o, size_t n, mem_result *r)
{
    int fds[2], status = 0;
    pid_t pid;
    size_t got = 0;

    memset(r, 0, sizeof *r);
    if (pipe(fds) != 0) {
        snprintf(r->err, ERRLEN, "pipe: %s", strerror(errno));
        return r->rc = -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        snprintf(r->err, ERRLEN, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return r->rc = -1;
    }
    if (pid == 0) {
        const char *p = (const char *)r;
        size_t put = 0;

        close(fds[0]);
#ifdef __GLIBC__
        malloc_trim(0); /* hand back free heap so it cannot be reused unseen */
#endif
        fn(o, n, r);
        while (put < sizeof *r) {
            ssize_t k = write(fds[1], p + put, sizeof *r - put);
            if (k <= 0)
                _exit(3);
            put += (size_t)k;
        }
        close(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    while (got < sizeof *r) {
        ssize_t k = read(fds[0], (char *)r + got, sizeof *r - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got != sizeof *r || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        memset(r, 0, sizeof *r);
        if (WIFSIGNALED(status))
            snprintf(r->err, ERRLEN, "memory child killed by signal %d",
                     WTERMSIG(status));
        else
            snprintf(r->err, ERRLEN, "memory child failed (status %d)",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return r->rc = -1;
    }
    return r->rc;
}

/* ---- output ----------------------------------------------------------------- */

static const text_layout layout = {28, 10, 1, 5, 17, 2};

static void emit(const options *o, const figure *f)
{
    emit_figure(f, o->json, &layout);
}

static void emit_latency(const options *o, int threads, const lat_figs *lib,
                         const lat_figs *ref)
{
    static const char *names[2][3] = {
        {"mem_check_p50_1t", "mem_check_p99_1t", "mem_check_mean_untimed_1t"},
        {"mem_check_p50_2t", "mem_check_p99_2t", "mem_check_mean_untimed_2t"}};
    const double v[3] = {lib->p50, lib->p99, lib->untimed};
    const double r[3] = {ref->p50, ref->p99, ref->untimed};
    const double ref_x[3] = {ref->mean, ref->p999, ref->cpu_share};

    for (int i = 0; i < 3; i++) {
        figure f = {0};
        f.name = names[threads - 1][i];
        f.value = v[i];
        f.unit = "ns";
        f.nrefs = 1;
        f.ref[0] = r[i];
        f.ref_name[0] = "bare_hash_lookup";
        xnum(&f, "threads", threads);
        xnum(&f, "keys", (double)o->keys);
        if (i == 0) { /* the timed samples' mean, beside the median */
            xnum(&f, "mean", lib->mean);
            xnum(&f, "ref_mean", ref_x[i]);
        } else if (i == 1) {
            xnum(&f, "p999", lib->p999);
            xnum(&f, "ref_p999", ref_x[i]);
        } else {
            xnum(&f, "cpu_share", lib->cpu_share);
            xnum(&f, "ref_cpu_share", ref_x[i]);
        }
        xnum(&f, "denied", (double)lib->denied);
        emit(o, &f);
    }
}

static void emit_memory(const options *o, const char *name, size_t n,
                        const mem_result *lib, const mem_result *ref,
                        int with_target)
{
    figure f = {0};

    f.name = name;
    f.value = lib->bytes_per_key;
    f.unit = "B";
    f.nrefs = 2;
    f.ref[0] = DESIGN_NOTE_BYTES_PER_KEY;
    f.ref_name[0] = "design_note";
    f.ref[1] = ref->bytes_per_key;
    f.ref_name[1] = "bare_hash_table";
    xnum(&f, "keys", (double)n);
    xnum(&f, "empty_store_bytes", lib->empty_bytes);
    xnum(&f, "insert_ns", lib->insert_ns);
    xnum(&f, "bare_insert_ns", ref->insert_ns);
    xnum(&f, "denied", (double)lib->denied);
    if (with_target)
        xnum(&f, "target_max", TARGET_BYTES_PER_KEY_BIG);
    emit(o, &f);
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    options o;
    int prc, status = 1;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    char *keys = NULL;
    uint32_t *seqs[2] = {NULL, NULL};
    uint32_t *lat[2] = {NULL, NULL};
    rl_limiter *lim = NULL;
    bare_table tab = {NULL, 0, 0};
    char err[ERRLEN] = "";
    size_t nkeys, nseq;
    double tov;
    mem_result ml[2] = {{0}}, mt[2] = {{0}};
    double load;

    prc = parse_args(argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    nkeys = (size_t)o.keys;
    nseq = (size_t)o.samples;
    /* Other work on the machine skews the 2-thread figures: show it. */
    load = loadavg1();

    if (o.json)
        printf("{\"name\":\"params\",\"nproc\":%ld,\"keys\":%llu,\"big\":%llu,"
               "\"samples_per_thread\":%llu,\"algorithm\":\"%s\","
               "\"quick\":%s,\"timer\":\"clock_gettime(CLOCK_MONOTONIC)\","
               "\"library\":\"%s\",\"loadavg_1m\":%.2f}\n",
               nproc, o.keys, o.big, o.samples, o.algo,
               o.quick ? "true" : "false", rl_version_string(), load);
    else {
        printf("rlbench: libratelimit %s, nproc=%ld, keys=%llu, big=%llu, "
               "samples=%llu/thread, algorithm=%s, loadavg=%.2f%s\n",
               rl_version_string(), nproc, o.keys, o.big, o.samples, o.algo,
               load, o.quick ? " (quick)" : "");
        print_columns(&layout);
    }
    fflush(stdout);

    /* 2. Memory per tracked key, measured first and printed last: each
     * measurement runs in a forked child, and the child of a parent that
     * has already allocated and freed a lot would refill that freed (still
     * resident) heap without growing its RSS. */
    for (int big = 0; big <= 1; big++) {
        size_t n = big ? (size_t)o.big : nkeys;
        if (n == 0)
            continue;
        if (run_in_child(mem_limiter, &o, n, &ml[big]) != 0) {
            memcpy(err, ml[big].err, ERRLEN);
            goto out;
        }
        if (run_in_child(mem_table, &o, n, &mt[big]) != 0) {
            memcpy(err, mt[big].err, ERRLEN);
            goto out;
        }
    }

    /* 1. Latency.  Everything the timed loops read is made before timing:
     * the key strings, and each thread's sequence of key indexes. */
    keys = malloc(nkeys * KEY_STRIDE);
    seqs[0] = malloc(nseq * sizeof *seqs[0]);
    seqs[1] = malloc(nseq * sizeof *seqs[1]);
    lat[LIB] = malloc(2 * nseq * sizeof *lat[LIB]);
    lat[REF] = malloc(2 * nseq * sizeof *lat[REF]);
    if (keys == NULL || seqs[0] == NULL || seqs[1] == NULL ||
        lat[LIB] == NULL || lat[REF] == NULL) {
        snprintf(err, ERRLEN, "out of memory for keys and samples");
        goto out;
    }
    for (size_t i = 0; i < nkeys; i++)
        fmt_key(keys + i * KEY_STRIDE, (uint32_t)i);
    for (int t = 0; t < 2; t++) {
        uint64_t st = 0x5EED0000ULL + (uint64_t)t;
        for (size_t i = 0; i < nseq; i++)
            seqs[t][i] = (uint32_t)pick(&st, nkeys);
    }

    tov = timer_overhead(lat[LIB], nseq < 1000000 ? nseq : 1000000);
    {
        figure f = {0};
        f.name = "timer_overhead_ns";
        f.value = tov;
        f.unit = "ns";
        emit(&o, &f);
    }

    /* The limiter, pre-filled so every key exists ... */
    if (make_limiter(&o, nkeys, &lim, err) != RL_OK)
        goto out;
    for (size_t i = 0; i < nkeys; i++) {
        rl_result res;
        int rc = rl_allow(lim, keys + i * KEY_STRIDE, RULE_ID, 1, &res);
        if (rc != RL_OK) {
            set_err(err, "rl_allow while pre-filling", rc, errtext(lim));
            goto out;
        }
    }
    /* ... and the reference table holding the same keys. */
    if (bare_init(&tab, nkeys) != 0) {
        snprintf(err, ERRLEN, "out of memory for the reference table");
        goto out;
    }
    for (size_t i = 0; i < nkeys; i++)
        bare_insert(&tab, keys + i * KEY_STRIDE);
    if (tab.count != nkeys) {
        snprintf(err, ERRLEN, "reference table holds %zu keys, not %zu",
                 tab.count, nkeys);
        goto out;
    }
    for (int threads = 1; threads <= 2; threads++) {
        lat_figs lf[2];
        if (run_latency(lim, &tab, keys, seqs, nseq, threads, lat, lf,
                        err) != 0)
            goto out;
        emit_latency(&o, threads, &lf[LIB], &lf[REF]);
    }
    rl_limiter_free(lim);
    lim = NULL;
    bare_free(&tab);
    free(keys);
    keys = NULL;
    free(lat[LIB]);
    free(lat[REF]);
    lat[LIB] = lat[REF] = NULL;
    free(seqs[0]);
    free(seqs[1]);
    seqs[0] = seqs[1] = NULL;

    /* 2. Memory per tracked key (measured first, see above). */
    emit_memory(&o, "mem_bytes_per_key", nkeys, &ml[0], &mt[0], 0);
    if (o.big != 0)
        emit_memory(&o, "mem_bytes_per_key_big", (size_t)o.big, &ml[1], &mt[1],
                    1);
    status = 0;

out:
    if (status != 0)
        fprintf(stderr, "rlbench: %s\n", err[0] ? err : "failed");
    rl_limiter_free(lim);
    bare_free(&tab);
    free(keys);
    free(lat[LIB]);
    free(lat[REF]);
    free(seqs[0]);
    free(seqs[1]);
    return status;
}
