
/*
 * clusterbench.c -- what do the Redis layouts cost, and what does a Redis
 * Cluster give and take?
 *
 * It starts its own servers through the test harness (tests/redis_harness.c):
 * one redis-server for groups (1) to (3), then a Redis Cluster of 3 masters
 * and 3 replicas (cluster-node-timeout 5 s: a loaded machine does not stall
 * a node that long, and the "failovers" fields check that none took place;
 * a longer timeout only makes the cluster slower to settle at start) for
 * groups (3) and (4), and stops them however it ends
 * (normal exit, an error, SIGINT/SIGTERM/SIGHUP; a crash leaves them to the
 * harness's death signal).  Every limiter has timeout_ms 1000, since a
 * loaded 2-core machine can stall a reply past the 5 ms default, and a
 * result decided by the local fallback (RL_FLAG_FALLBACK) is counted as an
 * error everywhere ("fallback" fields: should be 0).  Clients are
 * "user:<i>"; every rule is on rl_allow().
 *
 * (1) bytes_per_key_<layout>_<algo>: Redis memory per tracked (client,
 * rule), for both layouts (redis_layout plain, compact) and the four
 * algorithms, on the single server: FLUSHALL, used_memory (INFO memory,
 * once it has stopped moving, only the control connection open), then
 * --mem-keys new clients user:0 .. user:N-1, each checked once through the
 * library by 64 threads (fills fastest here: 16 threads take 1.3x as
 * long, 4 threads 3x) against one rule (limit 100 per 60 s, burst 100
 * for token_bucket and gcra), the limiter freed, used_memory again:
 * (after - before) / N.  Active expiry is paused meanwhile (DEBUG
 * SET-ACTIVE-EXPIRE 0): under 100 per 60 s a token bucket or GCRA state
 * lives only until its bucket is full again, 0.6 s after one check, and a
 * fixed window's until the window ends, so without the pause the figure
 * would count whatever happened to be left; with it, it is what each
 * state takes while it lives (the state is exactly one cost-1 check's).
 * Reference: 144 B, the leanest peer layout measured by bench/redisbench
 * (GCRA in one string, 35-byte key names); the compact figures also carry
 * the plain figure of the same algorithm as a second reference and the
 * issue's compact target ("target": 48 B).  For compact it prints the
 * number of hashes (DBSIZE: "hashes") and the clients per hash (N /
 * DBSIZE); and, from a SCAN sample of up to 1000 keys taken after (2)
 * (SCAN leaves out, and deletes, expired keys: it finds the states (2)
 * has just checked, and whatever else is still alive), the share whose
 * OBJECT ENCODING is "listpack" ("listpack_share"; 1.0 expected for
 * compact), the share that are hashes and their mean HLEN; "layout_ok" is
 * 1 when every sampled key is a listpack hash, else 0 (then the figure is
 * not the compact layout's, and a warning goes to stderr).  For plain, "dbsize" must equal N.
 *
 * (2) usec_per_call_<layout>_<algo>: Redis CPU per check on EXISTING state,
 * right after the fill of (1) on the same database (active expiry still
 * paused): the first 5000 of its clients (--usec-clients) are each checked
 * once (a warm-up, so that the short-lived token bucket and GCRA states
 * exist again), then CONFIG RESETSTAT, then --usec-checks checks by 64
 * threads going round the same clients in turn (each is checked every
 * 5000 / rate seconds, ~0.15 s, well within its state's 0.6 s), then INFO
 * commandstats: the value is total EVALSHA time / checks, i.e.
 * cmdstat_evalsha usec_per_call x calls / checks, since the store puts the
 * checks that queue up into one script call (the per-call figure and the
 * call count are given beside it).  "existing_share" is PEXPIRETIME calls
 * per check (the plain script reads the expiry only of a state it found);
 * "<cmd>_per_check" lists every command the scripts ran.  Compact's
 * reference is plain's figure for the same algorithm (ratio compact /
 * plain); plain has none.
 *
 * (3) throughput_single_64 and throughput_cluster_64: 64 threads calling
 * rl_allow() in a loop on one limiter, sliding window, limit 10^9 per 60 s
 * (nothing is denied), plain layout, keys drawn uniformly from 1M clients
 * (--keys), for --seconds after a 1 s warm-up, from an empty database:
 * checks/s, with p50/p99 microseconds per call as their own figures; first
 * against the single server, then against the cluster.  The cluster's
 * figures have the single server's as reference (ratio cluster / single).
 * throughput_single_64_many and throughput_cluster_64_many: the same 64 in
 * flight as 2 threads each deciding 32 requests per rl_check_many() call
 * (rule by user, the same keys); references: the single server's 64
 * threads, and the single server's *_many figure for the cluster's.
 * CPU in cores over the measured span: "client_cpu" (this process),
 * "redis_cpu" (the masters, or the single server; /proc/<pid>/stat),
 * "replica_cpu", "other_cpu" (the rest of the machine), "steal_cpu"; and
 * the servers' EVALSHA time per check ("server_usec_per_check", summed
 * over the masters), and "evalsha_calls_per_check": the single-server
 * store puts the checks that queue up into one script call (~0.05 calls
 * per check); so does the cluster store per master (one "C" call for a
 * batch whatever its slots), with smaller batches (64 threads over 3
 * masters).  On this machine the three masters and their
 * replicas share the same cores as the client, so the ratio says what a
 * cluster costs on one small machine (more processes, smaller batches,
 * replication), not what a real cluster
 * of separate machines would give: there, each master would have cores of
 * its own and throughput would scale with them.
 *
 * (4) reshard_redirect_share: the load of (3) on the cluster, while
 * --slots slots (default 20) move one by one from one master to another
 * (rh_cluster_migrate_begin, migrate_keys until none is left, in steps of
 * 10 keys, migrate_end), each with 0.1 s of load before and after.  Half of
 * the draws go to the clients of the slot being moved (found among the 1M
 * by their hash slot), so that the moving slot is hit (ASK while it is
 * half-moved, MOVED after); "hot_share" is their measured share.  The value
 * is (moved + asks) / checks from the store's counters over the
 * resharding (the counters' "checks" count every script call attempt, a
 * redirected retry included); beside it "redirects_per_call" over
 * rl_allow() calls and "redirects_per_hot_call" over the calls into the
 * moving slot.  "elsewhere" counts the requests a master's batch call
 * found not served there (check.lua's "C" mode) and sent again on their
 * own, keys declared, to learn where to go: most then meet the ASK or
 * MOVED counted above.  reshard_checks_per_s is the throughput meanwhile, with
 * throughput_cluster_64 as reference; reshard_fallback and reshard_errors
 * count results decided by the fallback (or failing open or closed) and
 * rl_allow() errors: both should be 0.
 *
 * (5) failover (clusterbench_failover.c, last: it changes the cluster):
 * 8 threads on a limiter with timeout_ms 50 and the default breaker;
 * failover_planned_degraded, the checks a CLUSTER FAILOVER degrades
 * (target 0); failover_hung_resume_ms and failover_killed_resume_ms, the
 * ms from a replica's promotion (after its master was SIGSTOPped and
 * taken over, or killed) to the first check of that slot decided by Redis
 * again (reference: the 100 ms target).  For resharding's fallback under 8
 * threads see (4) with --slots 500 (it runs 64).
 *
 * Reading the ratios: ratio = value / ref.  bytes_per_key: below 1 is
 * leaner than the leanest peer layout; compact should reach target / 144
 * = 0.33 (and its second ratio says what it saves over plain).
 * usec_per_call: compact / plain, how much more (> 1) or less Redis CPU
 * one check costs in the compact layout.  throughput_cluster_64: above 1
 * the cluster serves more checks than one server on this machine; on a
 * 2-core VM expect less than 1 (see (3)).  Its p50/p99 ratios: how much
 * slower one call is.  reshard: the share scales with hot_share, so read
 * redirects_per_hot_call beside it.  MOVED is met about once per moved
 * slot and store (the first call that meets it fixes the shared slot map;
 * calls already in flight meet it too), but ASK is met by every call on a
 * key already moved while its slot is half-moved (Redis never lets a
 * client cache an ASK), so most redirects are ASKs and their number grows
 * with the time a slot spends half-moved.  reshard_checks_per_s below 1:
 * every ASK is a second round trip, and the migration's own commands run
 * on the same cores.  reshard_fallback and reshard_errors must be 0: a
 * redirect is followed, never failed over to the fallback.
 *
 * Options: usage() below (clusterbench --help).
 *
 * The groups live in clusterbench_<group>.c over clusterbench_util.c,
 * clusterbench_load.c and clusterbench.h; this file reads the command line,
 * starts the servers and runs the groups in turn.
 */
#include "clusterbench.h"

#include <stddef.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: clusterbench [--json] [--quick] [--mem-keys N] "
            "[--seconds S]\n"
            "                    [--usec-checks N] [--usec-clients N] "
            "[--keys N]\n"
            "                    [--slots N] [--only bytes|throughput|"
            "reshard|failover]\n"
            "\n"
            "Starts its own redis-server and a 3-master + 3-replica Redis "
            "Cluster\n"
            "(tests/redis_harness.c) and measures: Redis bytes per tracked "
            "key and\n"
            "Redis CPU per check for the plain and compact layouts and the "
            "four\n"
            "algorithms; 64-thread throughput on the cluster beside the "
            "single server;\n"
            "redirects met while slots are resharded under load;\n"
            "failovers under load.  ratio = value / ref.\n"
            "\n"
            "  --json            one JSON object per line (first: name "
            "\"params\")\n"
            "  --quick           smoke run: 20k mem keys, 20k usec checks, "
            "2 s runs,\n"
            "                    5 slots\n"
            "  --mem-keys N      clients for bytes_per_key (default "
            "1000000)\n"
            "  --seconds S       per throughput figure (default 5)\n"
            "  --usec-checks N   checks per usec_per_call figure (default "
            "200000)\n"
            "  --usec-clients N  clients they go round (default 5000)\n"
            "  --keys N          key space for throughput and resharding "
            "(default\n"
            "                    1000000)\n"
            "  --slots N         slots moved during resharding (default "
            "20)\n"
            "  --only GROUP      bytes (with usec_per_call), throughput, "
            "reshard,\n"
            "                    failover\n"
            "  --help            this text\n"
            "N may end in k, M or G (powers of 1000).\n");
}

/* ---- the command line: one row an option ---------------------------- */

#define OPT_AT(field) offsetof(options, field)
#define MAX_COUNT 100000000.0

static const char *const groups[] = {"bytes", "throughput", "reshard",
                                     "failover", NULL};

static const bench_opt opts[] = {
    {"--json", BENCH_OPT_FLAG, OPT_AT(json), 0, 0, -1, -1, NULL},
    {"--quick", BENCH_OPT_QUICK, OPT_AT(quick), 0, 0, -1, -1, NULL},
    {"--seconds", BENCH_OPT_REAL, OPT_AT(seconds), 0.1, 3600, 5, 2, NULL},
    {"--mem-keys", BENCH_OPT_COUNT, OPT_AT(mem_keys), 1, MAX_COUNT, 1000000,
     20000, NULL},
    {"--usec-checks", BENCH_OPT_COUNT, OPT_AT(usec_checks), 1, MAX_COUNT,
     200000, 20000, NULL},
    {"--usec-clients", BENCH_OPT_COUNT, OPT_AT(usec_clients), 1, MAX_COUNT,
     5000, 5000, NULL},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, MAX_COUNT, 1000000,
     1000000, NULL},
    {"--slots", BENCH_OPT_COUNT, OPT_AT(slots), 1, 1000, 20, 5, NULL},
    {"--only", BENCH_OPT_NAME, OPT_AT(only), 0, 0, -1, -1, groups},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "clusterbench",
    .usage = usage};

static int parse_args(int argc, char **argv, options *o)
{
    int rc;

    memset(o, 0, sizeof *o);
    if ((rc = bench_opt_args(argc, argv, &table, o)) != 0)
        return rc;
    if (o->usec_clients > o->mem_keys)
        o->usec_clients = o->mem_keys;
    return 0;
}

static int want(const options *o, const char *group)
{
    return o->only == NULL || strcmp(o->only, group) == 0;
}


/* ---- main -------------------------------------------------------------- */

static int params_done;

static void print_params(const options *o, const char *ver,
                         const char *cpu_model)
{
    if (params_done++)
        return;
    if (o->json) {
        printf("{\"name\":\"params\",\"nproc\":%ld,\"redis_version\":"
               "\"%s\",\"mem_keys\":%llu,\"usec_checks\":%llu,"
               "\"usec_clients\":%llu,\"keys\":%llu,\"seconds\":%.3g,"
               "\"slots\":%llu,\"threads\":%d,\"quick\":%s,\"only\":\"%s\","
               "\"library\":\"%s\",\"loadavg_1m\":%.2f,\"cpu_model\":",
               sysconf(_SC_NPROCESSORS_ONLN), ver, o->mem_keys,
               o->usec_checks, o->usec_clients, o->keys, o->seconds, o->slots,
               THREADS, o->quick ? "true" : "false", o->only ? o->only : "",
               rl_version_string(), loadavg1());
        json_str(cpu_model);
        printf("}\n");
    } else {
        printf("clusterbench: libratelimit %s, redis %s, nproc=%ld (%s), "
               "loadavg=%.2f\n  mem_keys=%llu, usec_checks=%llu over %llu "
               "clients, keys=%llu, seconds=%g, slots=%llu%s\n",
               rl_version_string(), ver, sysconf(_SC_NPROCESSORS_ONLN),
               cpu_model, loadavg1(), o->mem_keys, o->usec_checks,
               o->usec_clients, o->keys, o->seconds, o->slots,
               o->quick ? " (quick)" : "");
        print_columns(&layout);
    }
    fflush(stdout);
}

static void stop_servers(void)
{
    if (single_up) {
        rh_stop(&single);
        single_up = 0;
    }
    if (cluster_up) {
        rh_cluster_stop(&cl);
        cluster_up = 0;
    }
}

static void install_signals(void)
{
    struct sigaction sa;

    signal(SIGPIPE, SIG_IGN); /* a dropped connection is an error */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
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

/* The single server: groups 1, 2 and throughput_single_64 (_many); ver
 * gets its version. */
static int single_phase(const options *o, const char *cpu_model, char *ver,
                        size_t verlen, tp_all *tps, char *err)
{
    pidset ps = {0};
    redisContext *ctl = NULL;
    char uri[1024];
    int rc = -1;

    if (rh_start(&single, NULL) != 0)
        return snprintf(err, ERRLEN, "cannot start redis-server (stderr)"),
               -1;
    single_up = 1;
    if ((ctl = control(&single, err)) == NULL ||
        info_str(ctl, "server", "redis_version", ver, verlen, err))
        goto out;
    /* The script loaded first, so no figure counts its cache entry. */
    {
        redisReply *r = bcmd(ctl, err, "SCRIPT LOAD %b", rl_lua_check,
                            rl_lua_check_len);
        if (r == NULL)
            goto out;
        freeReplyObject(r);
    }
    print_params(o, ver, cpu_model);
    fflush(stdout);
    if (!rh_uri(&single, uri, sizeof uri)) {
        snprintf(err, ERRLEN, "rh_uri failed");
        goto out;
    }
    if (want(o, "bytes") && group_bytes(o, ctl, uri, err))
        goto out;
    ps.master[ps.nmaster++] = single.pid;
    if (want(o, "throughput") &&
        (flushall_wait(ctl, err) ||
         throughput(o, "throughput_single_64", uri, 1, &ps, &ctl, 1, NULL,
                    NULL, &tps->single, err) ||
         flushall_wait(ctl, err) ||
         throughput(o, "throughput_single_64_many", uri, MANY_PER_CALL, &ps,
                    &ctl, 1, &tps->single, "throughput_single_64",
                    &tps->single_many, err)))
        goto out;
    rc = 0;
out:
    if (ctl)
        redisFree(ctl);
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
static int cluster_phase(const options *o, const char *cpu_model, char *ver,
                         size_t verlen, tp_all *tps, char *err)
{
    redisContext *mctl[RH_CLUSTER_MAX] = {0};
    pidset ps = {0};
    char uri[1024];
    int nm = 0, rc = -1;

    if (cluster_start(&ps, mctl, &nm, uri, sizeof uri, err))
        goto out;
    if (ver[0] == '\0' &&
        info_str(mctl[0], "server", "redis_version", ver, verlen, err))
        goto out;
    print_params(o, ver, cpu_model);
    if (want(o, "throughput")) {
        if (throughput(o, "throughput_cluster_64", uri, 1, &ps, mctl, nm,
                       &tps->single, "throughput_single_64", &tps->cluster,
                       err) ||
            throughput(o, "throughput_cluster_64_many", uri, MANY_PER_CALL,
                       &ps, mctl, nm, &tps->single_many,
                       "throughput_single_64_many", &tps->cluster_many, err))
            goto out;
        tps->have_cluster = 1;
    }
    if (want(o, "reshard") &&
        group_reshard(o, uri, &ps, tps->have_cluster ? &tps->cluster : NULL,
                      err))
        goto out;
    if (want(o, "failover") && group_failover(o, uri, err))
        goto out;
    rc = 0;
out:
    for (int i = 0; i < nm; i++)
        redisFree(mctl[i]);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int prc, status = 1;
    char err[ERRLEN] = "", ver[64] = "", cpu_model[128] = "";
    uint64_t t_start = now_ns();
    tp_all tps = {.have_cluster = 0};

    prc = parse_args(argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    install_signals();
    if (!rh_available() || !rh_cluster_available()) {
        snprintf(err, ERRLEN, "needs redis-server and redis-cli on PATH");
        goto out;
    }
    cpu_model_name(cpu_model, sizeof cpu_model);
    if ((want(&o, "bytes") || want(&o, "throughput")) &&
        single_phase(&o, cpu_model, ver, sizeof ver, &tps, err))
        goto out;
    if ((want(&o, "throughput") || want(&o, "reshard") ||
         want(&o, "failover")) &&
        cluster_phase(&o, cpu_model, ver, sizeof ver, &tps, err))
        goto out;
    print_done("clusterbench", o.json, t_start);
    status = 0;
out:
    stop_servers();
    if (status != 0) {
        fprintf(stderr, "clusterbench: %s\n", err[0] ? err : "failed");
        if (g_signal)
            status = 128 + (int)g_signal;
    }
    fflush(stdout);
    return status;
}
