
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
 *
 * Latency lives in rlbench_latency.c, memory in rlbench_memory.c, the
 * reference table in rlbench_bare.c, the rest they share in
 * rlbench_util.c and rlbench.h; this file reads the command line, runs the
 * figures and prints them.
 */
#include "rlbench.h"


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
        rl_result res = RL_RESULT_INIT;
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
