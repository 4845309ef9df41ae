/*
 * clusterbench.c -- `redisbench cluster`: what does a Redis Cluster give
 * and take?  Method: docs/BENCHMARKS.md, "How each bench measures".  The
 * groups live in clusterbench_<group>.c; this file reads the command line,
 * starts the servers (stopped however it ends) and runs the groups.
 */
#include "clusterbench.h"

/* ---- the command line: one row an option ---------------------------- */

static const char *const groups[] = {"throughput", "reshard", "failover",
                                     NULL};

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--seconds", BENCH_OPT_REAL, OPT_AT(seconds), 0.1, 3600, 5, 2, NULL,
     "per throughput figure"},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, MAX_KEYS, 1000000,
     1000000, NULL, "key space for throughput and resharding"},
    {"--slots", BENCH_OPT_COUNT, OPT_AT(slots), 1, 1000, 20, 5, NULL,
     "slots moved during resharding"},
    {"--only", BENCH_OPT_NAME, OPT_AT(only), 0, 0, -1, -1, groups,
     "one group"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0],
    .prog = "redisbench cluster",
    .about = "A 3 + 3 Redis Cluster it starts itself: throughput beside "
             "one server,\nresharding and failovers under load."};

static int want(const options *o, const char *group)
{
    return o->only == NULL || strcmp(o->only, group) == 0;
}

/* ---- stopping: signals and the servers ------------------------------ */

static rh_server single;
static int single_up;
rh_cluster cl;
int cluster_up;
double cluster_start_s;  /* rh_cluster_start(), until settled */
static int cluster_master[RH_CLUSTER_MAX]; /* ROLE at start: 1 master */

static void on_signal(int sig)
{
    g_signal = sig;
    atomic_store(&g_stop, 1);
}

int interrupted(char *err)
{
    if (g_signal != 0)
        snprintf(err, ERRLEN, "interrupted by signal %d", (int)g_signal);
    return g_signal != 0;
}

int failovers(void)
{
    int n = 0;

    for (int i = 0; i < cl.n; i++)
        n += cluster_master[i] && rh_cluster_is_master(&cl, i) != 1;
    return n;
}

/* A control connection with long timeouts (a FLUSHALL of millions of keys
 * takes seconds). */
static redisContext *control(const rh_server *s, char *err)
{
    redisContext *c = rh_connect(s);

    if (c != NULL)
        redisSetTimeout(c, (struct timeval){60, 0});
    else
        snprintf(err, ERRLEN, "cannot connect to 127.0.0.1:%d", s->port);
    return c;
}

/* ---- main -------------------------------------------------------------- */

/* The parameters once, before the first figure. */
static void print_params(const options *o)
{
    static int done;

    if (done++)
        return;
    bench_params(&table, o, o->json);
    if (!o->json)
        print_columns(&layout);
    fflush(stdout);
}

static void stop_servers(void)
{
    if (single_up)
        rh_stop(&single);
    if (cluster_up)
        rh_cluster_stop(&cl);
    single_up = cluster_up = 0;
}

static void install_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};

    signal(SIGPIPE, SIG_IGN); /* a dropped connection is an error */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* The throughput figures, kept as references for the later ones. */
typedef struct tp_all {
    tp_figs single, cluster, single_many, cluster_many;
    int have_cluster;
} tp_all;

/* The single server: throughput_single_64 (_many). */
static int single_phase(options *o, tp_all *tps, char *err)
{
    pidset ps = {0};
    redisContext *c = NULL;
    char uri[1024];
    int rc = -1;

    if (rh_start(&single, NULL) != 0)
        return snprintf(err, ERRLEN, "cannot start redis-server (stderr)"),
               -1;
    single_up = 1;
    if ((c = control(&single, err)) == NULL)
        goto out;
    print_params(o);
    if (!rh_uri(&single, uri, sizeof uri)) {
        snprintf(err, ERRLEN, "rh_uri failed");
        goto out;
    }
    o->uri = uri;
    ps.master[ps.nmaster++] = single.pid;
    if (flushall_wait(c, err) ||
        throughput(o, "throughput_single_64", 1, &ps, &c, 1, NULL, NULL,
                   &tps->single, err) ||
        flushall_wait(c, err) ||
        throughput(o, "throughput_single_64_many", MANY_PER_CALL, &ps, &c, 1,
                   &tps->single, "throughput_single_64", &tps->single_many,
                   err))
        goto out;
    rc = 0;
out:
    o->uri = NULL;
    if (c)
        redisFree(c);
    if (rc == 0) {
        rh_stop(&single);
        single_up = 0;
    }
    return rc;
}

/* The cluster started: its masters' and replicas' pids in ps, a control
 * connection to each master in mctl[0..*nm), a seed URI in uri. */
static int cluster_start(pidset *ps, redisContext **mctl, int *nm,
                         char *uri, size_t urilen, char *err)
{
    uint64_t tcs = now_ns();

    if (rh_cluster_start(&cl, 3, 1, NODE_TIMEOUT_MS) != 0)
        return snprintf(err, ERRLEN, "cannot start the cluster (stderr)"),
               -1;
    cluster_up = 1;
    cluster_start_s = (double)(now_ns() - tcs) / 1e9;
    if (interrupted(err))
        return -1;
    if (!rh_cluster_uri(&cl, 0, uri, urilen))
        return snprintf(err, ERRLEN, "rh_cluster_uri failed"), -1;
    for (int i = 0; i < cl.n; i++) {
        int m = rh_cluster_is_master(&cl, i);
        cluster_master[i] = m == 1;
        if (m == 1) {
            ps->master[ps->nmaster++] = cl.node[i].pid;
            if ((mctl[*nm] = control(&cl.node[i], err)) == NULL)
                return -1;
            (*nm)++;
        } else {
            ps->replica[ps->nreplica++] = cl.node[i].pid;
        }
    }
    return 0;
}

/* The cluster: throughput_cluster_64 (_many) and resharding. */
static int cluster_phase(options *o, tp_all *tps, char *err)
{
    redisContext *mctl[RH_CLUSTER_MAX] = {0};
    pidset ps = {0};
    char uri[1024];
    int nm = 0, rc = -1;

    if (cluster_start(&ps, mctl, &nm, uri, sizeof uri, err))
        goto out;
    print_params(o);
    o->uri = uri;
    if (want(o, "throughput")) {
        if (throughput(o, "throughput_cluster_64", 1, &ps, mctl, nm,
                       &tps->single, "throughput_single_64", &tps->cluster,
                       err) ||
            throughput(o, "throughput_cluster_64_many", MANY_PER_CALL, &ps,
                       mctl, nm, &tps->single_many,
                       "throughput_single_64_many", &tps->cluster_many, err))
            goto out;
        tps->have_cluster = 1;
    }
    if (want(o, "reshard") &&
        group_reshard(o, &ps, tps->have_cluster ? &tps->cluster : NULL, err))
        goto out;
    if (want(o, "failover") && group_failover(o, err))
        goto out;
    rc = 0;
out:
    o->uri = NULL;
    for (int i = 0; i < nm; i++)
        redisFree(mctl[i]);
    return rc;
}

int cluster_main(int argc, char **argv)
{
    options o = {0};
    int prc, status = 1;
    char err[ERRLEN] = "";
    uint64_t t_start = now_ns();
    tp_all tps = {.have_cluster = 0};

    if ((prc = bench_opt_args(argc, argv, &table, &o)) != 0)
        return prc == 1 ? 0 : 2;
    install_signals();
    if (!rh_available() || !rh_cluster_available()) {
        snprintf(err, ERRLEN, "needs redis-server and redis-cli on PATH");
        goto out;
    }
    if ((want(&o, "throughput") && single_phase(&o, &tps, err)) ||
        cluster_phase(&o, &tps, err))
        goto out;
    print_done("redisbench cluster", o.json, t_start);
    status = 0;
out:
    stop_servers();
    if (status != 0) {
        fprintf(stderr, "redisbench cluster: %s\n", err[0] ? err : "failed");
        if (g_signal)
            status = 128 + (int)g_signal;
    }
    fflush(stdout);
    return status;
}
