
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
 * usec_per_call of the script's calls (INFO commandstats cmdstat_fcall, or
 * cmdstat_evalsha with redis_functions=0, after CONFIG RESETSTAT) over a
 * fixed number of checks of existing keys by 64 threads, per algorithm,
 * both ways, and lone_usec_per_call (one thread: one check per call),
 * beside hot_usec_per_call, the same script and arguments from
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
 *
 * The groups live in redisbench_<group>.c, what they share in
 * redisbench_util.c and redisbench.h; this file reads the command line and
 * runs the groups in turn.
 */
#include "benchmodes.h"
#include "redisbench.h"

#include <stddef.h>

static const char *const groups[] = {"throughput_64", "throughput_64_many",
                                     "throughput_1", "usec_per_call", "bytes_per_key",
                                     "accuracy",      "window_edge",
                                     "outage", "module_usec", NULL};

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
            "outage,\n"
            "                        module_usec (only when named: needs "
            "ratelimit.so)\n"
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

/* ---- the command line: one row an option -------------------------------- */

/* This bench's own kind (benchutil reads the others). */
enum { OPT_PORT = BENCH_OPT_OWN };

#define OPT_AT(field) offsetof(options, field)

static const bench_opt opts[] = {
    {"--json", BENCH_OPT_FLAG, OPT_AT(json), 0, 0, -1, -1, NULL},
    {"--quick", BENCH_OPT_QUICK, OPT_AT(quick), 0, 0, -1, -1, NULL},
    {"--force", BENCH_OPT_FLAG, OPT_AT(force), 0, 0, -1, -1, NULL},
    {"--port", OPT_PORT, OPT_AT(port), 1, 65535, -1, -1, NULL},
    {"--seconds", BENCH_OPT_REAL, OPT_AT(seconds), 0.1, 3600, 10.0, 2.0,
     NULL},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, MAX_KEYS, 1000000, 100000,
     NULL},
    {"--mem-keys", BENCH_OPT_COUNT, OPT_AT(mem_keys), 0, 0, 100000, 50000,
     NULL},
    {"--usec-checks", BENCH_OPT_COUNT, OPT_AT(usec_checks), 0, 0, 50000,
     10000, NULL},
    {"--accuracy-seconds", BENCH_OPT_REAL, OPT_AT(acc_seconds), 1, 3600,
     30.0, 5.0, NULL},
    {"--peer-usec", BENCH_OPT_REAL, OPT_AT(peer_usec), 0.001, 1e6, -1, -1,
     NULL},
    {"--only", BENCH_OPT_NAME, OPT_AT(only), 0, 0, -1, -1, groups},
};

/* A port for row r: 0, or 2 after saying what is wrong. */
static int opt_port(const bench_opt *r, const char *val, void *o)
{
    unsigned long long port = 0;

    if (parse_count(val, &port) != 0 || port < 1 || port > 65535) {
        fprintf(stderr, "redisbench: bad port '%s'\n", val);
        return 2;
    }
    *(int *)(void *)((char *)o + r->off) = (int)port;
    return 0;
}

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "redisbench",
    .usage = usage, .own = opt_port};

/* The checks across options: 0, or 2 after saying what is wrong. */
static int opt_finish(options *o)
{
    if (o->port == 0) {
        fprintf(stderr, "redisbench: --port is required\n");
        usage(stderr);
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

/* Returns 0 to run, 1 to exit 0 (help), 2 on a usage error. */
static int parse_args(int argc, char **argv, options *o)
{
    int rc;

    memset(o, 0, sizeof *o);
    o->peer_usec = -1.0;
    if ((rc = bench_opt_args(argc, argv, &table, o)) != 0)
        return rc;
    return opt_finish(o);
}

static int want(const options *o, const char *group)
{
    if (o->only == NULL || strcmp(o->only, group) == 0)
        return 1;
    return strcmp(group, "window_edge") == 0 &&
           strcmp(o->only, "accuracy") == 0;
}


/* ---- main -------------------------------------------------------------------- */

/* The control connection to 127.0.0.1:port; the server's version in ver,
 * its pid in redis_pid. */
static int server_connect(const options *o, char *ver, size_t verlen,
                          char *err)
{
    struct timeval tv = {2, 0};
    double pid = 0;

    ctl = redisConnectWithTimeout("127.0.0.1", o->port, tv);
    if (ctl == NULL || ctl->err)
        return snprintf(err, ERRLEN, "connect to 127.0.0.1:%d: %s", o->port,
                        ctl ? ctl->errstr : "out of memory"), -1;
    redisSetTimeout(ctl, (struct timeval){60, 0});
    if (info_str(ctl, "server", "redis_version", ver, verlen, err))
        return -1;
    if (info_num(ctl, "server", "process_id", &pid, err))
        return -1;
    redis_pid = (long)pid;
    return 0;
}

/* Refuses a database that is not empty (unless --force), then loads the
 * library's script: its sha (40 hex digits) in sha, by the name the
 * library's EVALSHA uses. */
static int server_prepare(const options *o, char *sha, char *err)
{
    redisReply *r;

    if ((r = ctl_cmd(err, "DBSIZE")) == NULL)
        return -1;
    if (r->integer != 0 && !o->force) {
        snprintf(err, ERRLEN, "the database on 127.0.0.1:%d holds %lld keys "
                 "and would be flushed; use --force", o->port,
                 (long long)r->integer);
        freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    if ((r = ctl_cmd(err, "SCRIPT LOAD %b", rl_lua_check,
                     rl_lua_check_len)) == NULL)
        return -1;
    if (r->type != REDIS_REPLY_STRING || r->len != 40) {
        freeReplyObject(r);
        return snprintf(err, ERRLEN, "SCRIPT LOAD: unexpected reply"), -1;
    }
    memcpy(sha, r->str, 40);
    freeReplyObject(r);
    return 0;
}

static void print_params(const options *o, const char *ver, const char *sha,
                         const char *cpu_model)
{
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    const char *server_line = getenv("REDIS_SERVER_VERSION");

    if (o->json) {
        printf("{\"name\":\"params\",\"nproc\":%ld,\"redis_version\":\"%s\","
               "\"keys\":%llu,\"seconds\":%.3g,\"mem_keys\":%llu,"
               "\"usec_checks\":%llu,\"accuracy_seconds\":%.3g,"
               "\"outage_seconds\":%.3g,\"quick\":%s,\"only\":\"%s\",\"script_sha\":\"%s\","
               "\"script_bytes\":%zu,\"library\":\"%s\",\"loadavg_1m\":%.2f,"
               "\"cpu_model\":",
               nproc, ver, o->keys, o->seconds, o->mem_keys, o->usec_checks,
               o->acc_seconds, o->quick ? OUT_SECONDS_QUICK : OUT_SECONDS,
               o->quick ? "true" : "false",
               o->only ? o->only : "", sha, (size_t)rl_lua_check_len,
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
               rl_version_string(), ver, o->port, nproc, cpu_model,
               loadavg1(), o->keys, o->seconds, o->mem_keys, o->usec_checks,
               o->acc_seconds, o->quick ? " (quick)" : "", sha,
               (size_t)rl_lua_check_len);
        print_columns(&layout);
    }
    fflush(stdout);
}

/* The groups --only leaves, in turn. */
static int run_groups(const options *o, const char *sha, acc *ac, char *err)
{
    if (want(o, "throughput_64") &&
        group_throughput(o, sha, TP_THREADS, 1, err))
        return -1;
    if (want(o, "throughput_64_many") &&
        group_throughput(o, sha, MANY_THREADS, MANY_PER_CALL, err))
        return -1;
    if (want(o, "throughput_1") && group_throughput(o, sha, 1, 1, err))
        return -1;
    if (want(o, "usec_per_call") && group_usec(o, sha, err))
        return -1;
    if (want(o, "bytes_per_key") && group_bytes(o, err))
        return -1;
    if (want(o, "accuracy") || want(o, "window_edge")) {
        if (flushall_wait(ctl, err))
            return -1;
        /* The accuracy processes are forked first (no thread runs yet) and
         * wait; the window-edge run then ends 0.1 s into a window, just in
         * time for the accuracy run to start 0.25 s into it. */
        if (want(o, "accuracy") && acc_prepare(o, ac, err))
            return -1;
        if (want(o, "window_edge") && group_edge(o, err))
            return -1;
        if (want(o, "accuracy") && acc_run(o, ac, err))
            return -1;
    }
    if (o->only && strcmp(o->only, "module_usec") == 0 &&
        group_module(o, err))
        return -1;
    if (want(o, "outage") && group_outage(o, err))
        return -1;
    return 0;
}

static int redis_main(int argc, char **argv)
{
    options o;
    int prc, status = 1;
    char err[ERRLEN] = "", ver[64] = "", sha[41] = "", cpu_model[128] = "";
    char scratch[ERRLEN];
    acc ac = {0};
    uint64_t t_start = now_ns();

    prc = parse_args(argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    signal(SIGPIPE, SIG_IGN); /* a dropped connection is an error, not death */
    if (server_connect(&o, ver, sizeof ver, err) == 0 &&
        server_prepare(&o, sha, err) == 0) {
        cpu_model_name(cpu_model, sizeof cpu_model);
        print_params(&o, ver, sha, cpu_model);
        if (run_groups(&o, sha, &ac, err) == 0) {
            print_done("redisbench", o.json, t_start);
            status = 0;
        }
    }
    fault_end(scratch); /* a stopped server is resumed, whatever happened */
    if (ac.sh)
        acc_stop(&ac);
    if (status != 0)
        fprintf(stderr, "redisbench: %s\n", err[0] ? err : "failed");
    if (ctl)
        redisFree(ctl);
    return status;
}

/* The Redis store's group: redisbench's own figures, and the modes. */
static const bench_mode modes[] = {
    {.name = "redisbench", .run = redis_main,
     .about = "throughput, Redis CPU and bytes per check, accuracy, faults"},
    {.name = "async", .run = async_main,
     .about = "64 asynchronous checks from one thread (bench/asyncbench.sh)"},
};

int main(int argc, char **argv)
{
    return bench_modes_main(argc, argv, modes, sizeof modes / sizeof *modes);
}
