/*
 * redisbench.c -- how fast, how big and how exact is libratelimit's Redis
 * store?
 *
 * It measures, against one Redis on 127.0.0.1 (--port; bench/redisbench.sh
 * starts a private, empty one), six groups of figures, each beside a
 * reference measured in the same run on the same machine.  (1) throughput_64:
 * 64 threads calling rl_allow() in a loop on one limiter (64 checks in
 * flight; "redis://" store, default options but timeout_ms 1000), sliding
 * window rule with a limit of 10^9 (nothing is denied), keys drawn uniformly
 * from --keys N as "user:<12 digits>" (the same names redis-benchmark makes),
 * for --seconds after a short warm-up, from an empty database: checks/s and
 * p50/p99 microseconds per call.  Reference: redis-benchmark -c 64 -P 16
 * running the library's own script (SCRIPT LOAD of rl_lua_check) by EVALSHA
 * with the very arguments the library sends (p, q from gcd(window, limit))
 * on keys of the library's own shape (read back from Redis), from an empty
 * database, for as many requests as the library did.  The store's own
 * batching (checks per socket write) comes from its counters.
 * (2) throughput_1: the same with one thread, one check at a time, against
 * redis-benchmark -c 1 -P 1.  throughput_64_many: 64 in flight as 2
 * threads each deciding 32 requests per rl_check_many() call (rule by
 * user, the same keys), against the same -c 64 -P 16 reference; each
 * request's latency is its call's.  (3) usec_per_call: the server's
 * cmdstat_evalsha usec_per_call (INFO commandstats, after CONFIG RESETSTAT)
 * over a fixed number of checks of existing keys by 64 threads, per
 * algorithm, beside hot_usec_per_call, the same script and arguments from
 * redis-benchmark -c 64 -P 16 (a Redis kept busy runs a script faster);
 * reference: an INCR + PEXPIRE pair on existing keys, pipelined, or the
 * peer library's figure given with --peer-usec.  (4) bytes_per_key: per
 * algorithm, Redis used_memory grown while --mem-keys new clients are each
 * checked once (client keys user:<i>, rule "b"), after FLUSHALL, divided by
 * their number; reference: 144 B, the leanest peer layout measured here
 * (GCRA in one string, 35-byte key names) -- our key names are shorter, and
 * their mean length (from SCAN) is printed.  (5) accuracy: 8 processes x 4
 * threads, each process with its own limiter, hammer one key per algorithm
 * (all four at once, in turn) for --accuracy-seconds, starting 0.25 s into
 * a 10 s window; the admitted count is set beside what the algorithm allows over
 * the measured span [first call, last reply] (CLOCK_REALTIME, the clock
 * Redis TIME reads on this machine): token bucket and GCRA burst + span x
 * rate (over-admission must be <= 1), fixed window limit x windows touched,
 * sliding window limit x (span + s0) / window, s0 the start's offset into
 * its window, as a full limit passes at once from empty state (within 3 %;
 * the plain limit x span / window is given beside it).  window_edge: 100 per
 * 10 s, 100 admitted 9.2 s into a window, then 200 fired by 32 threads 0.1 s
 * into the next: the sliding window must stay within 1.1 x limit, the fixed
 * window is expected to let 2 x limit through.  (6) outage: the circuit
 * breaker against a hung server (SIGSTOP of redis-server, SIGCONT to end
 * it; DEBUG SLEEP where it cannot be signalled), limiters with timeout_ms
 * 20, breaker_failures K = 5, fleet_size 4.  outage_breaker_open_p50/_p99:
 * after the K checks that time out, --quick ? 50k : 200k checks on one
 * thread with the breaker open (cooldown 60 s, so no probe), rule in
 * failure_mode fallback, beside a memory-store limiter with the same rule
 * in alternating blocks of 1000 (target p99 <= 10 us); network_calls,
 * the store's socket calls meanwhile, must be 0.  outage_probe_max_latency:
 * the slowest of those K checks beside timeout_ms.
 * outage_admitted_<open|closed|fallback>: one fixed-window rule per failure
 * mode, 100 per 10 s, one thread checking each every 1 ms through a 10 s
 * outage (--quick: 2 s), cooldown 1 s; reference: what the mode promises --
 * open every request, closed none (ratio null), fallback limit / fleet_size
 * per window touched.  outage_time_to_close: from the server's resumption
 * to the first rl_stats_get() (polled every 1 ms as the checks go on) that
 * shows the breaker CLOSED, beside breaker_cooldown_ms.  The server is
 * resumed on every way out, errors and terminating signals included.
 *
 * Reading the ratios: ratio = value / ref.  Throughput: 1.0 means the
 * library drives Redis as hard as redis-benchmark does with the same
 * script (targets: >= 0.9 at 64 in flight, >= 0.95 one at a time); the
 * *_cpu fields say, in cores, what the client, redis-server and everything
 * else on the machine used meanwhile, so a ratio below target with
 * client_cpu high and redis_cpu below 1 means the client side is the
 * bottleneck, and other_cpu well above 0 means the machine was not quiet.
 * usec_per_call: how many plain INCR+PEXPIRE pairs one check costs Redis.
 * bytes_per_key: below 1 is leaner than the reference (target <= 144 B).
 * Accuracy: 1.0 is exact; above 1 is over-admission (see "over" for tokens).
 * Outage: breaker-open latency near 1 (the memory store's cost) and under
 * the target, probes within timeout_ms, admitted ratios 1 (open, fallback),
 * time to close at most about one cooldown (ratio <= ~1).
 * Outside the outage group, any result decided by the local fallback
 * (RL_FLAG_FALLBACK) is an error and is counted in the *_fallback figures
 * and "fallback" fields.
 *
 * It FLUSHALLs the database: it refuses a non-empty one unless --force.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <ctype.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ratelimit.h"
#include "limiter.h"     /* limiter_store()                         */
#include "store_redis.h" /* rl_lua_check, store_redis_stats_get()   */
#include "benchutil.h"
#include "redisutil.h"

extern char **environ;

#define TP_THREADS 64
#define FILL_THREADS 64
#define BIG_LIMIT 1000000000LL /* per window: nothing is ever denied */
#define BIG_WINDOW_S 60
/* usec_per_call and bytes_per_key: 1000 per day.  A token bucket or GCRA
 * key lives only until its bucket is full again (one token's refill after
 * one check: window / limit), so the rule must refill slowly for the keys
 * to be there when they are checked again or counted. */
#define SLOW_LIMIT 1000
#define SLOW_WINDOW_S 86400
#define PEER_BYTES_PER_KEY 144.0
#define TARGET_TP64 0.9
#define TARGET_TP1 0.95
#define USEC_KEYS 10000ULL
/* As many threads as throughput_64, the regime the peer figure comes from.
 * How busy Redis is kept changes usec_per_call itself (a script run one at
 * a time finds cold caches), hence hot_usec_per_call beside it. */
#define USEC_THREADS 64
#define ACC_PROCS 8
#define ACC_THREADS 4
#define ACC_LIMIT 1000
#define ACC_BURST 100
#define ACC_WINDOW_MS 10000LL
#define ACC_START_OFFSET_MS 250LL
#define ACC_TOLERANCE 0.03
#define EDGE_THREADS 32
#define EDGE_LIMIT 100
#define EDGE_WINDOW_MS 10000LL
#define EDGE_PHASE1_MS 9200LL /* into window W        */
#define EDGE_PHASE2_MS 100LL  /* into window W + 1    */
#define EDGE_FIRE2 200
#define MAX_KEYS 1000000000ULL

static const char *const algo_names[4] = {"sliding_window", "token_bucket",
                                          "fixed_window", "gcra"};

/* ---- options -------------------------------------------------------- */

typedef struct options {
    int port;
    double seconds;             /* per throughput figure                  */
    unsigned long long keys;    /* key space for the throughput figures   */
    unsigned long long mem_keys;
    unsigned long long usec_checks;
    double acc_seconds;
    double peer_usec;           /* < 0: not given                          */
    const char *only;
    int json, quick, force;
} options;

static const char *const groups[] = {"throughput_64", "throughput_64_many",
                                     "throughput_1", "usec_per_call", "bytes_per_key",
                                     "accuracy",      "window_edge",
                                     "outage"};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: redisbench --port P [--json] [--quick] [--seconds S] "
            "[--keys N]\n"
            "                  [--mem-keys N] [--usec-checks N] "
            "[--accuracy-seconds S]\n"
            "                  [--peer-usec X] [--only NAME] [--force]\n"
            "\n"
            "Measures libratelimit's Redis store against the Redis on\n"
            "127.0.0.1:P (use bench/redisbench.sh to get a private one):\n"
            "throughput and latency at 64 and 1 checks in flight beside\n"
            "redis-benchmark running the same script, the script's server "
            "time,\n"
            "Redis bytes per key, the algorithms' accuracy under "
            "contention,\n"
            "and the circuit breaker while the server hangs (SIGSTOP).\n"
            "ratio = value / ref.  The database is FLUSHALLed.\n"
            "\n"
            "  --port P              Redis port on 127.0.0.1 (required)\n"
            "  --json                one JSON object per line (first: name "
            "\"params\")\n"
            "  --seconds S           per throughput figure (default 10)\n"
            "  --keys N              key space for throughput (default "
            "1000000)\n"
            "  --mem-keys N          clients for bytes_per_key (default "
            "100000, as\n"
            "                        the peer measured; at most --keys)\n"
            "  --usec-checks N       checks per algorithm for usec_per_call\n"
            "                        (default 50000)\n"
            "  --accuracy-seconds S  length of the accuracy run (default "
            "30)\n"
            "  --peer-usec X         the peer script's usec_per_call, as "
            "reference\n"
            "  --only NAME           one group: throughput_64,\n"
            "                        throughput_64_many, throughput_1,\n"
            "                        usec_per_call, bytes_per_key, accuracy\n"
            "                        (with window_edge), window_edge, "
            "outage\n"
            "  --quick               smoke run: 2 s runs, 100k keys, 50k "
            "mem keys,\n"
            "                        10k usec checks, 5 s accuracy run, "
            "2 s outage\n"
            "  --force               run even if the database is not empty\n"
            "  --help                this text\n"
            "N may end in k, M or G (powers of 1000).  redis-benchmark is "
            "taken\n"
            "from $REDIS_BENCHMARK or the PATH.  The outage group hangs "
            "the server\n"
            "with SIGSTOP, or with DEBUG SLEEP where it cannot signal it "
            "(forced\n"
            "by REDISBENCH_FAULT=sigstop or debug).\n");
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    double v;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

/* Returns 0 to run, 1 to exit 0 (help), 2 on a usage error. */
static int parse_args(int argc, char **argv, options *o)
{
    int have_seconds = 0, have_keys = 0, have_mem = 0, have_usec = 0,
        have_acc = 0;
    unsigned long long port = 0;

    memset(o, 0, sizeof *o);
    o->peer_usec = -1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        static const char *const valued[] = {
            "--port",     "--seconds",          "--keys",      "--mem-keys",
            "--usec-checks", "--accuracy-seconds", "--peer-usec", "--only"};
        int which = -1;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        } else if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
            continue;
        } else if (strcmp(a, "--force") == 0) {
            o->force = 1;
            continue;
        }
        for (int k = 0; k < (int)(sizeof valued / sizeof valued[0]); k++) {
            size_t n = strlen(valued[k]);
            if (strncmp(a, valued[k], n) == 0 &&
                (a[n] == '\0' || a[n] == '=')) {
                which = k;
                val = a[n] == '=' ? a + n + 1 : NULL;
                break;
            }
        }
        if (which < 0) {
            fprintf(stderr, "redisbench: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (val == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "redisbench: option '%s' needs a value\n", a);
                return 2;
            }
            val = argv[++i];
        }
        switch (which) {
        case 0:
            if (parse_count(val, &port) != 0 || port < 1 || port > 65535) {
                fprintf(stderr, "redisbench: bad port '%s'\n", val);
                return 2;
            }
            o->port = (int)port;
            break;
        case 1:
            if (parse_double(val, 0.1, 3600, &o->seconds) != 0)
                goto bad;
            have_seconds = 1;
            break;
        case 2:
            if (parse_count(val, &o->keys) != 0)
                goto bad;
            have_keys = 1;
            break;
        case 3:
            if (parse_count(val, &o->mem_keys) != 0)
                goto bad;
            have_mem = 1;
            break;
        case 4:
            if (parse_count(val, &o->usec_checks) != 0)
                goto bad;
            have_usec = 1;
            break;
        case 5:
            if (parse_double(val, 1, 3600, &o->acc_seconds) != 0)
                goto bad;
            have_acc = 1;
            break;
        case 6:
            if (parse_double(val, 0.001, 1e6, &o->peer_usec) != 0)
                goto bad;
            break;
        default: {
            int ok = 0;
            for (size_t k = 0; k < sizeof groups / sizeof groups[0]; k++)
                ok |= strcmp(val, groups[k]) == 0;
            if (!ok) {
                fprintf(stderr, "redisbench: unknown group '%s'\n", val);
                return 2;
            }
            o->only = val;
        }
        }
        continue;
    bad:
        fprintf(stderr, "redisbench: bad value '%s' for %s\n", val, a);
        return 2;
    }
    if (o->port == 0) {
        fprintf(stderr, "redisbench: --port is required\n");
        usage(stderr);
        return 2;
    }
    if (!have_seconds)
        o->seconds = o->quick ? 2.0 : 10.0;
    if (!have_keys)
        o->keys = o->quick ? 100000ULL : 1000000ULL;
    if (!have_mem)
        o->mem_keys = o->quick ? 50000ULL : 100000ULL;
    if (!have_usec)
        o->usec_checks = o->quick ? 10000ULL : 50000ULL;
    if (!have_acc)
        o->acc_seconds = o->quick ? 5.0 : 30.0;
    if (o->keys < 1 || o->keys > MAX_KEYS) {
        fprintf(stderr, "redisbench: --keys must be 1..%llu\n", MAX_KEYS);
        return 2;
    }
    if (o->mem_keys > o->keys)
        o->mem_keys = o->keys;
    if (o->mem_keys < 1000 || o->usec_checks < 1000) {
        fprintf(stderr, "redisbench: --mem-keys (capped by --keys) and "
                        "--usec-checks must be >= 1000\n");
        return 2;
    }
    return 0;
}

static int want(const options *o, const char *group)
{
    if (o->only == NULL || strcmp(o->only, group) == 0)
        return 1;
    return strcmp(group, "window_edge") == 0 &&
           strcmp(o->only, "accuracy") == 0;
}

/* ---- small helpers ---------------------------------------------------- */

static int64_t rt_ns(void) /* CLOCK_REALTIME: the clock Redis TIME reads */
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts;

    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void sleep_until_rt(int64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000LL),
                          (long)(t_ns % 1000000000LL)};

    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* ---- output ----------------------------------------------------------- */

static const text_layout layout = {30, 12, 2, 8, 24, 3};

static void emit(const options *o, const figure *f)
{
    emit_figure(f, o->json, &layout);
}

/* ---- the control connection (hiredis, blocking) ------------------------ */

static redisContext *ctl;

static redisReply *ctl_cmd(char *err, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = bvcmd(ctl, err, fmt, ap);
    va_end(ap);
    return r;
}

static int ctl_ok(char *err, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = bvcmd(ctl, err, fmt, ap);
    va_end(ap);
    if (r == NULL)
        return -1;
    freeReplyObject(r);
    return 0;
}

typedef struct cmdstat {
    double calls, usec_per_call, failed, rejected;
} cmdstat;

static int cmdstat_get(const char *cmd, cmdstat *cs, char *err)
{
    char key[64], buf[256];

    snprintf(key, sizeof key, "cmdstat_%s", cmd);
    if (info_str(ctl, "commandstats", key, buf, sizeof buf, err) != 0)
        return -1;
    cs->calls = kv_num(buf, "calls");
    cs->usec_per_call = kv_num(buf, "usec_per_call");
    cs->failed = kv_num(buf, "failed_calls");
    cs->rejected = kv_num(buf, "rejected_calls");
    return 0;
}

/* FLUSHALL and wait until lazy freeing (if any) is over. */
static int flush_wait(char *err)
{
    double pending = 1;

    if (ctl_ok(err, "FLUSHALL SYNC") != 0)
        return -1;
    for (int i = 0; i < 1000 && pending > 0; i++) {
        if (info_num(ctl, "memory", "lazyfree_pending_objects", &pending, err))
            return -1;
        if (pending > 0)
            sleep_s(0.01);
    }
    if (pending > 0)
        return snprintf(err, ERRLEN, "lazyfree still pending after 10 s"), -1;
    return 0;
}

/* Wait until only `n` clients (ours) remain connected. */
static int clients_wait(double n, char *err)
{
    double c = n + 1;

    for (int i = 0; i < 500 && c > n; i++) {
        if (info_num(ctl, "clients", "connected_clients", &c, err))
            return -1;
        if (c > n)
            sleep_s(0.01);
    }
    if (c > n)
        return snprintf(err, ERRLEN, "%g clients still connected", c), -1;
    return 0;
}

/* The library's key for a client "user:<digits>", read back from Redis
 * (RANDOMKEY: the database holds only the library's keys at that point),
 * as a redis-benchmark template: "rl:{user:__rand_int__}<rest>".  So the
 * reference runs on keys of the library's own shape, whatever it is. */
static int key_template(char *out, size_t outlen, char *err)
{
    redisReply *r = ctl_cmd(err, "RANDOMKEY");
    const char *d;
    int rc = -1;

    if (r == NULL)
        return -1;
    if (r->type != REDIS_REPLY_STRING) {
        snprintf(err, ERRLEN, "RANDOMKEY: the library left no key");
    } else if (strncmp(r->str, "rl:{user:", 9) != 0) {
        snprintf(err, ERRLEN, "library key \"%.100s\" is not rl:{user:...}",
                 r->str);
    } else {
        for (d = r->str + 9; isdigit((unsigned char)*d); d++)
            ;
        if (d == r->str + 9 || *d != '}')
            snprintf(err, ERRLEN, "library key \"%.100s\": unexpected shape",
                     r->str);
        else if ((size_t)snprintf(out, outlen, "rl:{user:__rand_int__}%s",
                                  d + 1) < outlen)
            rc = 0;
        else
            snprintf(err, ERRLEN, "library key \"%.100s\" too long", r->str);
    }
    freeReplyObject(r);
    return rc;
}

/* Mean length of every key name in the database (SCAN), and one of them. */
static int key_lengths(double *mean, char *example, size_t exlen, char *err)
{
    char cursor[32] = "0";
    double sum = 0, n = 0;

    example[0] = '\0';
    do {
        redisReply *r = ctl_cmd(err, "SCAN %s COUNT 1000", cursor);
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            return snprintf(err, ERRLEN, "SCAN: unexpected reply"), -1;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const redisReply *k = r->element[1]->element[i];
            sum += (double)k->len;
            n++;
            if (example[0] == '\0')
                snprintf(example, exlen, "%s", k->str);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    *mean = n > 0 ? sum / n : 0;
    return 0;
}

/* ---- CPU accounting ------------------------------------------------------ */

typedef struct cpu_snap {
    uint64_t wall;     /* ns, monotonic                             */
    double busy;       /* s, all CPUs (/proc/stat, not idle/iowait) */
    double steal;      /* s, taken by the hypervisor                */
    double self;       /* s, this process and its reaped children   */
    double redis;      /* s, redis-server (INFO cpu)                */
    double preempt;    /* redis-server main thread's involuntary
                          context switches (/proc/<pid>/status)     */
    double csw;        /* this process's context switches, all threads */
} cpu_snap;

typedef struct cpu_use {
    double client, redis, other, steal; /* cores */
    double preempt;                     /* per second */
    double csw;                         /* per second */
} cpu_use;

static long redis_pid; /* INFO server process_id: Redis runs here */

static double involuntary_switches(long pid)
{
    char path[64], line[128];
    double v = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0)
            v = strtod(line + 27, NULL);
    fclose(f);
    return v;
}

static int cpu_take(cpu_snap *s, char *err)
{
    struct rusage ru, rc;
    double su, ss;

    memset(s, 0, sizeof *s);
    machine_cpu(&s->busy, &s->steal);
    getrusage(RUSAGE_SELF, &ru);
    getrusage(RUSAGE_CHILDREN, &rc);
    s->self = rusage_seconds(&ru) + rusage_seconds(&rc);
    if (info_num(ctl, "cpu", "used_cpu_sys", &ss, err) ||
        info_num(ctl, "cpu", "used_cpu_user", &su, err))
        return -1;
    s->redis = ss + su;
    s->preempt = involuntary_switches(redis_pid);
    s->csw = (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
    s->wall = now_ns();
    return 0;
}

static cpu_use cpu_diff(const cpu_snap *a, const cpu_snap *b)
{
    double w = (double)(b->wall - a->wall) / 1e9;
    cpu_use u;

    if (w <= 0)
        w = 1e-9;
    u.client = (b->self - a->self) / w;
    u.redis = (b->redis - a->redis) / w;
    u.other = (b->busy - a->busy) / w - u.client - u.redis;
    if (u.other < 0)
        u.other = 0; /* /proc/stat ticks are coarse */
    u.steal = (b->steal - a->steal) / w;
    u.preempt = (b->preempt - a->preempt) / w;
    u.csw = (b->csw - a->csw) / w;
    return u;
}

/* ---- limiters ---------------------------------------------------------------- */

static int make_limiter(const options *o, const char *rules,
                        rl_limiter **out, char *err)
{
    rl_config *cfg;
    rl_limiter *lim = NULL;
    char uri[64];
    int rc;

    *out = NULL;
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", o->port);
    if ((cfg = rl_config_new()) == NULL) {
        set_err(err, "rl_config_new", RL_ENOMEM, NULL);
        return RL_ENOMEM;
    }
    if ((rc = rl_config_set(cfg, "store", uri)) != RL_OK) {
        set_err(err, "rl_config_set(store)", rc, errtext(NULL));
        rl_config_free(cfg);
        return rc;
    }
    /* A loaded 2-core machine can stall a reply past the 5 ms default;
     * that would be decided by the fallback, which is counted as an error. */
    if ((rc = rl_config_set(cfg, "timeout_ms", "1000")) != RL_OK) {
        set_err(err, "rl_config_set(timeout_ms)", rc, errtext(NULL));
        rl_config_free(cfg);
        return rc;
    }
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    if (rc != RL_OK) {
        set_err(err, "rl_limiter_new", rc, errtext(NULL));
        return rc;
    }
    if ((rc = rl_rules_load_string(lim, rules)) != RL_OK) {
        set_err(err, "rl_rules_load_string", rc, errtext(lim));
        rl_limiter_free(lim);
        return rc;
    }
    *out = lim;
    return RL_OK;
}

static void one_rule(char *buf, size_t len, const char *id, int algo,
                     long long limit, long long window_s, long long burst)
{
    char b[48] = "";

    if (burst > 0)
        snprintf(b, sizeof b, ",\"burst\":%lld", burst);
    snprintf(buf, len,
             "{\"rule_id\":\"%s\",\"dimension\":\"user\",\"limit\":%lld,"
             "\"window_seconds\":%lld,\"algorithm\":\"%s\"%s}",
             id, limit, window_s, algo_names[algo], b);
}

/* ---- throughput (groups 1 and 2) ------------------------------------------ */

#define MANY_THREADS 2  /* throughput_64_many: 2 threads x 32 per call */
#define MANY_PER_CALL 32

typedef struct tp_run {
    rl_limiter *lim;
    unsigned long long nkeys;
    int per_call;      /* > 1: rl_check_many() of per_call requests */
    _Atomic int phase; /* 0 warm-up, 1 measured, 2 stop */
} tp_run;

typedef struct tp_worker {
    tp_run *run;
    uint64_t rng;
    unsigned long long calls, fallback, denied;
    hist h;
    int rc;
    char err[ERRLEN];
} tp_worker;

/* throughput_64_many: per_call requests at a time in one rl_check_many()
 * (the rule counts by user: the keys are the same "user:<12 digits>");
 * each request's latency is its call's. */
static void *tp_many_main(void *arg)
{
    tp_worker *w = arg;
    tp_run *r = w->run;
    char user[MANY_PER_CALL][16];
    rl_request req[MANY_PER_CALL];
    rl_result res[MANY_PER_CALL];
    int codes[MANY_PER_CALL], n = r->per_call, ph;

    while ((ph = atomic_load(&r->phase)) < 2) {
        uint64_t t0, t1;
        int rc;

        for (int i = 0; i < n; i++) {
            snprintf(user[i], sizeof user[i], "%012llu",
                     (unsigned long long)pick(&w->rng, r->nkeys));
            req[i] = (rl_request){.user = user[i], .cost = 1};
        }
        t0 = now_ns();
        rc = rl_check_many(r->lim, req, res, codes, (size_t)n);
        t1 = now_ns();
        if (rc != RL_OK) {
            set_err(w->err, "rl_check_many", rc, errtext(r->lim));
            w->rc = rc;
            atomic_store(&r->phase, 2);
            break;
        }
        for (int i = 0; i < n; i++)
            if (res[i].flags & RL_FLAG_FALLBACK)
                w->fallback++;
        if (ph == 1 && atomic_load(&r->phase) == 1)
            for (int i = 0; i < n; i++) {
                w->calls++;
                hist_add(&w->h, t1 - t0);
                if (!res[i].allowed)
                    w->denied++;
            }
    }
    return NULL;
}

static void *tp_main(void *arg)
{
    tp_worker *w = arg;
    tp_run *r = w->run;
    char key[32];
    int ph;

    while ((ph = atomic_load(&r->phase)) < 2) {
        rl_result res;
        uint64_t t0, t1;
        int rc;

        /* The names redis-benchmark's __rand_int__ makes: 12 digits. */
        snprintf(key, sizeof key, "user:%012llu",
                 (unsigned long long)pick(&w->rng, r->nkeys));
        t0 = now_ns();
        rc = rl_allow(r->lim, key, "bench", 1, &res);
        t1 = now_ns();
        if (rc != RL_OK) {
            set_err(w->err, "rl_allow", rc, errtext(r->lim));
            w->rc = rc;
            atomic_store(&r->phase, 2);
            break;
        }
        if (res.flags & RL_FLAG_FALLBACK)
            w->fallback++;
        if (ph == 1 && atomic_load(&r->phase) == 1) {
            w->calls++;
            hist_add(&w->h, t1 - t0);
            if (!res.allowed)
                w->denied++;
        }
    }
    return NULL;
}

typedef struct rb_result {
    double rps, p50_ms, p99_ms;
    double wall_s;
    char cmd[1024];
} rb_result;

/* redis-benchmark -n n -r keyspace with the library's script: KEYS[1] is
 * `key` (with __rand_int__), ARGV the time "0", "c", and what
 * redis_node.c sends for one op (lua/check.lua): "11", where the
 * requests begin after a table of one rule (ARGV[4..10]: algorithm,
 * limit, burst, window ms, p, q, and "0" replaced shapes), then one
 * request of one key ("1" "1"): the index of its rule "4", cost, soft and
 * the field "" (the plain layout).  --csv; the last line has the figures.
 * The library may batch many requests into one call of this script; the
 * reference sends one request per call. */
static int run_redis_benchmark(const options *o, const char *sha,
                               int clients, int pipeline,
                               unsigned long long n,
                               unsigned long long keyspace, const char *key,
                               const long long v8[8], rb_result *out,
                               char *err)
{
    const char *prog = getenv("REDIS_BENCHMARK");
    char port[16], c[16], P[16], nb[32], r[32], a8[8][24], buf[8192];
    char *argv[40];
    int ac = 0, fds[2], status = 0;
    size_t got = 0, len = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid;
    uint64_t t0;
    char *line, *fld[16];
    int nf = 0;

    if (prog == NULL || *prog == '\0')
        prog = "redis-benchmark";
    snprintf(port, sizeof port, "%d", o->port);
    snprintf(c, sizeof c, "%d", clients);
    snprintf(P, sizeof P, "%d", pipeline);
    snprintf(nb, sizeof nb, "%llu", n);
    snprintf(r, sizeof r, "%llu", keyspace);
    for (int i = 0; i < 8; i++)
        snprintf(a8[i], sizeof a8[i], "%lld", v8[i]);
    {
        const char *v[] = {prog,  "-h",  "127.0.0.1", "-p",  port,  "-c",
                           c,     "-P",  P,           "-n",  nb,    "-r",
                           r,     "--csv", "EVALSHA", sha,   "1",   key,
                           "0",   "c",   "11",
                           a8[0], a8[1], a8[2],       a8[3],
                           a8[4], a8[5], "0",
                           "1",   "1",   "4",         a8[6], a8[7], ""};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            argv[ac++] = (char *)v[i];
            len += (size_t)snprintf(out->cmd + len,
                                    len < sizeof out->cmd ? sizeof out->cmd - len : 0,
                                    "%s%s", i ? " " : "", v[i]);
        }
        argv[ac] = NULL;
    }
    if (pipe(fds) != 0)
        return snprintf(err, ERRLEN, "pipe: %s", strerror(errno)), -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    t0 = now_ns();
    if ((errno = posix_spawnp(&pid, prog, &fa, NULL, argv, environ)) != 0) {
        snprintf(err, ERRLEN, "cannot run %s: %s", prog, strerror(errno));
        posix_spawn_file_actions_destroy(&fa);
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    for (;;) {
        ssize_t k = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
        if (got == sizeof buf - 1)
            got = 0; /* keep the tail: the figures are on the last line */
    }
    buf[got] = '\0';
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    out->wall_s = (double)(now_ns() - t0) / 1e9;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return snprintf(err, ERRLEN, "%s failed (status %d)", prog, status),
               -1;
    /* "test","rps","avg","min","p50","p95","p99","max" -- the last line. */
    line = strrchr(buf, '"');
    while (line && line > buf && line[-1] != '\n')
        line--;
    if (line == NULL)
        return snprintf(err, ERRLEN, "%s: no CSV output", prog), -1;
    for (char *s = line; nf < 16 && (s = strchr(s, '"')) != NULL;) {
        char *e = strchr(s + 1, '"');
        if (e == NULL)
            break;
        *e = '\0';
        fld[nf++] = s + 1;
        s = e + 1;
    }
    if (nf < 8 || strncmp(fld[0], "EVALSHA", 7) != 0)
        return snprintf(err, ERRLEN, "%s: unexpected CSV \"%.200s\"", prog,
                        line), -1;
    out->rps = strtod(fld[1], NULL);
    out->p50_ms = strtod(fld[4], NULL);
    out->p99_ms = strtod(fld[6], NULL);
    if (!(out->rps > 0))
        return snprintf(err, ERRLEN, "%s: no rate", prog), -1;
    return 0;
}

static int group_throughput(const options *o, const char *sha, int threads,
                            int per_call, char *err)
{
    const char *name = per_call > 1 ? "throughput_64_many"
                       : threads > 1 ? "throughput_64" : "throughput_1";
    tp_run run;
    tp_worker *w = NULL;
    pthread_t tid[TP_THREADS];
    int started = 0, rc = -1, clients = threads * per_call;
    int pipeline = clients > 1 ? 16 : 1;
    char rules[512], rule[400], refname[48], tmpl[128];
    /* sliding window (0), limit, burst 0, window ms, p, q, cost 1, soft 0;
     * p and q as algo_params_init() computes them. */
    long long v8[8] = {0, BIG_LIMIT, 0, BIG_WINDOW_S * 1000LL, 0, 0, 1, 0};
    long long g = gcd64(v8[3], v8[1]);
    store_redis_stats s0, s1;
    cpu_snap c0, c1, r0, r1;
    cpu_use cu, ru;
    cmdstat cs = {0}, rcs = {0}, pxt = {0}, rpxt = {0};
    hist all;
    unsigned long long calls = 0, fallback = 0, denied = 0;
    uint64_t t0 = 0, t1 = 0;
    double secs, rate, warm = o->seconds / 10 < 1 ? o->seconds / 10 : 1;
    rb_result rb;

    v8[4] = v8[3] / g;
    v8[5] = v8[1] / g;
    memset(&run, 0, sizeof run);
    memset(&all, 0, sizeof all);
    one_rule(rule, sizeof rule, "bench", 0, BIG_LIMIT, BIG_WINDOW_S, 0);
    snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
    if (flush_wait(err) != 0)
        return -1;
    if (make_limiter(o, rules, &run.lim, err) != RL_OK)
        return -1;
    run.nkeys = o->keys;
    run.per_call = per_call;
    if ((w = calloc((size_t)threads, sizeof *w)) == NULL) {
        snprintf(err, ERRLEN, "out of memory");
        goto out;
    }
    for (int t = 0; t < threads; t++) {
        w[t].run = &run;
        w[t].rng = 0xBE4C0000ULL + (uint64_t)t * 7919;
        if (pthread_create(&tid[t], NULL, per_call > 1 ? tp_many_main
                                                       : tp_main,
                           &w[t]) != 0) {
            snprintf(err, ERRLEN, "pthread_create failed");
            atomic_store(&run.phase, 2);
            goto join;
        }
        started++;
    }
    sleep_s(warm);
    if (ctl_ok(err, "CONFIG RESETSTAT") || cpu_take(&c0, err)) {
        atomic_store(&run.phase, 2);
        goto join;
    }
    store_redis_stats_get(limiter_store(run.lim), &s0);
    t0 = now_ns();
    atomic_store(&run.phase, 1);
    sleep_s(o->seconds);
    if (atomic_load(&run.phase) == 1)
        atomic_store(&run.phase, 0); /* stop counting; keep the load on */
    t1 = now_ns();
    store_redis_stats_get(limiter_store(run.lim), &s1);
    if (cpu_take(&c1, err) || cmdstat_get("evalsha", &cs, err) ||
        cmdstat_get("pexpiretime", &pxt, err)) {
        atomic_store(&run.phase, 2);
        goto join;
    }
    atomic_store(&run.phase, 2);
    rc = 0;
join:
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < started; t++) {
        if (w[t].rc != 0 && rc == 0) {
            memcpy(err, w[t].err, ERRLEN);
            rc = -1;
        }
        calls += w[t].calls;
        fallback += w[t].fallback;
        denied += w[t].denied;
        hist_merge(&all, &w[t].h);
    }
    rl_limiter_free(run.lim);
    run.lim = NULL;
    if (rc != 0)
        goto out;
    rc = -1;
    if (key_template(tmpl, sizeof tmpl, err))
        goto out;
    secs = (double)(t1 - t0) / 1e9;
    rate = (double)calls / secs;
    cu = cpu_diff(&c0, &c1);

    /* The reference: the same script, arguments and key space, from an
     * empty database, for as many requests as the library made. */
    if (flush_wait(err) || clients_wait(1, err) ||
        ctl_ok(err, "CONFIG RESETSTAT") || cpu_take(&r0, err))
        goto out;
    if (run_redis_benchmark(o, sha, clients, pipeline, calls, o->keys, tmpl,
                            v8, &rb, err))
        goto out;
    if (cpu_take(&r1, err) || cmdstat_get("evalsha", &rcs, err) ||
        cmdstat_get("pexpiretime", &rpxt, err))
        goto out;
    if (rcs.calls < (double)calls || rcs.failed > 0 || rcs.rejected > 0) {
        snprintf(err, ERRLEN, "redis-benchmark: %.0f EVALSHA calls, %.0f "
                 "failed, %.0f rejected (expected %llu, 0, 0)", rcs.calls,
                 rcs.failed, rcs.rejected, calls);
        goto out;
    }
    ru = cpu_diff(&r0, &r1);
    snprintf(refname, sizeof refname, "redis_benchmark_c%d_P%d", clients,
             pipeline);

    {
        figure f = {0};
        f.name = name;
        f.value = rate;
        f.unit = "checks/s";
        f.nrefs = 1;
        f.ref[0] = rb.rps;
        f.ref_name[0] = refname;
        xnum(&f, "threads", threads);
        xnum(&f, "per_call", per_call);
        xnum(&f, "keys", (double)o->keys);
        xnum(&f, "seconds", secs);
        xnum(&f, "checks", (double)calls);
        xnum(&f, "target_min_ratio", clients > 1 ? TARGET_TP64 : TARGET_TP1);
        xnum(&f, "fallback", (double)fallback);
        xnum(&f, "denied", (double)denied);
        xnum(&f, "server_usec_per_call", cs.usec_per_call);
        xnum(&f, "ref_server_usec_per_call", rcs.usec_per_call);
        /* Checks that found state (the script reads its expiry) rather
         * than creating the key: the same mix on both sides, or the
         * comparison is off. */
        xnum(&f, "existing_share", cs.calls > 0 ? pxt.calls / cs.calls : NAN);
        xnum(&f, "ref_existing_share",
             rcs.calls > 0 ? rpxt.calls / rcs.calls : NAN);
        xnum(&f, "client_cpu", cu.client);
        xnum(&f, "redis_cpu", cu.redis);
        xnum(&f, "other_cpu", cu.other);
        xnum(&f, "ref_client_cpu", ru.client);
        xnum(&f, "ref_redis_cpu", ru.redis);
        xnum(&f, "ref_other_cpu", ru.other);
        xnum(&f, "steal_cpu", cu.steal + ru.steal);
        xnum(&f, "client_ctx_switches_per_check", cu.csw / rate);
        xnum(&f, "redis_preempted_per_s", cu.preempt);
        xnum(&f, "ref_redis_preempted_per_s", ru.preempt);
        xnum(&f, "ref_seconds", rb.wall_s);
        xnum(&f, "loadavg_1m", loadavg1());
        xstr(&f, "ref_cmd", rb.cmd);
        emit(o, &f);
    }
    {
        figure f = {0};
        char n50[48], n99[48], nfb[48], nbt[48];
        snprintf(n50, sizeof n50, "%s_p50", name);
        snprintf(n99, sizeof n99, "%s_p99", name);
        snprintf(nfb, sizeof nfb, "%s_fallback", name);
        snprintf(nbt, sizeof nbt, "%s_batching", name);
        f.name = n50;
        f.value = hist_pct(&all, 0.50) / 1000.0;
        f.unit = "us";
        if (clients == 1) { /* one in flight both sides: comparable */
            f.nrefs = 1;
            f.ref[0] = rb.p50_ms * 1000.0;
            f.ref_name[0] = refname;
        } else {
            xnum(&f, "ref_p50_us", rb.p50_ms * 1000.0);
        }
        xnum(&f, "samples", (double)all.n);
        emit(o, &f);
        f = (figure){0};
        f.name = n99;
        f.value = hist_pct(&all, 0.99) / 1000.0;
        f.unit = "us";
        if (clients == 1) {
            f.nrefs = 1;
            f.ref[0] = rb.p99_ms * 1000.0;
            f.ref_name[0] = refname;
        } else {
            xnum(&f, "ref_p99_us", rb.p99_ms * 1000.0);
        }
        xnum(&f, "p999_us", hist_pct(&all, 0.999) / 1000.0);
        emit(o, &f);
        f = (figure){0};
        f.name = nfb; /* results decided by the local fallback: errors */
        f.value = (double)fallback;
        f.unit = "checks";
        xnum(&f, "timeouts", (double)(s1.timeouts - s0.timeouts));
        xnum(&f, "down_fails", (double)(s1.down_fails - s0.down_fails));
        xnum(&f, "reconnects", (double)(s1.reconnects - s0.reconnects));
        emit(o, &f);
        f = (figure){0};
        f.name = nbt; /* the store's own batching: checks per script call */
        f.value = s1.batches > s0.batches
                      ? (double)(s1.checks - s0.checks) /
                            (double)(s1.batches - s0.batches)
                      : NAN;
        f.unit = "checks/script";
        xnum(&f, "checks", (double)(s1.checks - s0.checks));
        xnum(&f, "script_calls", (double)(s1.batches - s0.batches));
        xnum(&f, "writes", (double)(s1.writes - s0.writes));
        xnum(&f, "noscript", (double)(s1.noscript - s0.noscript));
        xnum(&f, "refunds", (double)(s1.refunds - s0.refunds));
        emit(o, &f);
    }
    rc = 0;
out:
    if (run.lim)
        rl_limiter_free(run.lim);
    free(w);
    return rc;
}

/* ---- a pool of threads doing a fixed number of checks ---------------------- */

typedef struct job {
    rl_limiter *lim;
    const char *rule_id;
    unsigned long long total;  /* checks                                 */
    unsigned long long nkeys;  /* random keys < nkeys; 0: key = ticket   */
    _Atomic unsigned long long next;
} job;

typedef struct job_worker {
    job *j;
    uint64_t rng;
    unsigned long long fallback, denied;
    int rc;
    char err[ERRLEN];
} job_worker;

static void *job_main(void *arg)
{
    job_worker *w = arg;
    job *j = w->j;
    char key[32];
    unsigned long long t;

    while ((t = atomic_fetch_add(&j->next, 1)) < j->total) {
        rl_result res;
        int rc;

        snprintf(key, sizeof key, "user:%llu",
                 j->nkeys ? (unsigned long long)pick(&w->rng, j->nkeys) : t);
        if ((rc = rl_allow(j->lim, key, j->rule_id, 1, &res)) != RL_OK) {
            set_err(w->err, "rl_allow", rc, errtext(j->lim));
            w->rc = rc;
            atomic_store(&j->next, j->total);
            break;
        }
        if (res.flags & RL_FLAG_FALLBACK)
            w->fallback++;
        if (!res.allowed)
            w->denied++;
    }
    return NULL;
}

/* Runs the job on n threads; *fallback, *denied are summed. */
static int run_job(job *j, int n, unsigned long long *fallback,
                   unsigned long long *denied, char *err)
{
    job_worker w[FILL_THREADS];
    pthread_t tid[FILL_THREADS];
    int started = 0, rc = 0;

    memset(w, 0, sizeof w);
    atomic_store(&j->next, 0);
    for (int t = 0; t < n && t < FILL_THREADS; t++) {
        w[t].j = j;
        w[t].rng = 0x10B0000ULL + (uint64_t)t * 104729;
        if (pthread_create(&tid[t], NULL, job_main, &w[t]) != 0) {
            atomic_store(&j->next, j->total);
            snprintf(err, ERRLEN, "pthread_create failed");
            rc = -1;
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < started; t++) {
        if (w[t].rc != 0 && rc == 0) {
            memcpy(err, w[t].err, ERRLEN);
            rc = -1;
        }
        *fallback += w[t].fallback;
        *denied += w[t].denied;
    }
    return rc;
}

/* ---- usec_per_call (group 3) ------------------------------------------------- */

static int group_usec(const options *o, const char *sha, char *err)
{
    unsigned long long nk = o->keys < USEC_KEYS ? o->keys : USEC_KEYS;
    unsigned long long m = o->usec_checks;
    double pair = 0;
    cmdstat incr, pexp;
    uint64_t rng = 0xC0FFEEULL;

    /* The reference: INCR + PEXPIRE on existing keys, pipelined. */
    if (flush_wait(err))
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        unsigned long long n = pass == 0 ? nk : m;
        if (pass == 1 && ctl_ok(err, "CONFIG RESETSTAT"))
            return -1;
        for (unsigned long long i = 0; i < n;) {
            unsigned long long batch = n - i < 500 ? n - i : 500;
            for (unsigned long long b = 0; b < batch; b++) {
                unsigned long long k = pass == 0 ? i + b : pick(&rng, nk);
                redisAppendCommand(ctl, "INCR ref:%llu", k);
                redisAppendCommand(ctl, "PEXPIRE ref:%llu 60000", k);
            }
            for (unsigned long long b = 0; b < 2 * batch; b++) {
                void *rep = NULL;
                if (redisGetReply(ctl, &rep) != REDIS_OK) {
                    snprintf(err, ERRLEN, "INCR/PEXPIRE: %s", ctl->errstr);
                    return -1;
                }
                if (((redisReply *)rep)->type != REDIS_REPLY_INTEGER) {
                    snprintf(err, ERRLEN, "INCR/PEXPIRE: unexpected reply");
                    freeReplyObject(rep);
                    return -1;
                }
                freeReplyObject(rep);
            }
            i += batch;
        }
    }
    if (cmdstat_get("incr", &incr, err) || cmdstat_get("pexpire", &pexp, err))
        return -1;
    pair = incr.usec_per_call + pexp.usec_per_call;

    for (int a = 0; a < 4; a++) {
        char rule[400], rules[512];
        rl_limiter *lim = NULL;
        job j;
        unsigned long long fb = 0, den = 0;
        cmdstat cs, get, set, pxt, tim, hot, hotpxt;
        char tmpl[128];
        rb_result rb;
        figure f = {0};

        one_rule(rule, sizeof rule, "u", a, SLOW_LIMIT, SLOW_WINDOW_S, 0);
        snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
        if (flush_wait(err) || make_limiter(o, rules, &lim, err) != RL_OK)
            return -1;
        memset(&j, 0, sizeof j);
        j.lim = lim;
        j.rule_id = "u";
        j.total = nk; /* every key once: the measured checks find state */
        if (run_job(&j, FILL_THREADS, &fb, &den, err) ||
            ctl_ok(err, "CONFIG RESETSTAT")) {
            rl_limiter_free(lim);
            return -1;
        }
        j.total = m;
        j.nkeys = nk;
        if (run_job(&j, USEC_THREADS, &fb, &den, err)) {
            rl_limiter_free(lim);
            return -1;
        }
        rl_limiter_free(lim);
        if (key_template(tmpl, sizeof tmpl, err))
            return -1;
        if (cmdstat_get("evalsha", &cs, err) || cmdstat_get("get", &get, err) ||
            cmdstat_get("set", &set, err) ||
            cmdstat_get("pexpiretime", &pxt, err) ||
            cmdstat_get("time", &tim, err))
            return -1;
        /* The library batches requests that queue up into one script
         * call, so there are fewer calls than checks: the figure is Redis
         * CPU per CHECK, total script time over checks made. */
        if (cs.calls < 1 || cs.failed > 0) {
            snprintf(err, ERRLEN, "usec_per_call %s: %.0f EVALSHA calls "
                     "(%.0f failed) for %llu checks", algo_names[a], cs.calls,
                     cs.failed, m);
            return -1;
        }
        double checks = (double)m;
        {
            /* The same script and arguments from redis-benchmark -c 64
             * -P 16, which keeps Redis busy: the script's cost "hot".  A
             * warm-up pass first, so it too updates existing keys. */
            long long bucket = a == 1 || a == 3;
            long long wms = SLOW_WINDOW_S * 1000LL,
                      g = gcd64(wms, SLOW_LIMIT);
            long long v8[8] = {a,         SLOW_LIMIT, bucket ? SLOW_LIMIT : 0,
                               wms,       wms / g,    SLOW_LIMIT / g,
                               1,         0};
            if (flush_wait(err) ||
                run_redis_benchmark(o, sha, 64, 16, 4 * nk, nk, tmpl, v8,
                                    &rb, err) ||
                ctl_ok(err, "CONFIG RESETSTAT") ||
                run_redis_benchmark(o, sha, 64, 16, m, nk, tmpl, v8, &rb,
                                    err) ||
                cmdstat_get("evalsha", &hot, err) ||
                cmdstat_get("pexpiretime", &hotpxt, err))
                return -1;
            if (hot.calls < (double)m || hot.failed > 0) {
                snprintf(err, ERRLEN, "usec_per_call %s: redis-benchmark "
                         "made %.0f EVALSHA calls (%.0f failed), expected "
                         "%llu", algo_names[a], hot.calls, hot.failed, m);
                return -1;
            }
        }
        {
            char name[48];
            snprintf(name, sizeof name, "usec_per_call_%s", algo_names[a]);
            f.name = name;
            f.value = cs.calls * cs.usec_per_call / checks;
            f.unit = "us";
            if (o->peer_usec > 0) {
                f.nrefs = 2;
                f.ref[0] = o->peer_usec;
                f.ref_name[0] = "peer_rate_limiter_flexible";
                f.ref[1] = pair;
                f.ref_name[1] = "incr_plus_pexpire";
            } else {
                f.nrefs = 1;
                f.ref[0] = pair;
                f.ref_name[0] = "incr_plus_pexpire";
            }
            xnum(&f, "checks", checks);
            xnum(&f, "script_calls", cs.calls);
            xnum(&f, "checks_per_call", checks / cs.calls);
            xnum(&f, "usec_per_script_call", cs.usec_per_call);
            xnum(&f, "keys", (double)nk);
            xnum(&f, "threads", USEC_THREADS);
            /* Commands the script ran, per check, and their own cost: the
             * rest of usec_per_call is the Lua interpreter. */
            xnum(&f, "get_per_check", get.calls / checks);
            xnum(&f, "set_per_check", set.calls / checks);
            xnum(&f, "pexpiretime_per_check", pxt.calls / checks);
            xnum(&f, "time_per_check", tim.calls / checks);
            xnum(&f, "nested_usec_per_check",
                 (get.calls * get.usec_per_call + set.calls * set.usec_per_call +
                  pxt.calls * pxt.usec_per_call + tim.calls * tim.usec_per_call) /
                     checks);
            xnum(&f, "hot_usec_per_call", hot.usec_per_call);
            xnum(&f, "hot_pexpiretime_per_check", hotpxt.calls / hot.calls);
            xnum(&f, "incr_usec", incr.usec_per_call);
            xnum(&f, "pexpire_usec", pexp.usec_per_call);
            xnum(&f, "fallback", (double)fb);
            xnum(&f, "denied", (double)den);
            emit(o, &f);
        }
    }
    return 0;
}

/* ---- bytes_per_key (group 4) ------------------------------------------------- */

static int group_bytes(const options *o, char *err)
{
    unsigned long long n = o->mem_keys;

    for (int a = 0; a < 4; a++) {
        char rule[400], rules[512], ks[128], name[48];
        rl_limiter *lim = NULL;
        job j;
        unsigned long long fb = 0, den = 0;
        double before, after, dbsize = 0, expires = 0, name_bytes = 0;
        char example[128];
        redisReply *r;
        figure f = {0};
        uint64_t t0;

        one_rule(rule, sizeof rule, "b", a, SLOW_LIMIT, SLOW_WINDOW_S, 0);
        snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
        if (flush_wait(err) || clients_wait(1, err) ||
            used_memory_settled(ctl, &before, err))
            return -1;
        if (make_limiter(o, rules, &lim, err) != RL_OK)
            return -1;
        memset(&j, 0, sizeof j);
        j.lim = lim;
        j.rule_id = "b";
        j.total = n;
        t0 = now_ns();
        if (run_job(&j, FILL_THREADS, &fb, &den, err)) {
            rl_limiter_free(lim);
            return -1;
        }
        t0 = now_ns() - t0;
        /* Measure with the same clients connected as before: ours only. */
        rl_limiter_free(lim);
        if (clients_wait(1, err) || used_memory_settled(ctl, &after, err))
            return -1;
        if ((r = ctl_cmd(err, "DBSIZE")) == NULL)
            return -1;
        dbsize = (double)r->integer;
        freeReplyObject(r);
        if (info_str(ctl, "keyspace", "db0", ks, sizeof ks, err))
            return -1;
        expires = kv_num(ks, "expires");
        if (key_lengths(&name_bytes, example, sizeof example, err))
            return -1;
        if (dbsize != (double)n || fb != 0) {
            snprintf(err, ERRLEN, "bytes_per_key %s: %.0f keys in Redis, "
                     "expected %llu (%llu fallback results)", algo_names[a],
                     dbsize, n, fb);
            return -1;
        }
        snprintf(name, sizeof name, "bytes_per_key_%s", algo_names[a]);
        f.name = name;
        f.value = (after - before) / (double)n;
        f.unit = "B";
        f.nrefs = 1;
        f.ref[0] = PEER_BYTES_PER_KEY;
        f.ref_name[0] = "peer_gcra_string_35B_names";
        xnum(&f, "keys", (double)n);
        xnum(&f, "key_name_bytes_mean", name_bytes);
        xstr(&f, "key_example", example);
        xnum(&f, "peer_key_name_bytes", 35);
        xnum(&f, "used_memory_before", before);
        xnum(&f, "used_memory_after", after);
        xnum(&f, "expires", expires);
        xnum(&f, "target_max", PEER_BYTES_PER_KEY);
        xnum(&f, "fill_checks_per_s", (double)n / ((double)t0 / 1e9));
        xnum(&f, "denied", (double)den);
        emit(o, &f);
    }
    return 0;
}

/* ---- accuracy (group 5): 8 processes x 4 threads ------------------------------ */

static const char *const acc_rule_ids[4] = {"sw", "tb", "fw", "gc"};

typedef struct acc_slot {
    unsigned long long admitted[4], checks[4], fallback;
    int64_t first_ns, last_ns; /* CLOCK_REALTIME */
    int rc;
    char err[200];
} acc_slot;

typedef struct acc_shared {
    _Atomic int ready;  /* children whose threads wait for `go`       */
    _Atomic int go;     /* 0 wait, 1 run [start_ns, stop_ns), 2 quit   */
    int64_t start_ns, stop_ns;
    char key[64];
    acc_slot slot[ACC_PROCS * ACC_THREADS];
} acc_shared;

typedef struct acc {
    acc_shared *sh;
    pid_t pid[ACC_PROCS];
    int nproc;
} acc;

static void futex_wait_shared(_Atomic int *w, int val)
{
    syscall(SYS_futex, (int *)w, FUTEX_WAIT, val, NULL, NULL, 0);
}

static void futex_wake_shared(_Atomic int *w)
{
    syscall(SYS_futex, (int *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

typedef struct acc_thread {
    acc_shared *sh;
    rl_limiter *lim;
    acc_slot *slot;
} acc_thread;

static void *acc_thread_main(void *arg)
{
    acc_thread *t = arg;
    acc_shared *sh = t->sh;
    acc_slot *s = t->slot;

    while (atomic_load(&sh->go) == 0)
        futex_wait_shared(&sh->go, 0);
    if (atomic_load(&sh->go) != 1)
        return NULL;
    sleep_until_rt(sh->start_ns);
    for (;;) {
        for (int a = 0; a < 4; a++) {
            rl_result res;
            int64_t t0 = rt_ns();
            int rc;

            if (t0 >= sh->stop_ns)
                return NULL;
            if (s->first_ns == 0)
                s->first_ns = t0;
            rc = rl_allow(t->lim, sh->key, acc_rule_ids[a], 1, &res);
            s->last_ns = rt_ns();
            if (rc != RL_OK) {
                snprintf(s->err, sizeof s->err, "rl_allow: %s (%d)",
                         errtext(t->lim), rc);
                s->rc = rc;
                return NULL;
            }
            s->checks[a]++;
            if (res.allowed)
                s->admitted[a]++;
            if (res.flags & RL_FLAG_FALLBACK)
                s->fallback++;
        }
    }
}

static void acc_child(const options *o, acc_shared *sh, int p)
{
    char rules[1100], r[4][256], err[ERRLEN];
    rl_limiter *lim = NULL;
    acc_thread at[ACC_THREADS];
    pthread_t tid[ACC_THREADS];
    int started = 0;

    one_rule(r[0], sizeof r[0], "sw", 0, ACC_LIMIT, ACC_WINDOW_MS / 1000, 0);
    one_rule(r[1], sizeof r[1], "tb", 1, ACC_LIMIT, ACC_WINDOW_MS / 1000,
             ACC_BURST);
    one_rule(r[2], sizeof r[2], "fw", 2, ACC_LIMIT, ACC_WINDOW_MS / 1000, 0);
    one_rule(r[3], sizeof r[3], "gc", 3, ACC_LIMIT, ACC_WINDOW_MS / 1000,
             ACC_BURST);
    snprintf(rules, sizeof rules, "{\"rules\":[%s,%s,%s,%s]}", r[0], r[1],
             r[2], r[3]);
    if (make_limiter(o, rules, &lim, err) != RL_OK) {
        acc_slot *s = &sh->slot[p * ACC_THREADS];
        snprintf(s->err, sizeof s->err, "%.190s", err);
        s->rc = -1;
        atomic_fetch_add(&sh->ready, 1);
        _exit(1);
    }
    for (int t = 0; t < ACC_THREADS; t++) {
        at[t] = (acc_thread){sh, lim, &sh->slot[p * ACC_THREADS + t]};
        if (pthread_create(&tid[t], NULL, acc_thread_main, &at[t]) != 0) {
            at[t].slot->rc = -1;
            snprintf(at[t].slot->err, sizeof at[t].slot->err,
                     "pthread_create failed");
            break;
        }
        started++;
    }
    atomic_fetch_add(&sh->ready, 1);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    rl_limiter_free(lim);
    _exit(started == ACC_THREADS ? 0 : 1);
}

static void acc_stop(acc *ac)
{
    atomic_store(&ac->sh->go, 2);
    futex_wake_shared(&ac->sh->go);
    for (int i = 0; i < ac->nproc; i++)
        while (waitpid(ac->pid[i], NULL, 0) < 0 && errno == EINTR)
            ;
    ac->nproc = 0;
    munmap(ac->sh, sizeof *ac->sh);
    ac->sh = NULL;
}

/* Fork the processes (while this one has no other thread) and let them
 * connect; they wait for acc_run(). */
static int acc_prepare(const options *o, acc *ac, char *err)
{
    memset(ac, 0, sizeof *ac);
    ac->sh = mmap(NULL, sizeof *ac->sh, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ac->sh == MAP_FAILED) {
        ac->sh = NULL;
        return snprintf(err, ERRLEN, "mmap: %s", strerror(errno)), -1;
    }
    memset(ac->sh, 0, sizeof *ac->sh);
    snprintf(ac->sh->key, sizeof ac->sh->key, "acc:%ld:%lld", (long)getpid(),
             (long long)(rt_ns() / 1000000));
    fflush(NULL);
    for (int p = 0; p < ACC_PROCS; p++) {
        pid_t pid = fork();
        if (pid < 0) {
            snprintf(err, ERRLEN, "fork: %s", strerror(errno));
            acc_stop(ac);
            return -1;
        }
        if (pid == 0)
            acc_child(o, ac->sh, p);
        ac->pid[ac->nproc++] = pid;
    }
    for (int i = 0; i < 2000 && atomic_load(&ac->sh->ready) < ACC_PROCS; i++)
        sleep_s(0.005);
    for (int i = 0; i < ACC_PROCS * ACC_THREADS; i++)
        if (ac->sh->slot[i].rc != 0) {
            snprintf(err, ERRLEN, "accuracy process: %s", ac->sh->slot[i].err);
            acc_stop(ac);
            return -1;
        }
    if (atomic_load(&ac->sh->ready) < ACC_PROCS) {
        snprintf(err, ERRLEN, "accuracy processes not ready after 10 s");
        acc_stop(ac);
        return -1;
    }
    return 0;
}

static int acc_run(const options *o, acc *ac, char *err)
{
    acc_shared *sh = ac->sh;
    int64_t w = ACC_WINDOW_MS * 1000000LL, now = rt_ns(), start, first = 0,
            last = 0;
    unsigned long long adm[4] = {0}, chk[4] = {0}, fb = 0;
    double span, rate = (double)ACC_LIMIT / ((double)ACC_WINDOW_MS / 1000.0),
                 s0;
    long long windows;
    int dead = 0;

    /* Start ACC_START_OFFSET_MS into a window, so the sliding window's
     * first (full) window costs little against limit x span / window. */
    start = (now / w) * w + ACC_START_OFFSET_MS * 1000000LL;
    if (start < now + 20000000LL)
        start += w;
    sh->start_ns = start;
    sh->stop_ns = start + (int64_t)(o->acc_seconds * 1e9);
    atomic_store(&sh->go, 1);
    futex_wake_shared(&sh->go);
    for (int i = 0; i < ac->nproc; i++) {
        int status = 0;
        while (waitpid(ac->pid[i], &status, 0) < 0 && errno == EINTR)
            ;
        if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && !dead++)
            snprintf(err, ERRLEN, "accuracy process %d failed (status %d)",
                     i, status);
    }
    ac->nproc = 0;
    if (dead)
        return -1;
    for (int i = 0; i < ACC_PROCS * ACC_THREADS; i++) {
        acc_slot *s = &sh->slot[i];
        if (s->rc != 0) {
            snprintf(err, ERRLEN, "accuracy thread: %s", s->err);
            return -1;
        }
        for (int a = 0; a < 4; a++) {
            adm[a] += s->admitted[a];
            chk[a] += s->checks[a];
        }
        fb += s->fallback;
        if (s->first_ns && (first == 0 || s->first_ns < first))
            first = s->first_ns;
        if (s->last_ns > last)
            last = s->last_ns;
    }
    if (first == 0 || last <= first)
        return snprintf(err, ERRLEN, "accuracy: no checks ran"), -1;
    span = (double)(last - first) / 1e9;
    s0 = (double)(first % w) / 1e9;
    windows = (long long)(last / w - first / w + 1);

    for (int a = 0; a < 4; a++) {
        figure f = {0};
        char name[48];
        double allowed;

        snprintf(name, sizeof name, "accuracy_%s", algo_names[a]);
        f.name = name;
        f.value = (double)adm[a];
        f.unit = "admitted";
        f.nrefs = 1;
        switch (a) {
        case 1:
        case 3: /* token bucket, GCRA: full bucket, then the refill rate */
            allowed = ACC_BURST + span * rate;
            f.ref_name[0] = "burst_plus_span_x_rate";
            break;
        case 2:
            allowed = (double)ACC_LIMIT * (double)windows;
            f.ref_name[0] = "limit_x_windows_touched";
            break;
        default:
            /* Hammered from empty state, a sliding window counter admits a
             * full limit at once, then limit per window as the previous
             * window's weight slides out: over a run that starts s0 into a
             * window that is limit x max(1, (span + s0) / window).  The
             * plain limit x span / window is the second reference; the
             * two agree to s0 / span (0.8 % in the default 30 s run). */
            allowed = (double)ACC_LIMIT * (span + s0) * 1e9 / (double)w;
            if (allowed < ACC_LIMIT)
                allowed = ACC_LIMIT;
            f.ref_name[0] = "limit_x_max1_span_plus_s0_over_window";
            f.nrefs = 2;
            f.ref[1] = (double)ACC_LIMIT * span * 1e9 / (double)w;
            f.ref_name[1] = "limit_x_span_over_window";
        }
        f.ref[0] = allowed;
        xnum(&f, "over", (double)adm[a] - allowed);
        if (a == 1 || a == 3)
            xnum(&f, "over_max", 1);
        if (a == 2)
            xnum(&f, "windows", (double)windows);
        if (a == 0)
            xnum(&f, "tolerance", ACC_TOLERANCE);
        xnum(&f, "span_s", span);
        xnum(&f, "start_offset_s", s0);
        xnum(&f, "checks", (double)chk[a]);
        xnum(&f, "processes", ACC_PROCS);
        xnum(&f, "threads_per_process", ACC_THREADS);
        xnum(&f, "fallback", (double)fb);
        emit(o, &f);
    }
    if (fb != 0)
        return snprintf(err, ERRLEN, "accuracy: %llu results came from the "
                        "fallback; the figures above are not valid", fb), -1;
    return 0;
}

/* ---- window edge: 32 threads, one limiter ------------------------------------- */

typedef struct edge {
    rl_limiter *lim;
    const char *key;
    int64_t t1, t1_end, t2; /* CLOCK_REALTIME ns */
    _Atomic int adm1[2], adm2[2], fired2[2];
    _Atomic unsigned long long fb;
    _Atomic int64_t last1; /* latest end of a phase-1 call */
    _Atomic int failed;
    char err[ERRLEN];
} edge;

static const char *const edge_rules[2] = {"esw", "efw"};

static int edge_call(edge *e, int a, int *allowed)
{
    rl_result res;
    int rc = rl_allow(e->lim, e->key, edge_rules[a], 1, &res);

    if (rc != RL_OK) {
        if (atomic_exchange(&e->failed, 1) == 0)
            set_err(e->err, "rl_allow", rc, errtext(e->lim));
        return -1;
    }
    if (res.flags & RL_FLAG_FALLBACK)
        atomic_fetch_add(&e->fb, 1);
    *allowed = res.allowed;
    return 0;
}

static void *edge_main(void *arg)
{
    edge *e = arg;
    int allowed;

    sleep_until_rt(e->t1);
    for (;;) { /* phase 1: until each rule admitted its limit */
        int busy = 0;
        for (int a = 0; a < 2; a++) {
            if (atomic_load(&e->adm1[a]) >= EDGE_LIMIT || rt_ns() >= e->t1_end)
                continue;
            busy = 1;
            if (edge_call(e, a, &allowed))
                return NULL;
            if (allowed)
                atomic_fetch_add(&e->adm1[a], 1);
            int64_t t = rt_ns(), l = atomic_load(&e->last1);
            while (t > l && !atomic_compare_exchange_weak(&e->last1, &l, t))
                ;
        }
        if (!busy)
            break;
    }
    sleep_until_rt(e->t2);
    for (;;) { /* phase 2: EDGE_FIRE2 checks per rule, all threads */
        int busy = 0;
        for (int a = 0; a < 2; a++) {
            if (atomic_fetch_add(&e->fired2[a], 1) >= EDGE_FIRE2)
                continue;
            busy = 1;
            if (edge_call(e, a, &allowed))
                return NULL;
            if (allowed)
                atomic_fetch_add(&e->adm2[a], 1);
        }
        if (!busy)
            break;
    }
    return NULL;
}

static int group_edge(const options *o, char *err)
{
    edge *e = calloc(1, sizeof *e);
    char rules[1024], r0[256], r1[256], key[64];
    pthread_t tid[EDGE_THREADS];
    int started = 0, rc = -1;
    int64_t w = EDGE_WINDOW_MS * 1000000LL, now, ws;

    if (e == NULL)
        return snprintf(err, ERRLEN, "out of memory"), -1;
    one_rule(r0, sizeof r0, "esw", 0, EDGE_LIMIT, EDGE_WINDOW_MS / 1000, 0);
    one_rule(r1, sizeof r1, "efw", 2, EDGE_LIMIT, EDGE_WINDOW_MS / 1000, 0);
    snprintf(rules, sizeof rules, "{\"rules\":[%s,%s]}", r0, r1);
    snprintf(key, sizeof key, "edge:%ld:%lld", (long)getpid(),
             (long long)(rt_ns() / 1000000));
    e->key = key;
    if (make_limiter(o, rules, &e->lim, err) != RL_OK) {
        free(e);
        return -1;
    }
    /* Redis runs on this machine: its TIME is this CLOCK_REALTIME. */
    now = rt_ns();
    ws = (now / w) * w;
    if (ws + EDGE_PHASE1_MS * 1000000LL < now + 50000000LL)
        ws += w;
    e->t1 = ws + EDGE_PHASE1_MS * 1000000LL;
    e->t1_end = ws + w - 100000000LL; /* give up 0.1 s before the edge */
    e->t2 = ws + w + EDGE_PHASE2_MS * 1000000LL;
    for (int t = 0; t < EDGE_THREADS; t++) {
        if (pthread_create(&tid[t], NULL, edge_main, e) != 0) {
            snprintf(err, ERRLEN, "pthread_create failed");
            break; /* the started ones finish by themselves */
        }
        started++;
    }
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    rl_limiter_free(e->lim);
    if (started < EDGE_THREADS)
        goto out;
    if (atomic_load(&e->failed)) {
        memcpy(err, e->err, ERRLEN);
        goto out;
    }
    for (int a = 0; a < 2; a++)
        if (atomic_load(&e->adm1[a]) < EDGE_LIMIT) {
            snprintf(err, ERRLEN, "window_edge: %s admitted only %d of %d in "
                     "phase 1 before the window ended", edge_rules[a],
                     atomic_load(&e->adm1[a]), EDGE_LIMIT);
            goto out;
        }
    if (atomic_load(&e->last1) >= ws + w) {
        snprintf(err, ERRLEN, "window_edge: phase 1 ran past the window "
                 "edge (machine too loaded)");
        goto out;
    }
    for (int a = 0; a < 2; a++) {
        figure f = {0};
        int total = atomic_load(&e->adm1[a]) + atomic_load(&e->adm2[a]);

        f.name = a == 0 ? "window_edge_sliding_window" : "window_edge_fixed_window";
        f.value = total;
        f.unit = "admitted";
        f.nrefs = 1;
        f.ref[0] = a == 0 ? 1.1 * EDGE_LIMIT : 2.0 * EDGE_LIMIT;
        f.ref_name[0] = a == 0 ? "1.1_x_limit_max" : "2_x_limit_expected";
        xnum(&f, "limit", EDGE_LIMIT);
        xnum(&f, "window_s", (double)EDGE_WINDOW_MS / 1000);
        xnum(&f, "phase1_admitted", atomic_load(&e->adm1[a]));
        xnum(&f, "phase2_admitted", atomic_load(&e->adm2[a]));
        xnum(&f, "phase2_fired", EDGE_FIRE2);
        xnum(&f, "phase1_at_s", (double)EDGE_PHASE1_MS / 1000);
        xnum(&f, "phase1_done_at_s",
             (double)(atomic_load(&e->last1) - ws) / 1e9);
        xnum(&f, "phase2_at_s", (double)(EDGE_WINDOW_MS + EDGE_PHASE2_MS) / 1000);
        xnum(&f, "threads", EDGE_THREADS);
        xnum(&f, "fallback", (double)atomic_load(&e->fb));
        emit(o, &f);
    }
    if (atomic_load(&e->fb) != 0) {
        snprintf(err, ERRLEN, "window_edge: %llu fallback results",
                 (unsigned long long)atomic_load(&e->fb));
        goto out;
    }
    rc = 0;
out:
    free(e);
    return rc;
}

/* ---- outage (group 6): the breaker against a hung server ------------------------ */

/* The fault: the private redis-server is stopped (SIGSTOP) and resumed
 * (SIGCONT), so it hangs rather than refuses -- the kernel still accepts
 * connections and bytes, nothing answers.  Its pid is INFO server's
 * process_id, used only when /proc/<pid>/cmdline is Redis's title for this
 * port ("redis-server 127.0.0.1:<port>") and we may signal it.  Otherwise
 * (or with REDISBENCH_FAULT=debug) DEBUG SLEEP hangs it for a time set in
 * advance, which needs enable-debug-command.  A stopped server is resumed
 * on every way out: error paths, exit() and terminating signals. */

static pid_t fault_pid;                     /* the server we stop        */
static volatile sig_atomic_t fault_stopped; /* SIGSTOPped by us, not yet
                                               SIGCONTed                 */
static int fault_ready, fault_debug;
static redisContext *fault_ctx; /* DEBUG SLEEP's connection, while it runs */
static double fault_secs;

static void fault_cont_atexit(void)
{
    if (fault_stopped) {
        kill(fault_pid, SIGCONT);
        fault_stopped = 0;
    }
}

/* SA_RESETHAND: raise() then takes the default action (async-signal-safe:
 * kill and raise only). */
static void fault_on_signal(int sig)
{
    if (fault_stopped)
        kill(fault_pid, SIGCONT);
    raise(sig);
}

static void fault_guard(void)
{
    static const int sigs[] = {SIGINT,  SIGTERM, SIGHUP, SIGQUIT, SIGABRT,
                               SIGSEGV, SIGBUS,  SIGFPE, SIGILL};
    struct sigaction sa, old;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fault_on_signal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    atexit(fault_cont_atexit);
}

/* The state letter of /proc/<pid>/stat ('T': stopped), 0 if unknown. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512], *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : 0;
}

/* Is redis_pid the server on this port, and ours to signal? */
static int fault_can_signal(const options *o, char *cmd, size_t cmdlen)
{
    char path[64], addr[32];
    const char *p;
    size_t n;
    FILE *f;

    cmd[0] = '\0';
    if (redis_pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/cmdline", redis_pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(cmd, 1, cmdlen - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '\0')
            cmd[i] = ' ';
    cmd[n] = '\0';
    snprintf(addr, sizeof addr, ":%d", o->port);
    for (p = strstr(cmd, addr); p; p = strstr(p + 1, addr))
        if (!isdigit((unsigned char)p[strlen(addr)]))
            break;
    return strstr(cmd, "redis-server") && p && kill((pid_t)redis_pid, 0) == 0;
}

static int fault_setup(const options *o, char *err)
{
    const char *how = getenv("REDISBENCH_FAULT");
    char cmd[256], why[ERRLEN];
    int can;

    if (fault_ready)
        return 0;
    if (how && *how && strcmp(how, "sigstop") != 0 && strcmp(how, "debug") != 0)
        return snprintf(err, ERRLEN, "REDISBENCH_FAULT=\"%.40s\": use sigstop "
                        "or debug", how), -1;
    can = fault_can_signal(o, cmd, sizeof cmd);
    if (how && strcmp(how, "sigstop") == 0 && !can)
        return snprintf(err, ERRLEN, "outage: pid %ld (INFO server process_id) "
                        "is not a redis-server on port %d we may signal "
                        "(cmdline \"%.100s\")", redis_pid, o->port, cmd), -1;
    fault_debug = !can || (how && strcmp(how, "debug") == 0);
    if (fault_debug && ctl_ok(why, "DEBUG SLEEP 0")) {
        snprintf(err, ERRLEN, "outage: cannot hang the server: pid %ld is "
                 "not ours to signal and %.300s", redis_pid, why);
        return -1;
    }
    fault_pid = (pid_t)redis_pid;
    fault_guard();
    fault_ready = 1;
    return 0;
}

static const char *fault_name(void)
{
    return fault_debug ? "debug_sleep" : "sigstop";
}

/* Resume the server (SIGCONT and wait until /proc shows it running), or
 * wait for the end of DEBUG SLEEP. */
static int fault_end(char *err)
{
    if (fault_ctx) {
        void *rep = NULL;
        int rc;

        redisSetTimeout(fault_ctx, (struct timeval){(long)fault_secs + 30, 0});
        rc = redisGetReply(fault_ctx, &rep);
        if (rep)
            freeReplyObject(rep);
        redisFree(fault_ctx);
        fault_ctx = NULL;
        if (rc != REDIS_OK)
            return snprintf(err, ERRLEN, "DEBUG SLEEP: no reply"), -1;
        return 0;
    }
    if (!fault_stopped)
        return 0;
    kill(fault_pid, SIGCONT);
    fault_stopped = 0;
    for (int i = 0; i < 2000; i++) {
        if (proc_state(fault_pid) != 'T')
            return 0;
        sleep_s(0.001);
    }
    return snprintf(err, ERRLEN, "redis-server pid %ld still stopped 2 s "
                    "after SIGCONT", (long)fault_pid), -1;
}

/* Hang the server (SIGSTOP, and wait until /proc shows it stopped), or
 * send DEBUG SLEEP secs on a connection of its own. */
static int fault_begin(const options *o, double secs, char *err)
{
    char scratch[ERRLEN];
    int done = 0;

    if (!fault_debug) {
        fault_stopped = 1; /* first: a signal from here on resumes it */
        if (kill(fault_pid, SIGSTOP) != 0) {
            fault_stopped = 0;
            return snprintf(err, ERRLEN, "kill(%ld, SIGSTOP): %s",
                            (long)fault_pid, strerror(errno)), -1;
        }
        for (int i = 0; i < 2000; i++) {
            if (proc_state(fault_pid) == 'T')
                return 0;
            sleep_s(0.001);
        }
        fault_end(scratch);
        return snprintf(err, ERRLEN, "redis-server pid %ld not stopped 2 s "
                        "after SIGSTOP", (long)fault_pid), -1;
    }
    fault_ctx = redisConnectWithTimeout("127.0.0.1", o->port,
                                        (struct timeval){2, 0});
    if (fault_ctx == NULL || fault_ctx->err) {
        snprintf(err, ERRLEN, "DEBUG SLEEP: connect: %s",
                 fault_ctx ? fault_ctx->errstr : "out of memory");
        redisFree(fault_ctx);
        fault_ctx = NULL;
        return -1;
    }
    fault_secs = secs;
    redisAppendCommand(fault_ctx, "DEBUG SLEEP %.3f", secs);
    while (!done)
        if (redisBufferWrite(fault_ctx, &done) != REDIS_OK) {
            snprintf(err, ERRLEN, "DEBUG SLEEP: %s", fault_ctx->errstr);
            redisFree(fault_ctx);
            fault_ctx = NULL;
            return -1;
        }
    sleep_s(0.01); /* an idle server reads it at once and sleeps from then */
    return 0;
}

#define OUT_TIMEOUT_MS 20        /* timeout_ms of the Redis limiters      */
#define OUT_FAILURES 5           /* breaker_failures: K                   */
#define OUT_COOLDOWN_MS 1000     /* breaker_cooldown_ms (the default)     */
#define OUT_OPEN_COOLDOWN_MS 60000 /* figure 1: no probe while measuring  */
#define OUT_OPEN_HANG_S 5.0      /* figure 1 under DEBUG SLEEP            */
#define OUT_CHECKS 200000ULL     /* figure 1, per limiter (quick: 50k)    */
#define OUT_CHECKS_QUICK 50000ULL
#define OUT_WARM 10000ULL
#define OUT_BLOCK 1000           /* checks per limiter in turn            */
#define OUT_NKEYS 1000
#define OUT_TARGET_P99_US 10.0
#define OUT_LIMIT 100            /* figures 3 and 4: per window           */
#define OUT_WINDOW_S 10
#define OUT_FLEET 4
#define OUT_PACE_NS 1000000ULL   /* one check per rule per ms             */
#define OUT_SECONDS 10.0         /* the outage (quick: 2 s)               */
#define OUT_SECONDS_QUICK 2.0
#define OUT_CLOSE_WAIT_MS 15000  /* give up waiting for the breaker       */

static void out_rule(char *buf, size_t len, const char *id, int algo,
                     long long limit, long long window_s, const char *failure)
{
    snprintf(buf, len,
             "{\"rule_id\":\"%s\",\"dimension\":\"user\",\"limit\":%lld,"
             "\"window_seconds\":%lld,\"algorithm\":\"%s\","
             "\"failure_mode\":\"%s\"}",
             id, limit, window_s, algo_names[algo], failure);
}

/* A limiter for the outage figures: Redis (timeout OUT_TIMEOUT_MS, breaker
 * after OUT_FAILURES, the given cooldown, fleet of OUT_FLEET) or, with
 * redis 0, the memory store with the same options and rules. */
static int out_limiter(const options *o, int redis, const char *rules,
                       long long cooldown_ms, rl_limiter **out, char *err)
{
    char uri[64], t[24], k[24], c[24], fl[24];
    const char *name[6] = {"store",      "timeout_ms", "breaker_failures",
                           "breaker_cooldown_ms", "fleet_size", "rules"};
    const char *val[6] = {uri, t, k, c, fl, rules};
    rl_config *cfg = rl_config_new();
    int rc = RL_OK;

    *out = NULL;
    if (cfg == NULL) {
        set_err(err, "rl_config_new", RL_ENOMEM, NULL);
        return RL_ENOMEM;
    }
    if (redis)
        snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", o->port);
    else
        snprintf(uri, sizeof uri, "memory://");
    snprintf(t, sizeof t, "%d", OUT_TIMEOUT_MS);
    snprintf(k, sizeof k, "%d", OUT_FAILURES);
    snprintf(c, sizeof c, "%lld", cooldown_ms);
    snprintf(fl, sizeof fl, "%d", OUT_FLEET);
    for (int i = 0; i < 6 && rc == RL_OK; i++)
        if ((rc = rl_config_set(cfg, name[i], val[i])) != RL_OK) {
            char what[48];
            snprintf(what, sizeof what, "rl_config_set(%s)", name[i]);
            set_err(err, what, rc, errtext(NULL));
        }
    if (rc == RL_OK && (rc = rl_limiter_new(out, cfg)) != RL_OK)
        set_err(err, "rl_limiter_new", rc, errtext(NULL));
    rl_config_free(cfg);
    return rc;
}

#define DEGRADED (RL_FLAG_FAIL_OPEN | RL_FLAG_FALLBACK)

/* rl_allow(), timed; -1 (err set) when it fails. */
static int out_allow(rl_limiter *lim, const char *key, const char *rule,
                     rl_result *res, uint64_t *ns, char *err)
{
    uint64_t t0 = now_ns();
    int rc = rl_allow(lim, key, rule, 1, res);

    if (ns)
        *ns = now_ns() - t0;
    if (rc != RL_OK) {
        set_err(err, "rl_allow", rc, errtext(lim));
        return -1;
    }
    return 0;
}

/* Checks while Redis answers: none may be degraded, the breaker closed. */
static int out_healthy(rl_limiter *lim, const char *key,
                       const char *const *rule, int nrules, int rounds,
                       char *err)
{
    rl_result res;
    rl_stats st;

    for (int i = 0; i < rounds; i++)
        for (int r = 0; r < nrules; r++) {
            if (out_allow(lim, key, rule[r], &res, NULL, err))
                return -1;
            if (res.flags & DEGRADED)
                return snprintf(err, ERRLEN, "outage: a check before the "
                                "fault was degraded (flags 0x%x): Redis is "
                                "not answering", res.flags), -1;
        }
    rl_stats_get(lim, &st);
    if (st.breaker_state != RL_BREAKER_CLOSED)
        return snprintf(err, ERRLEN, "outage: breaker state %d before the "
                        "fault", st.breaker_state), -1;
    return 0;
}

static void sleep_until_mono(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000ULL),
                          (long)(t_ns % 1000000000ULL)};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* Figures 1 and 2: Redis stopped, the K checks that time out until the
 * breaker opens, then checks with it open beside a memory-store limiter
 * with the same rule, in alternating blocks (so load drift hits both). */
static int out_open(const options *o, char *bad, char *err)
{
    static const char *const rid[1] = {"oo"};
    unsigned long long n = o->quick ? OUT_CHECKS_QUICK : OUT_CHECKS,
                       not_fb = 0;
    char rule[400], rules[512], scratch[ERRLEN], (*keys)[24] = NULL;
    rl_limiter *lim = NULL, *mem = NULL;
    hist *h = calloc(2, sizeof *h); /* [0] breaker open, [1] memory store */
    store_redis_stats s0, s1, s2;
    rl_stats b0, b1, b2;
    rl_result res;
    double probe_max = 0, probe_min = 0, probe_sum = 0;
    int probes = 0, opened_after = 0, faulted = 0, rc = -1;
    uint64_t ns;

    keys = calloc(OUT_NKEYS, sizeof *keys);
    if (h == NULL || keys == NULL) {
        snprintf(err, ERRLEN, "out of memory");
        goto out;
    }
    for (int i = 0; i < OUT_NKEYS; i++)
        snprintf(keys[i], sizeof keys[i], "user:%d", i);
    out_rule(rule, sizeof rule, rid[0], 0, BIG_LIMIT, BIG_WINDOW_S,
             "fallback");
    snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
    if (out_limiter(o, 1, rules, OUT_OPEN_COOLDOWN_MS, &lim, err) ||
        out_limiter(o, 0, rules, OUT_OPEN_COOLDOWN_MS, &mem, err) ||
        out_healthy(lim, keys[0], rid, 1, 1000, err))
        goto out;
    rl_stats_get(lim, &b0);
    store_redis_stats_get(limiter_store(lim), &s0);
    if (fault_begin(o, OUT_OPEN_HANG_S, err))
        goto out;
    faulted = 1;
    for (int i = 0; i < 4 * OUT_FAILURES; i++) {
        double ms;
        if (out_allow(lim, keys[i], rid[0], &res, &ns, err))
            goto out;
        ms = (double)ns / 1e6;
        probe_max = probes == 0 || ms > probe_max ? ms : probe_max;
        probe_min = probes == 0 || ms < probe_min ? ms : probe_min;
        probe_sum += ms;
        probes++;
        rl_stats_get(lim, &b1);
        if (b1.breaker_state == RL_BREAKER_OPEN) {
            opened_after = i + 1;
            break;
        }
    }
    if (opened_after == 0) {
        snprintf(err, ERRLEN, "outage: the breaker is not open after %d "
                 "failed checks (breaker_failures %d)", probes, OUT_FAILURES);
        goto out;
    }
    store_redis_stats_get(limiter_store(lim), &s1);
    for (int pass = 0; pass < 2; pass++) {
        unsigned long long total = pass ? n : OUT_WARM;
        for (unsigned long long done = 0; done < total; done += OUT_BLOCK)
            for (int side = 0; side < 2; side++) {
                rl_limiter *l = side ? mem : lim;
                for (unsigned long long j = done;
                     j < done + OUT_BLOCK && j < total; j++) {
                    if (out_allow(l, keys[j % OUT_NKEYS], rid[0], &res, &ns,
                                  err))
                        goto out;
                    if (pass)
                        hist_add(&h[side], ns);
                    if (!side && !(res.flags & RL_FLAG_FALLBACK))
                        not_fb++;
                }
            }
    }
    store_redis_stats_get(limiter_store(lim), &s2);
    rl_stats_get(lim, &b2);
    faulted = 0;
    if (fault_end(err))
        goto out;

    {
        figure f = {0};
        f.name = "outage_breaker_open_p50";
        f.value = hist_pct(&h[0], 0.50) / 1000.0;
        f.unit = "us";
        f.nrefs = 1;
        f.ref[0] = hist_pct(&h[1], 0.50) / 1000.0;
        f.ref_name[0] = "memory_store_check";
        xnum(&f, "samples", (double)h[0].n);
        xnum(&f, "ref_samples", (double)h[1].n);
        emit(o, &f);
        f = (figure){0};
        f.name = "outage_breaker_open_p99";
        f.value = hist_pct(&h[0], 0.99) / 1000.0;
        f.unit = "us";
        f.nrefs = 1;
        f.ref[0] = hist_pct(&h[1], 0.99) / 1000.0;
        f.ref_name[0] = "memory_store_check";
        xnum(&f, "target_max_us", OUT_TARGET_P99_US);
        xnum(&f, "p999_us", hist_pct(&h[0], 0.999) / 1000.0);
        xnum(&f, "ref_p999_us", hist_pct(&h[1], 0.999) / 1000.0);
        xnum(&f, "checks", (double)n);
        xnum(&f, "warmup_checks", OUT_WARM);
        /* Socket calls while open (every check after the breaker opened,
         * warm-up included): must be 0. */
        xnum(&f, "network_calls", (double)(s2.calls - s1.calls));
        xnum(&f, "network_calls_max", 0);
        xnum(&f, "writes", (double)(s2.writes - s1.writes));
        xnum(&f, "store_errors", (double)(b2.store_errors - b1.store_errors));
        xnum(&f, "not_fallback", (double)not_fb);
        xnum(&f, "breaker_state_after", b2.breaker_state);
        xnum(&f, "breaker_opens", (double)(b2.breaker_opens - b0.breaker_opens));
        xstr(&f, "failure_mode", "fallback");
        xnum(&f, "fleet_size", OUT_FLEET);
        xnum(&f, "cooldown_ms", OUT_OPEN_COOLDOWN_MS);
        xnum(&f, "keys", OUT_NKEYS);
        xstr(&f, "fault", fault_name());
        emit(o, &f);
        f = (figure){0};
        f.name = "outage_probe_max_latency";
        f.value = probe_max;
        f.unit = "ms";
        f.nrefs = 1;
        f.ref[0] = OUT_TIMEOUT_MS;
        f.ref_name[0] = "timeout_ms";
        xnum(&f, "checks_to_open", opened_after);
        xnum(&f, "breaker_failures", OUT_FAILURES);
        xnum(&f, "min_ms", probe_min);
        xnum(&f, "mean_ms", probe_sum / probes);
        xnum(&f, "timeouts", (double)(s1.timeouts - s0.timeouts));
        xnum(&f, "network_calls", (double)(s1.calls - s0.calls));
        xnum(&f, "down_fails", (double)(s1.down_fails - s0.down_fails));
        xstr(&f, "fault", fault_name());
        emit(o, &f);
    }
    if (s2.calls != s1.calls && !bad[0])
        snprintf(bad, ERRLEN, "outage: %lld network calls with the breaker "
                 "open (must be 0)", (long long)(s2.calls - s1.calls));
    if (b2.breaker_state != RL_BREAKER_OPEN && !bad[0])
        snprintf(bad, ERRLEN, "outage: the breaker left OPEN (state %d) "
                 "during the measurement", b2.breaker_state);
    rc = 0;
out:
    if (faulted)
        fault_end(scratch);
    rl_limiter_free(lim);
    rl_limiter_free(mem);
    free(keys);
    free(h);
    return rc;
}

/* Figures 3 and 4: one limiter, one rule per failure mode (fixed window,
 * OUT_LIMIT per OUT_WINDOW_S, fleet OUT_FLEET), one thread checking each
 * rule every ms; Redis hangs for the outage, then resumes while the checks
 * go on and rl_stats_get() is polled until the breaker closes. */
static int out_modes(const options *o, char *bad, char *err)
{
    static const char *const mode[3] = {"open", "closed", "fallback"};
    double secs = o->quick ? OUT_SECONDS_QUICK : OUT_SECONDS, outage_s;
    char r[3][300], rules[1024], key[64], warm[64], scratch[ERRLEN];
    rl_limiter *lim = NULL;
    rl_result res;
    rl_stats b0, b1, b2, st;
    store_redis_stats s0, s1, s2;
    unsigned long long sent[3] = {0}, adm[3] = {0}, decided[3] = {0},
                       late = 0, after = 0, after_degraded = 0, reopens = 0;
    uint64_t max_ns[3] = {0}, ns, t_stop, t_cont, t_close = 0,
             t_open_last = 0, t_open_resume = 0, t_reopen = 0, t_reconn = 0,
             next, opens_seen;
    int64_t rt_first = 0, rt_last = 0, w = OUT_WINDOW_S * 1000000000LL;
    int faulted = 0, rc = -1;

    for (int m = 0; m < 3; m++)
        out_rule(r[m], sizeof r[m], mode[m], 2, OUT_LIMIT, OUT_WINDOW_S,
                 mode[m]);
    snprintf(rules, sizeof rules, "{\"rules\":[%s,%s,%s]}", r[0], r[1], r[2]);
    snprintf(warm, sizeof warm, "warm:%ld", (long)getpid());
    snprintf(key, sizeof key, "outage:%ld:%lld", (long)getpid(),
             (long long)(rt_ns() / 1000000));
    if (out_limiter(o, 1, rules, OUT_COOLDOWN_MS, &lim, err) ||
        out_healthy(lim, warm, mode, 3, 20, err))
        goto out;
    rl_stats_get(lim, &b0);
    store_redis_stats_get(limiter_store(lim), &s0);
    opens_seen = b0.breaker_opens;
    if (fault_begin(o, secs, err))
        goto out;
    faulted = 1;
    t_stop = next = now_ns();
    while (now_ns() < t_stop + (uint64_t)(secs * 1e9)) {
        for (int m = 0; m < 3; m++) {
            int64_t rt = rt_ns();
            if (out_allow(lim, key, mode[m], &res, &ns, err))
                goto out;
            sent[m]++;
            adm[m] += res.allowed != 0;
            if (ns > max_ns[m])
                max_ns[m] = ns;
            decided[m] += m == 0   ? (res.flags & RL_FLAG_FAIL_OPEN) != 0
                          : m == 1 ? !res.allowed
                                   : (res.flags & RL_FLAG_FALLBACK) != 0;
            if (m == 2) {
                if (rt_first == 0)
                    rt_first = rt;
                rt_last = rt;
            }
        }
        rl_stats_get(lim, &st);
        if (st.breaker_opens != opens_seen) {
            opens_seen = st.breaker_opens;
            t_open_last = now_ns();
        }
        next += OUT_PACE_NS;
        if (next < now_ns()) { /* a check outlasted the pace: no catch-up */
            next = now_ns();
            late++;
        } else {
            sleep_until_mono(next);
        }
    }
    rl_stats_get(lim, &b1);
    store_redis_stats_get(limiter_store(lim), &s1);
    faulted = 0;
    if (fault_end(err))
        goto out;
    t_cont = next = now_ns();
    t_open_resume = t_open_last;
    outage_s = (double)(t_cont - t_stop) / 1e9;
    for (;;) {
        for (int m = 0; m < 3; m++) {
            if (out_allow(lim, key, mode[m], &res, NULL, err))
                goto out;
            after++;
            after_degraded += (res.flags & DEGRADED) != 0;
        }
        rl_stats_get(lim, &st);
        if (st.breaker_opens != opens_seen) {
            reopens += st.breaker_opens - opens_seen;
            opens_seen = st.breaker_opens;
            t_open_last = now_ns();
            if (!t_reopen)
                t_reopen = t_open_last;
        }
        if (!t_reconn) { /* when the store's connections came back */
            store_redis_stats_get(limiter_store(lim), &s2);
            if (s2.reconnects != s1.reconnects)
                t_reconn = now_ns();
        }
        if (st.breaker_state == RL_BREAKER_CLOSED) {
            t_close = now_ns();
            break;
        }
        if (now_ns() - t_cont > OUT_CLOSE_WAIT_MS * 1000000ULL)
            break;
        next += OUT_PACE_NS;
        if (next < now_ns())
            next = now_ns();
        else
            sleep_until_mono(next);
    }
    rl_stats_get(lim, &b2);
    store_redis_stats_get(limiter_store(lim), &s2);

    for (int m = 0; m < 3; m++) {
        figure f = {0};
        char name[48];
        long long windows = rt_first ? rt_last / w - rt_first / w + 1 : 0;

        snprintf(name, sizeof name, "outage_admitted_%s", mode[m]);
        f.name = name;
        f.value = (double)adm[m];
        f.unit = "admitted";
        f.nrefs = 1;
        switch (m) {
        case 0:
            f.ref[0] = (double)sent[m];
            f.ref_name[0] = "every_request";
            break;
        case 1:
            f.ref[0] = 0;
            f.ref_name[0] = "none";
            break;
        default:
            f.ref[0] = (double)(OUT_LIMIT / OUT_FLEET) * (double)windows;
            f.ref_name[0] = "limit_over_fleet_x_windows";
        }
        xstr(&f, "failure_mode", mode[m]);
        xnum(&f, "checks", (double)sent[m]);
        xnum(&f, "decided_by_mode", (double)decided[m]);
        /* The same from rl_stats_get(): fail_open, fail_closed, fallback. */
        xnum(&f, "stats_decided_by_mode",
             m == 0   ? (double)(b1.fail_open - b0.fail_open)
             : m == 1 ? (double)(b1.fail_closed - b0.fail_closed)
                      : (double)(b1.fallback - b0.fallback));
        xnum(&f, "outage_s", outage_s);
        xnum(&f, "pace_ms", (double)OUT_PACE_NS / 1e6);
        xnum(&f, "late_ticks", (double)late);
        xnum(&f, "max_check_ms", (double)max_ns[m] / 1e6);
        xstr(&f, "algorithm", algo_names[2]);
        xnum(&f, "limit", OUT_LIMIT);
        xnum(&f, "window_s", OUT_WINDOW_S);
        xnum(&f, "fleet_size", OUT_FLEET);
        if (m == 2) {
            xnum(&f, "windows", (double)windows);
            xnum(&f, "pro_rata", (double)OUT_LIMIT / OUT_FLEET * secs /
                                     OUT_WINDOW_S);
        }
        xnum(&f, "breaker_opens", (double)(b1.breaker_opens - b0.breaker_opens));
        xnum(&f, "network_calls", (double)(s1.calls - s0.calls));
        xnum(&f, "timeouts", (double)(s1.timeouts - s0.timeouts));
        xnum(&f, "down_fails", (double)(s1.down_fails - s0.down_fails));
        xnum(&f, "reconnects", (double)(s1.reconnects - s0.reconnects));
        xstr(&f, "fault", fault_name());
        emit(o, &f);
    }
    {
        figure f = {0};
        f.name = "outage_time_to_close";
        f.value = t_close ? (double)(t_close - t_cont) / 1e6 : NAN;
        f.unit = "ms";
        f.nrefs = 1;
        f.ref[0] = OUT_COOLDOWN_MS;
        f.ref_name[0] = "cooldown_ms";
        xnum(&f, "timeout_ms", OUT_TIMEOUT_MS);
        xnum(&f, "breaker_failures", OUT_FAILURES);
        /* A probe goes at most a cooldown after the last opening, and
         * takes at most a timeout. */
        xnum(&f, "expected_max_ms", OUT_COOLDOWN_MS + OUT_TIMEOUT_MS +
                                        (double)OUT_PACE_NS / 1e6);
        xnum(&f, "open_for_ms_at_resume",
             t_open_resume ? (double)(t_cont - t_open_resume) / 1e6 : NAN);
        xnum(&f, "last_open_to_close_ms",
             t_close && t_open_last ? (double)(t_close - t_open_last) / 1e6
                                    : NAN);
        xnum(&f, "reopens_after_resume", (double)reopens);
        xnum(&f, "first_reopen_after_ms",
             t_reopen ? (double)(t_reopen - t_cont) / 1e6 : NAN);
        /* The connections (torn down as stuck during a long outage) are
         * back: the first reconnect after the resumption. */
        xnum(&f, "reconnected_after_ms",
             t_reconn ? (double)(t_reconn - t_cont) / 1e6 : NAN);
        xnum(&f, "checks_after_resume", (double)after);
        /* Decided by a failure mode (rl_stats_get(): fail_open +
         * fail_closed + fallback), and of them flagged in the result
         * (RL_FLAG_FAIL_OPEN or RL_FLAG_FALLBACK; "closed" has no flag). */
        xnum(&f, "degraded_after_resume",
             (double)(b2.fail_open - b1.fail_open + b2.fail_closed -
                      b1.fail_closed + b2.fallback - b1.fallback));
        xnum(&f, "flagged_after_resume", (double)after_degraded);
        xnum(&f, "network_calls_after_resume", (double)(s2.calls - s1.calls));
        xnum(&f, "down_fails_after_resume",
             (double)(s2.down_fails - s1.down_fails));
        xnum(&f, "reconnects_after_resume",
             (double)(s2.reconnects - s1.reconnects));
        xnum(&f, "breaker_closes", (double)(b2.breaker_closes - b1.breaker_closes));
        xstr(&f, "fault", fault_name());
        emit(o, &f);
    }
    if (t_close == 0 && !bad[0])
        snprintf(bad, ERRLEN, "outage: the breaker did not close within "
                 "%d ms of the server's resumption", OUT_CLOSE_WAIT_MS);
    rc = 0;
out:
    if (faulted)
        fault_end(scratch);
    rl_limiter_free(lim);
    return rc;
}

static int group_outage(const options *o, char *err)
{
    char bad[ERRLEN] = "";

    if (fault_setup(o, err) || flush_wait(err) || out_open(o, bad, err) ||
        ctl_ok(err, "PING") || out_modes(o, bad, err))
        return -1;
    if (bad[0])
        return memcpy(err, bad, ERRLEN), -1;
    return 0;
}

/* ---- main -------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    options o;
    int prc, status = 1;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    char err[ERRLEN] = "", ver[64] = "", sha[41] = "", cpu_model[128] = "";
    struct timeval tv = {2, 0};
    redisReply *r;
    acc ac = {0};
    const char *server_line = getenv("REDIS_SERVER_VERSION");
    uint64_t t_start = now_ns();

    prc = parse_args(argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    signal(SIGPIPE, SIG_IGN); /* a dropped connection is an error, not death */

    ctl = redisConnectWithTimeout("127.0.0.1", o.port, tv);
    if (ctl == NULL || ctl->err) {
        snprintf(err, ERRLEN, "connect to 127.0.0.1:%d: %s", o.port,
                 ctl ? ctl->errstr : "out of memory");
        goto out;
    }
    redisSetTimeout(ctl, (struct timeval){60, 0});
    if (info_str(ctl, "server", "redis_version", ver, sizeof ver, err))
        goto out;
    {
        double pid = 0;
        if (info_num(ctl, "server", "process_id", &pid, err))
            goto out;
        redis_pid = (long)pid;
    }
    if ((r = ctl_cmd(err, "DBSIZE")) == NULL)
        goto out;
    if (r->integer != 0 && !o.force) {
        snprintf(err, ERRLEN, "the database on 127.0.0.1:%d holds %lld keys "
                 "and would be flushed; use --force", o.port,
                 (long long)r->integer);
        freeReplyObject(r);
        goto out;
    }
    freeReplyObject(r);
    /* The library's script, by the name its EVALSHA uses. */
    if ((r = ctl_cmd(err, "SCRIPT LOAD %b", rl_lua_check,
                     rl_lua_check_len)) == NULL)
        goto out;
    if (r->type != REDIS_REPLY_STRING || r->len != 40) {
        freeReplyObject(r);
        snprintf(err, ERRLEN, "SCRIPT LOAD: unexpected reply");
        goto out;
    }
    memcpy(sha, r->str, 40);
    freeReplyObject(r);
    {
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[256];
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
                snprintf(cpu_model, sizeof cpu_model, "%s",
                         strchr(line, ':') + 2);
                cpu_model[strcspn(cpu_model, "\n")] = '\0';
                break;
            }
        if (f)
            fclose(f);
    }

    if (o.json) {
        printf("{\"name\":\"params\",\"nproc\":%ld,\"redis_version\":\"%s\","
               "\"keys\":%llu,\"seconds\":%.3g,\"mem_keys\":%llu,"
               "\"usec_checks\":%llu,\"accuracy_seconds\":%.3g,"
               "\"outage_seconds\":%.3g,\"quick\":%s,\"only\":\"%s\",\"script_sha\":\"%s\","
               "\"script_bytes\":%zu,\"library\":\"%s\",\"loadavg_1m\":%.2f,"
               "\"cpu_model\":",
               nproc, ver, o.keys, o.seconds, o.mem_keys, o.usec_checks,
               o.acc_seconds, o.quick ? OUT_SECONDS_QUICK : OUT_SECONDS,
               o.quick ? "true" : "false",
               o.only ? o.only : "", sha, (size_t)rl_lua_check_len,
               rl_version_string(), loadavg1());
        json_str(cpu_model);
        printf(",\"redis_server\":");
        json_str(server_line ? server_line : "");
        printf("}\n");
    } else {
        printf("redisbench: libratelimit %s, redis %s on 127.0.0.1:%d, "
               "nproc=%ld (%s), loadavg=%.2f\n"
               "  keys=%llu, seconds=%g, mem_keys=%llu, usec_checks=%llu, "
               "accuracy_seconds=%g%s, script %s (%zu bytes)\n",
               rl_version_string(), ver, o.port, nproc, cpu_model,
               loadavg1(), o.keys, o.seconds, o.mem_keys, o.usec_checks,
               o.acc_seconds, o.quick ? " (quick)" : "", sha,
               (size_t)rl_lua_check_len);
        print_columns(&layout);
    }
    fflush(stdout);

    if (want(&o, "throughput_64") &&
        group_throughput(&o, sha, TP_THREADS, 1, err))
        goto out;
    if (want(&o, "throughput_64_many") &&
        group_throughput(&o, sha, MANY_THREADS, MANY_PER_CALL, err))
        goto out;
    if (want(&o, "throughput_1") && group_throughput(&o, sha, 1, 1, err))
        goto out;
    if (want(&o, "usec_per_call") && group_usec(&o, sha, err))
        goto out;
    if (want(&o, "bytes_per_key") && group_bytes(&o, err))
        goto out;
    if (want(&o, "accuracy") || want(&o, "window_edge")) {
        if (flush_wait(err))
            goto out;
        /* The accuracy processes are forked first (no thread runs yet) and
         * wait; the window-edge run then ends 0.1 s into a window, just in
         * time for the accuracy run to start 0.25 s into it. */
        if (want(&o, "accuracy") && acc_prepare(&o, &ac, err))
            goto out;
        if (want(&o, "window_edge") && group_edge(&o, err))
            goto out;
        if (want(&o, "accuracy") && acc_run(&o, &ac, err))
            goto out;
    }
    if (want(&o, "outage") && group_outage(&o, err))
        goto out;
    if (!o.json)
        printf("redisbench: done in %.1f s, loadavg=%.2f\n",
               (double)(now_ns() - t_start) / 1e9, loadavg1());
    else
        printf("{\"name\":\"done\",\"seconds\":%.1f,\"loadavg_1m\":%.2f}\n",
               (double)(now_ns() - t_start) / 1e9, loadavg1());
    status = 0;

out:
    {
        char scratch[ERRLEN];
        fault_end(scratch); /* a stopped server is resumed, whatever happened */
    }
    if (ac.sh)
        acc_stop(&ac);
    if (status != 0)
        fprintf(stderr, "redisbench: %s\n", err[0] ? err : "failed");
    if (ctl)
        redisFree(ctl);
    return status;
}
