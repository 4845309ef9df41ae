
/*
 * redisbench.c -- how fast, how big and how exact is libratelimit's Redis
 * store?  Eight groups of figures against one Redis on 127.0.0.1 (--port;
 * bench/redisbench.sh starts a private one), each beside a reference from
 * the same run.  How it measures and how to read the ratios:
 * docs/BENCHMARKS.md, "How each bench measures".  The groups live in
 * redisbench_<group>.c, what they share in redisbench_util.c and
 * redisbench.h; this file reads the command line and runs the groups.
 * Its modes (`redisbench --modes`): async (asyncbench.c, against --port),
 * cluster (clusterbench.c: servers and a cluster of its own), and deny,
 * events, outage, tls and timeout (serverbench.h), which start a private
 * redis-server of their own through the test harness.
 */
#include "benchmodes.h"
#include "redisbench.h"
#include "serverbench.h"

static const char *const groups[] = {"throughput_64", "throughput_64_many",
                                     "throughput_1", "usec_per_call", "bytes_per_key",
                                     "accuracy",      "window_edge",
                                     "outage", "module_usec", "module_bytes",
                                     "compact", NULL};

/* ---- the command line: one row an option -------------------------------- */

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--force", BENCH_OPT_FLAG, OPT_AT(force), 0, 0, -1, -1, NULL,
     "run even if the database is not empty"},
    {"--port", BENCH_OPT_INT, OPT_AT(port), 1, 65535, -1, -1, NULL,
     "Redis port on 127.0.0.1 (required)"},
    {"--seconds", BENCH_OPT_REAL, OPT_AT(seconds), 0.1, 3600, 10.0, 2.0,
     NULL, "per throughput figure"},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, MAX_KEYS, 1000000, 100000,
     NULL, "key space for throughput"},
    {"--mem-keys", BENCH_OPT_COUNT, OPT_AT(mem_keys), 0, 0, 100000, 50000,
     NULL, "clients for bytes_per_key (at most --keys)"},
    {"--usec-checks", BENCH_OPT_COUNT, OPT_AT(usec_checks), 0, 0, 50000,
     10000, NULL, "checks per algorithm for usec_per_call"},
    {"--accuracy-seconds", BENCH_OPT_REAL, OPT_AT(acc_seconds), 1, 3600,
     30.0, 5.0, NULL, "the accuracy run's length"},
    {"--peer-usec", BENCH_OPT_REAL, OPT_AT(peer_usec), 0.001, 1e6, -1, -1,
     NULL, "the peer script's usec_per_call, as reference"},
    {"--only", BENCH_OPT_NAME, OPT_AT(only), 0, 0, -1, -1, groups,
     "one group (accuracy includes window_edge; module_*, compact: only so)"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "redisbench",
    .about = "The Redis store against the Redis on 127.0.0.1:P "
             "(bench/redisbench.sh starts a\nprivate one; FLUSHALLed): "
             "redis-benchmark is taken from $REDIS_BENCHMARK or\nthe PATH; "
             "the outage group hangs a private server of its own (SIGSTOP)."};

/* Returns 0 to run, 1 to exit 0 (help), 2 on a usage error. */
static int parse_args(int argc, char **argv, options *o)
{
    int rc;

    memset(o, 0, sizeof *o);
    o->peer_usec = -1.0;
    if ((rc = bench_opt_args(argc, argv, &table, o)) != 0)
        return rc;
    if (o->port == 0) {
        fprintf(stderr, "redisbench: --port is required\n");
        bench_opt_usage(&table, stderr);
        return 2;
    }
    o->mem_keys = o->mem_keys > o->keys ? o->keys : o->mem_keys;
    if (o->mem_keys < 1000 || o->usec_checks < 1000)
        return fprintf(stderr, "redisbench: --mem-keys (capped by --keys) "
                       "and --usec-checks must be >= 1000\n"), 2;
    return 0;
}

/* --only names the group (module_*, compact: they run only so); want: or
 * there is no --only, or it is accuracy, which includes window_edge. */
static int only(const options *o, const char *group)
{
    return o->only && strcmp(o->only, group) == 0;
}

static int want(const options *o, const char *group)
{
    return !o->only || only(o, group) ||
           (strcmp(group, "window_edge") == 0 && only(o, "accuracy"));
}

/* ---- main -------------------------------------------------------------------- */

/* The control connection to 127.0.0.1:port (the server's version in ver,
 * its pid in redis_pid); a database that is not empty refused (unless
 * --force); the library's script loaded: its sha (40 hex digits) in sha,
 * by the name the library's EVALSHA uses. */
static int server_open(const options *o, char *ver, size_t verlen, char *sha,
                       char *err)
{
    double pid = 0, keys = 0;
    redisReply *r;

    ctl = redisConnectWithTimeout("127.0.0.1", o->port, (struct timeval){2, 0});
    if (ctl == NULL || ctl->err)
        return snprintf(err, ERRLEN, "connect to 127.0.0.1:%d: %s", o->port,
                        ctl ? ctl->errstr : "out of memory"), -1;
    redisSetTimeout(ctl, (struct timeval){60, 0});
    if (info_str(ctl, "server", "redis_version", ver, verlen, err) ||
        info_num(ctl, "server", "process_id", &pid, err) ||
        (r = ctl_cmd(err, "DBSIZE")) == NULL)
        return -1;
    keys = (double)r->integer;
    freeReplyObject(r);
    redis_pid = (long)pid;
    server_ps = (pidset){.master = {(pid_t)pid}, .nmaster = 1};
    if (keys != 0 && !o->force)
        return snprintf(err, ERRLEN, "the database on 127.0.0.1:%d holds %.0f "
                        "keys and would be flushed; use --force", o->port,
                        keys), -1;
    if ((r = ctl_cmd(err, "SCRIPT LOAD %b", rl_lua_check,
                     rl_lua_check_len)) == NULL)
        return -1;
    if (r->type == REDIS_REPLY_STRING && r->len == 40)
        memcpy(sha, r->str, 41);
    else
        snprintf(err, ERRLEN, "SCRIPT LOAD: unexpected reply");
    freeReplyObject(r);
    return sha[0] ? 0 : -1;
}

/* The run's parameters (bench_params), then the server and the script. */
static void print_params(const options *o, const char *ver, const char *sha)
{
    const char *server_line = getenv("REDIS_SERVER_VERSION");

    bench_params(&table, o, o->json);
    if (o->json) {
        printf("{\"name\":\"server\",\"redis_version\":\"%s\",\"script_sha\":"
               "\"%s\",\"script_bytes\":%zu,\"redis_server\":", ver, sha,
               (size_t)rl_lua_check_len);
        json_str(server_line ? server_line : "");
        printf("}\n");
    } else {
        printf("  redis %s on 127.0.0.1:%d, script %s (%zu bytes)\n", ver,
               o->port, sha, (size_t)rl_lua_check_len);
        print_columns(&layout);
    }
    fflush(stdout);
}

/* The groups --only leaves, in turn.  The accuracy processes are forked
 * first (no thread runs yet) and wait; the window-edge run then ends 0.1 s
 * into a window, just in time for the accuracy run to start 0.25 s into
 * it. */
static int run_groups(const options *o, const char *sha, char *err)
{
    int acc = want(o, "accuracy"), edge = want(o, "window_edge");

    return (want(o, "throughput_64") &&
            group_throughput(o, sha, TP_THREADS, 1, err)) ||
           (want(o, "throughput_64_many") &&
            group_throughput(o, sha, MANY_THREADS, MANY_PER_CALL, err)) ||
           (want(o, "throughput_1") && group_throughput(o, sha, 1, 1, err)) ||
           (want(o, "usec_per_call") && group_usec(o, sha, err)) ||
           (want(o, "bytes_per_key") && group_bytes(o, err)) ||
           ((acc || edge) && flushall_wait(ctl, err)) ||
           (acc && acc_prepare(o, err)) || (edge && group_edge(o, err)) ||
           (acc && acc_run(o, err)) ||
           (only(o, "module_usec") && group_module(o, err)) ||
           (only(o, "module_bytes") && group_module_bytes(o, err)) ||
           (only(o, "compact") && group_compact(o, err)) ||
           (want(o, "outage") && group_outage(o, err)) ? -1 : 0;
}

static int redis_main(int argc, char **argv)
{
    options o;
    int prc, status = 1;
    char err[ERRLEN] = "", ver[64] = "", sha[41] = "";
    uint64_t t_start = now_ns();

    prc = parse_args(argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    signal(SIGPIPE, SIG_IGN); /* a dropped connection is an error, not death */
    if (server_open(&o, ver, sizeof ver, sha, err) == 0) {
        print_params(&o, ver, sha);
        if (run_groups(&o, sha, err) == 0) {
            print_done("redisbench", o.json, t_start);
            status = 0;
        }
    }
    acc_stop();
    if (status != 0)
        fprintf(stderr, "redisbench: %s\n", err[0] ? err : "failed");
    if (ctl)
        redisFree(ctl);
    return status;
}

/* ---- the modes with a private redis-server (serverbench.h) ----------------- */

/* Runs a mode that needs no --port: the test harness starts its plain
 * redis-server when `server` (tls starts its own, with a TLS port), stops
 * it however the mode ends, and the "done" row follows a success. */
static int server_mode(int argc, char **argv,
                       int (*run)(int, char **, sb_env *), int server)
{
    static sb_env env;
    uint64_t t_start = now_ns();
    int rc, json = 0, help = 0;

    for (int i = 1; i < argc; i++) {
        json |= strcmp(argv[i], "--json") == 0;
        help |= strcmp(argv[i], "--help") == 0;
    }
    if (help)
        return run(argc, argv, &env);
    if (server && (!rh_available() || rh_start(&env.srv, NULL) != 0)) {
        fprintf(stderr, "redisbench %s: cannot start redis-server\n", argv[0]);
        return 1;
    }
    if (server)
        rh_uri(&env.srv, env.uri, sizeof env.uri);
    rc = run(argc, argv, &env);
    if (server)
        rh_stop(&env.srv);
    if (rc == 0)
        print_done(argv[0], json, t_start);
    return rc;
}

#define SERVER_MODE(m, server)                                                \
    static int m##_mode(int argc, char **argv)                               \
    {                                                                         \
        return server_mode(argc, argv, m##_main, server);                     \
    }
SERVER_MODE(deny, 1)
SERVER_MODE(events, 1)
SERVER_MODE(outage, 1)
SERVER_MODE(tls, 0)
SERVER_MODE(timeout, 1)
SERVER_MODE(clustermod, 0)

/* The Redis store's group: redisbench's own figures, and the modes. */
static const bench_mode modes[] = {
    {.name = "redisbench", .run = redis_main,
     .about = "throughput, Redis CPU and bytes per check, accuracy, faults"},
    {.name = "cluster", .run = cluster_main,
     .about = "a 3 + 3 Redis Cluster beside one server, resharding, failovers"},
    {.name = "async", .run = async_main,
     .about = "64 asynchronous checks from one thread (bench/redisbench.sh)"},
    {.name = "deny", .run = deny_mode,
     .about = "Redis calls per check, deny cache and leases on beside off"},
    {.name = "events", .run = events_mode,
     .about = "rejection events: cost on the request path, delivery"},
    {.name = "outage", .run = outage_mode,
     .about = "admissions through a 100 ms and a 3 s outage, 4 processes"},
    {.name = "tls", .run = tls_mode,
     .about = "checks/s, p50 and p99 over TLS beside TCP"},
    {.name = "timeout", .run = timeout_mode,
     .about = "fail-closed denials by timeout_ms and host load"},
    {.name = "cluster_module", .run = clustermod_mode,
     .about = "Redis Cluster CPU per check: RL.CHECK, Lua, the peer"},
};

int main(int argc, char **argv)
{
    return bench_modes_main(argc, argv, modes, sizeof modes / sizeof *modes);
}
