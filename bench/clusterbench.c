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
 * Options: --quick (a smoke run well under a minute: 20k mem keys, 20k
 * usec checks, 2 s runs, 5 slots), --mem-keys N (default 1000000),
 * --seconds S (default 5), --usec-checks N (default 200000), --slots N
 * (default 20), --keys N (default 1000000), --only bytes|throughput|reshard,
 * --json (one object per line, the first named "params").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "ratelimit.h"
#include "limiter.h"     /* limiter_store()                       */
#include "store_redis.h" /* rl_lua_check, store_redis_stats_get() */
#include "benchutil.h"
#include "redisutil.h"
#include "redis_harness.h"

#define THREADS 64
#define MANY_PER_CALL 32  /* the *_many figures: 2 threads x 32 per call */
#define BIG_LIMIT 1000000000LL /* per window: nothing is ever denied */
#define BIG_WINDOW_S 60
#define MEM_LIMIT 100
#define MEM_WINDOW_S 60
#define MEM_BURST 100
#define PEER_BYTES_PER_KEY 144.0
#define COMPACT_TARGET 48.0
#define ENC_SAMPLE 1000
#define NODE_TIMEOUT_MS 5000
#define HOT_PER_SLOT 256
#define MIGRATE_STEP 10
#define DWELL_S 0.1
#define WARM_S 1.0

static const char *const algo_names[4] = {"sliding_window", "token_bucket",
                                          "fixed_window", "gcra"};
static const char *const layouts[2] = {"plain", "compact"};

/* ---- options -------------------------------------------------------- */

typedef struct options {
    double seconds;
    unsigned long long mem_keys, usec_checks, usec_clients, keys, slots;
    const char *only;
    int json, quick;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: clusterbench [--json] [--quick] [--mem-keys N] "
            "[--seconds S]\n"
            "                    [--usec-checks N] [--usec-clients N] "
            "[--keys N]\n"
            "                    [--slots N] [--only bytes|throughput|"
            "reshard]\n"
            "\n"
            "Starts its own redis-server and a 3-master + 3-replica Redis "
            "Cluster\n"
            "(tests/redis_harness.c) and measures: Redis bytes per tracked "
            "key and\n"
            "Redis CPU per check for the plain and compact layouts and the "
            "four\n"
            "algorithms; 64-thread throughput on the cluster beside the "
            "single server;\n"
            "redirects met while slots are resharded under load.  ratio = "
            "value / ref.\n"
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
            "reshard\n"
            "  --help            this text\n"
            "N may end in k, M or G (powers of 1000).\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    int have_mem = 0, have_sec = 0, have_usec = 0, have_slots = 0;

    memset(o, 0, sizeof *o);
    o->usec_clients = 5000;
    o->keys = 1000000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long n = 0;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(a, "--seconds") == 0 && val) {
            char *end = NULL;
            o->seconds = strtod(val, &end);
            if (end == val || *end || !(o->seconds >= 0.1 && o->seconds <= 3600))
                goto bad;
            have_sec = 1, i++;
        } else if (strcmp(a, "--only") == 0 && val) {
            if (strcmp(val, "bytes") && strcmp(val, "throughput") &&
                strcmp(val, "reshard"))
                goto bad;
            o->only = val, i++;
        } else if (val && (strcmp(a, "--mem-keys") == 0 ||
                           strcmp(a, "--usec-checks") == 0 ||
                           strcmp(a, "--usec-clients") == 0 ||
                           strcmp(a, "--keys") == 0 ||
                           strcmp(a, "--slots") == 0)) {
            if (parse_count(val, &n) != 0 || n < 1 || n > 100000000ULL)
                goto bad;
            if (strcmp(a, "--mem-keys") == 0)
                o->mem_keys = n, have_mem = 1;
            else if (strcmp(a, "--usec-checks") == 0)
                o->usec_checks = n, have_usec = 1;
            else if (strcmp(a, "--usec-clients") == 0)
                o->usec_clients = n;
            else if (strcmp(a, "--keys") == 0)
                o->keys = n;
            else if (n > 1000)
                goto bad;
            else
                o->slots = n, have_slots = 1;
            i++;
        } else {
            fprintf(stderr, "clusterbench: unknown or incomplete option "
                    "\"%s\"\n", a);
            usage(stderr);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "clusterbench: bad value for %s\n", a);
        return 2;
    }
    if (!have_mem)
        o->mem_keys = o->quick ? 20000 : 1000000;
    if (!have_sec)
        o->seconds = o->quick ? 2 : 5;
    if (!have_usec)
        o->usec_checks = o->quick ? 20000 : 200000;
    if (!have_slots)
        o->slots = o->quick ? 5 : 20;
    if (o->usec_clients > o->mem_keys)
        o->usec_clients = o->mem_keys;
    return 0;
}

static int want(const options *o, const char *group)
{
    return o->only == NULL || strcmp(o->only, group) == 0;
}

/* ---- stopping: signals and the servers ------------------------------ */

static volatile sig_atomic_t g_signal;
static _Atomic int g_stop; /* workers: stop now */

static void on_signal(int sig)
{
    g_signal = sig;
    atomic_store(&g_stop, 1);
}

static int interrupted(char *err)
{
    if (g_signal == 0)
        return 0;
    snprintf(err, ERRLEN, "interrupted by signal %d", (int)g_signal);
    return 1;
}

static void sleep_s(double s)
{
    uint64_t end = now_ns() + (uint64_t)(s * 1e9);

    while (g_signal == 0) {
        uint64_t t = now_ns();
        struct timespec ts;
        if (t >= end)
            break;
        t = end - t > 50000000ULL ? 50000000ULL : end - t;
        ts.tv_sec = 0;
        ts.tv_nsec = (long)t;
        nanosleep(&ts, NULL);
    }
}

static rh_server single;
static int single_up;
static rh_cluster cl;
static int cluster_up;
static double cluster_start_s;  /* rh_cluster_start(), until settled */
static int cluster_master[RH_CLUSTER_MAX]; /* ROLE at start: 1 master */

/* Masters at start that are masters no more (a failover): should be 0. */
static int failovers(void)
{
    int n = 0;

    for (int i = 0; i < cl.n; i++)
        if (cluster_master[i] && rh_cluster_is_master(&cl, i) != 1)
            n++;
    return n;
}

/* ---- output ----------------------------------------------------------- */

static const text_layout layout = {34, 12, 2, 12, 28, 3};

static void emit(const options *o, const figure *f)
{
    emit_figure(f, o->json, &layout);
}

/* ---- a server's control connection (hiredis, blocking) ---------------- */

/* A control connection with long timeouts (a FLUSHALL of millions of keys
 * takes seconds). */
static redisContext *control(const rh_server *s, char *err)
{
    redisContext *c = rh_connect(s);

    if (c == NULL) {
        snprintf(err, ERRLEN, "cannot connect to 127.0.0.1:%d", s->port);
        return NULL;
    }
    redisSetTimeout(c, (struct timeval){60, 0});
    return c;
}

/* INFO commandstats, every command: calls and usec (total). */
#define MAX_CMDS 48

typedef struct cmdstats {
    int n;
    char name[MAX_CMDS][32];
    double calls[MAX_CMDS], usec[MAX_CMDS], failed[MAX_CMDS];
} cmdstats;

static int cmdstats_add(redisContext *c, cmdstats *cs, char *err)
{
    redisReply *r = bcmd(c, err, "INFO commandstats");

    if (r == NULL)
        return -1;
    if (r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return snprintf(err, ERRLEN, "INFO commandstats: not a string"), -1;
    }
    for (const char *p = r->str; p && *p;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        char name[32], line[512];
        const char *colon;
        size_t len, ll;
        int i;

        if (strncmp(p, "cmdstat_", 8) != 0 || !(colon = strchr(p, ':')))
            continue;
        len = (size_t)(colon - p - 8);
        if (len >= sizeof name)
            continue;
        memcpy(name, p + 8, len);
        name[len] = '\0';
        ll = strcspn(colon + 1, "\r\n");
        if (ll >= sizeof line)
            ll = sizeof line - 1;
        memcpy(line, colon + 1, ll);
        line[ll] = '\0';
        for (i = 0; i < cs->n && strcmp(cs->name[i], name) != 0; i++)
            ;
        if (i == cs->n) {
            if (cs->n == MAX_CMDS)
                continue;
            snprintf(cs->name[cs->n++], sizeof cs->name[0], "%s", name);
        }
        cs->calls[i] += kv_num(line, "calls");
        cs->usec[i] += kv_num(line, "usec");
        cs->failed[i] += kv_num(line, "failed_calls");
    }
    freeReplyObject(r);
    return 0;
}

static int cmdstats_find(const cmdstats *cs, const char *name)
{
    for (int i = 0; i < cs->n; i++)
        if (strcmp(cs->name[i], name) == 0)
            return i;
    return -1;
}

static double cs_calls(const cmdstats *cs, const char *name)
{
    int i = cmdstats_find(cs, name);

    return i < 0 ? 0 : cs->calls[i];
}

static double cs_usec(const cmdstats *cs, const char *name)
{
    int i = cmdstats_find(cs, name);

    return i < 0 ? 0 : cs->usec[i];
}

/* FLUSHALL and wait until lazy freeing (if any) is over. */
static int flush_wait(redisContext *c, char *err)
{
    double pending = 1;

    if (bcmd_ok(c, err, "FLUSHALL SYNC") != 0)
        return -1;
    for (int i = 0; i < 1000 && pending > 0; i++) {
        if (info_num(c, "memory", "lazyfree_pending_objects", &pending, err))
            return -1;
        if (pending > 0)
            sleep_s(0.01);
    }
    if (pending > 0)
        return snprintf(err, ERRLEN, "lazyfree still pending after 10 s"), -1;
    return 0;
}

/* Wait until only `n` clients (ours) remain connected. */
static int clients_wait(redisContext *c, double n, char *err)
{
    double k = n + 1;

    for (int i = 0; i < 500 && k > n; i++) {
        if (info_num(c, "clients", "connected_clients", &k, err))
            return -1;
        if (k > n)
            sleep_s(0.01);
    }
    if (k > n)
        return snprintf(err, ERRLEN, "%g clients still connected", k), -1;
    return 0;
}

/* ---- CPU accounting ------------------------------------------------- */

/* utime + stime of a process, all its threads, in seconds; 0 if gone. */
static double proc_cpu(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long long ut = 0, st = 0;
    FILE *f;
    size_t n;
    const char *p;

    if (pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* after "pid (comm) ": state is field 3, utime 14, stime 15 */
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

#define MAX_PIDS RH_CLUSTER_MAX

typedef struct cpu_snap {
    uint64_t wall;
    double busy, steal, self, redis, replica;
} cpu_snap;

typedef struct cpu_use {
    double client, redis, replica, other, steal; /* cores */
} cpu_use;

/* The servers watched: masters (or the single server) and replicas. */
typedef struct pidset {
    pid_t master[MAX_PIDS], replica[MAX_PIDS];
    int nmaster, nreplica;
} pidset;

static void cpu_take(cpu_snap *s, const pidset *ps)
{
    struct rusage ru;

    memset(s, 0, sizeof *s);
    machine_cpu(&s->busy, &s->steal);
    getrusage(RUSAGE_SELF, &ru);
    s->self = rusage_seconds(&ru);
    for (int i = 0; i < ps->nmaster; i++)
        s->redis += proc_cpu(ps->master[i]);
    for (int i = 0; i < ps->nreplica; i++)
        s->replica += proc_cpu(ps->replica[i]);
    s->wall = now_ns();
}

static cpu_use cpu_diff(const cpu_snap *a, const cpu_snap *b)
{
    double w = (double)(b->wall - a->wall) / 1e9;
    cpu_use u;

    if (w <= 0)
        w = 1e-9;
    u.client = (b->self - a->self) / w;
    u.redis = (b->redis - a->redis) / w;
    u.replica = (b->replica - a->replica) / w;
    u.other = (b->busy - a->busy) / w - u.client - u.redis - u.replica;
    if (u.other < 0)
        u.other = 0; /* /proc/stat ticks are coarse */
    u.steal = (b->steal - a->steal) / w;
    return u;
}

/* ---- limiters --------------------------------------------------------- */

static int make_limiter(const char *store, const char *redis_layout,
                        const char *rules, rl_limiter **out, char *err)
{
    rl_config *cfg;
    rl_limiter *lim = NULL;
    int rc;

    *out = NULL;
    if ((cfg = rl_config_new()) == NULL) {
        set_err(err, "rl_config_new", RL_ENOMEM, NULL);
        return -1;
    }
    if ((rc = rl_config_set(cfg, "store", store)) != RL_OK ||
        (rc = rl_config_set(cfg, "timeout_ms", "1000")) != RL_OK ||
        (rc = rl_config_set(cfg, "redis_layout", redis_layout)) != RL_OK) {
        set_err(err, "rl_config_set", rc, errtext(NULL));
        rl_config_free(cfg);
        return -1;
    }
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    if (rc != RL_OK) {
        set_err(err, "rl_limiter_new", rc, errtext(NULL));
        return -1;
    }
    if ((rc = rl_rules_load_string(lim, rules)) != RL_OK) {
        set_err(err, "rl_rules_load_string", rc, errtext(lim));
        rl_limiter_free(lim);
        return -1;
    }
    *out = lim;
    return 0;
}

static void one_rule(char *buf, size_t len, const char *id, int algo,
                     long long limit, long long window_s, long long burst)
{
    char b[48] = "";

    if (burst > 0)
        snprintf(b, sizeof b, ",\"burst\":%lld", burst);
    snprintf(buf, len,
             "{\"rules\":[{\"rule_id\":\"%s\",\"dimension\":\"user\","
             "\"limit\":%lld,\"window_seconds\":%lld,\"algorithm\":\"%s\""
             "%s}]}",
             id, limit, window_s, algo_names[algo], b);
}

#define DEGRADED (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN | RL_FLAG_FAIL_CLOSED)

/* ---- a pool of threads doing a fixed number of checks ----------------- */

typedef struct job {
    rl_limiter *lim;
    const char *rule_id;
    unsigned long long total;  /* checks                               */
    unsigned long long nkeys;  /* key = ticket % nkeys; 0: key = ticket */
    _Atomic unsigned long long next;
} job;

typedef struct job_worker {
    job *j;
    unsigned long long fallback, degraded, denied;
    int rc;
    char err[ERRLEN];
} job_worker;

static void *job_main(void *arg)
{
    job_worker *w = arg;
    job *j = w->j;
    char key[32];
    unsigned long long t;

    while ((t = atomic_fetch_add(&j->next, 1)) < j->total &&
           !atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        rl_result res;
        int rc;

        snprintf(key, sizeof key, "user:%llu",
                 j->nkeys ? t % j->nkeys : t);
        if ((rc = rl_allow(j->lim, key, j->rule_id, 1, &res)) != RL_OK) {
            set_err(w->err, "rl_allow", rc, errtext(j->lim));
            w->rc = rc;
            atomic_store(&j->next, j->total);
            break;
        }
        if (res.flags & RL_FLAG_FALLBACK)
            w->fallback++;
        if (res.flags & DEGRADED)
            w->degraded++;
        if (!res.allowed)
            w->denied++;
    }
    return NULL;
}

typedef struct job_result {
    unsigned long long fallback, degraded, denied;
    double seconds;
} job_result;

static int run_job(job *j, int n, job_result *jr, char *err)
{
    job_worker w[THREADS];
    pthread_t tid[THREADS];
    int started = 0, rc = 0;
    uint64_t t0 = now_ns();

    memset(w, 0, sizeof w);
    atomic_store(&j->next, 0);
    for (int t = 0; t < n && t < THREADS; t++) {
        w[t].j = j;
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
    jr->seconds = (double)(now_ns() - t0) / 1e9;
    for (int t = 0; t < started; t++) {
        if (w[t].rc != 0 && rc == 0) {
            memcpy(err, w[t].err, ERRLEN);
            rc = -1;
        }
        jr->fallback += w[t].fallback;
        jr->degraded += w[t].degraded;
        jr->denied += w[t].denied;
    }
    if (rc == 0 && interrupted(err))
        rc = -1;
    return rc;
}

/* ---- groups 1 and 2: bytes_per_key and usec_per_call ------------------ */

typedef struct enc_sample {
    double sampled, listpack, hashes, fields;
    char example_key[128], example_enc[32];
} enc_sample;

/* TYPE, OBJECT ENCODING and (hashes) HLEN of up to ENC_SAMPLE keys from
 * a SCAN. */
static int sample_encodings(redisContext *c, enc_sample *es, char *err)
{
    char cursor[32] = "0";

    memset(es, 0, sizeof *es);
    do {
        redisReply *r = bcmd(c, err, "SCAN %s COUNT 200", cursor);
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            return snprintf(err, ERRLEN, "SCAN: unexpected reply"), -1;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements &&
                           es->sampled < ENC_SAMPLE; i++) {
            const redisReply *k = r->element[1]->element[i];
            redisReply *t, *e;
            int hash;

            if (k->type != REDIS_REPLY_STRING)
                continue;
            if ((t = bcmd(c, err, "TYPE %b", k->str, k->len)) == NULL) {
                freeReplyObject(r);
                return -1;
            }
            hash = t->type == REDIS_REPLY_STATUS && strcmp(t->str, "hash") == 0;
            freeReplyObject(t);
            if ((e = bcmd(c, err, "OBJECT ENCODING %b", k->str, k->len)) ==
                NULL) {
                freeReplyObject(r);
                return -1;
            }
            if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) {
                if (strcmp(e->str, "listpack") == 0)
                    es->listpack++;
                if (es->sampled == 0) {
                    snprintf(es->example_key, sizeof es->example_key, "%s",
                             k->str);
                    snprintf(es->example_enc, sizeof es->example_enc, "%s",
                             e->str);
                }
            }
            freeReplyObject(e);
            if (hash) {
                redisReply *h = bcmd(c, err, "HLEN %b", k->str, k->len);
                if (h == NULL) {
                    freeReplyObject(r);
                    return -1;
                }
                es->hashes++;
                es->fields += (double)h->integer;
                freeReplyObject(h);
            }
            es->sampled++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && es->sampled < ENC_SAMPLE);
    return 0;
}

static int group_bytes(const options *o, redisContext *c, const char *uri,
                       char *err)
{
    double plain_bytes[4] = {NAN, NAN, NAN, NAN};
    double plain_usec[4] = {NAN, NAN, NAN, NAN};
    unsigned long long n = o->mem_keys, nu = o->usec_clients;

    for (int l = 0; l < 2; l++) {
        for (int a = 0; a < 4; a++) {
            int bucket = a == 1 || a == 3;
            char rules[512], name[64], ks[128];
            rl_limiter *lim = NULL;
            job j;
            job_result fill = {0}, warm = {0}, meas = {0};
            double before, after, dbsize, expires;
            enc_sample es;
            cmdstats cs = {0};
            char per_check[MAX_CMDS][48];
            redisReply *r;

            one_rule(rules, sizeof rules, "b", a, MEM_LIMIT, MEM_WINDOW_S,
                     bucket ? MEM_BURST : 0);
            if (flush_wait(c, err) ||
                bcmd_ok(c, err, "DEBUG SET-ACTIVE-EXPIRE 0") ||
                clients_wait(c, 1, err) ||
                used_memory_settled(c, &before, err))
                return -1;
            if (make_limiter(uri, layouts[l], rules, &lim, err))
                return -1;
            memset(&j, 0, sizeof j);
            j.lim = lim;
            j.rule_id = "b";
            j.total = n; /* user:0 .. user:n-1, each once */
            if (run_job(&j, THREADS, &fill, err)) {
                rl_limiter_free(lim);
                return -1;
            }
            /* Measure with the same clients connected as before: ours. */
            rl_limiter_free(lim);
            lim = NULL;
            if (clients_wait(c, 1, err) ||
                used_memory_settled(c, &after, err))
                return -1;
            if ((r = bcmd(c, err, "DBSIZE")) == NULL)
                return -1;
            dbsize = (double)r->integer;
            freeReplyObject(r);
            if (info_str(c, "keyspace", "db0", ks, sizeof ks, err))
                return -1;
            expires = kv_num(ks, "expires");
            /* usec_per_call: existing state of the first nu clients, each
             * checked once, then round-robin: every nu / rate seconds. */
            if (make_limiter(uri, layouts[l], rules, &lim, err))
                return -1;
            memset(&j, 0, sizeof j);
            j.lim = lim;
            j.rule_id = "b";
            j.total = nu;
            if (run_job(&j, THREADS, &warm, err) ||
                bcmd_ok(c, err, "CONFIG RESETSTAT")) {
                rl_limiter_free(lim);
                return -1;
            }
            j.total = o->usec_checks;
            j.nkeys = nu;
            if (run_job(&j, THREADS, &meas, err)) {
                rl_limiter_free(lim);
                return -1;
            }
            rl_limiter_free(lim);
            if (cmdstats_add(c, &cs, err))
                return -1;
            /* The encodings now, when the states the usec run just
             * checked are alive: SCAN (and every other way to list keys)
             * leaves out expired keys, and deletes those it meets. */
            if (sample_encodings(c, &es, err))
                return -1;
            if (l == 0 && dbsize != (double)n)
                fprintf(stderr, "clusterbench: warning: plain %s: %.0f keys "
                        "in Redis for %llu clients\n", algo_names[a], dbsize,
                        n);
            {
                figure f = {0};
                snprintf(name, sizeof name, "bytes_per_key_%s_%s", layouts[l],
                         algo_names[a]);
                f.name = name;
                f.value = (after - before) / (double)n;
                f.unit = "B";
                f.nrefs = 1;
                f.ref[0] = PEER_BYTES_PER_KEY;
                f.ref_name[0] = "peer_gcra_string";
                if (l == 1) {
                    f.nrefs = 2;
                    f.ref[1] = plain_bytes[a];
                    f.ref_name[1] = "plain";
                    int ok = es.sampled > 0 && es.listpack == es.sampled &&
                             es.hashes == es.sampled;
                    xnum(&f, "target", COMPACT_TARGET);
                    xnum(&f, "layout_ok", ok);
                    if (!ok)
                        fprintf(stderr, "clusterbench: warning: compact %s: "
                                "the keys are not listpack hashes "
                                "(%.0f of %.0f sampled "
                                "are hashes): the figure is not the compact "
                                "layout's\n", algo_names[a], es.hashes,
                                es.sampled);
                    xnum(&f, "hashes", dbsize);
                    xnum(&f, "clients_per_hash",
                         dbsize > 0 ? (double)n / dbsize : NAN);
                } else {
                    plain_bytes[a] = f.value;
                    xnum(&f, "dbsize", dbsize);
                }
                xstr(&f, "layout", layouts[l]);
                xstr(&f, "algorithm", algo_names[a]);
                xnum(&f, "clients", (double)n);
                xnum(&f, "expires", expires);
                xnum(&f, "sampled", es.sampled);
                xnum(&f, "listpack_share",
                     es.sampled > 0 ? es.listpack / es.sampled : NAN);
                xnum(&f, "hash_share",
                     es.sampled > 0 ? es.hashes / es.sampled : NAN);
                xnum(&f, "sample_fields_per_hash",
                     es.hashes > 0 ? es.fields / es.hashes : NAN);
                xstr(&f, "key_example", es.example_key);
                xstr(&f, "encoding_example", es.example_enc);
                xnum(&f, "used_memory_before", before);
                xnum(&f, "used_memory_after", after);
                xnum(&f, "fill_checks_per_s", (double)n / fill.seconds);
                xnum(&f, "fallback", (double)fill.fallback);
                xnum(&f, "degraded", (double)fill.degraded);
                xnum(&f, "denied", (double)fill.denied);
                emit(o, &f);
            }

            {
                figure f = {0};
                double checks = (double)o->usec_checks;
                double calls = cs_calls(&cs, "evalsha");
                int ev = cmdstats_find(&cs, "evalsha");
                if (calls < 1) {
                    snprintf(err, ERRLEN, "usec_per_call %s %s: no EVALSHA "
                             "call", layouts[l], algo_names[a]);
                    return -1;
                }
                snprintf(name, sizeof name, "usec_per_call_%s_%s", layouts[l],
                         algo_names[a]);
                f.name = name;
                f.value = cs_usec(&cs, "evalsha") / checks;
                f.unit = "us";
                if (l == 1) {
                    f.nrefs = 1;
                    f.ref[0] = plain_usec[a];
                    f.ref_name[0] = "plain";
                } else {
                    plain_usec[a] = f.value;
                }
                xstr(&f, "layout", layouts[l]);
                xstr(&f, "algorithm", algo_names[a]);
                xnum(&f, "checks", checks);
                xnum(&f, "evalsha_calls", calls);
                xnum(&f, "evalsha_usec_per_call",
                     cs_usec(&cs, "evalsha") / calls);
                xnum(&f, "evalsha_failed", ev >= 0 ? cs.failed[ev] : 0);
                xnum(&f, "checks_per_call", checks / calls);
                xnum(&f, "clients", (double)nu);
                xnum(&f, "threads", THREADS);
                xnum(&f, "existing_share", cs_calls(&cs, "pexpiretime") / checks);
                for (int i = 0; i < cs.n; i++) {
                    if (strcmp(cs.name[i], "evalsha") == 0 ||
                        strncmp(cs.name[i], "config|", 7) == 0 ||
                        strcmp(cs.name[i], "info") == 0)
                        continue;
                    snprintf(per_check[i], sizeof per_check[i],
                             "%s_per_check", cs.name[i]);
                    xnum(&f, per_check[i], cs.calls[i] / checks);
                }
                xnum(&f, "checks_per_s", checks / meas.seconds);
                xnum(&f, "fallback", (double)(warm.fallback + meas.fallback));
                xnum(&f, "degraded", (double)(warm.degraded + meas.degraded));
                xnum(&f, "denied", (double)meas.denied);
                emit(o, &f);
            }
            if (flush_wait(c, err) ||
                bcmd_ok(c, err, "DEBUG SET-ACTIVE-EXPIRE 1") ||
                interrupted(err))
                return -1;
        }
    }
    return 0;
}

/* ---- groups 3 and 4: a timed load ------------------------------------- */

typedef struct hot_pool {
    unsigned n;
    unsigned id[HOT_PER_SLOT];
} hot_pool;

typedef struct tp_run {
    rl_limiter *lim;
    unsigned long long nkeys;
    _Atomic int phase;        /* 0 warm-up, 1 measured, 2 stop          */
    const hot_pool *hot;      /* reshard: pools of the moved slots      */
    _Atomic int cur;          /* the pool half the draws go to; -1 none */
    int per_call;             /* > 1: rl_check_many() of this many      */
} tp_run;

typedef struct tp_worker {
    tp_run *run;
    uint64_t rng;
    unsigned long long calls, hot_calls, fallback, degraded, denied, errors;
    hist h;
    char err[ERRLEN];
} tp_worker;

/* The *_many figures: MANY_PER_CALL requests per rl_check_many() call,
 * THREADS / MANY_PER_CALL threads (64 in flight); keys as tp_main's (the
 * rule counts by user); each request's latency is its call's. */
static void *tp_many_main(void *arg)
{
    tp_worker *w = arg;
    tp_run *r = w->run;
    char user[MANY_PER_CALL][24];
    rl_request req[MANY_PER_CALL];
    rl_result res[MANY_PER_CALL];
    int codes[MANY_PER_CALL], ph;

    while ((ph = atomic_load(&r->phase)) < 2 && !atomic_load(&g_stop)) {
        uint64_t t0, t1;

        for (int i = 0; i < MANY_PER_CALL; i++) {
            uint64_t x = splitmix64(&w->rng);
            snprintf(user[i], sizeof user[i], "%llu",
                     (unsigned long long)(((x >> 32) * r->nkeys) >> 32));
            req[i] = (rl_request){.user = user[i], .cost = 1};
        }
        t0 = now_ns();
        rl_check_many(r->lim, req, res, codes, MANY_PER_CALL);
        t1 = now_ns();
        if (ph != 1 || atomic_load(&r->phase) != 1)
            continue;
        for (int i = 0; i < MANY_PER_CALL; i++) {
            w->calls++;
            if (codes[i] != RL_OK) {
                if (w->errors++ == 0)
                    set_err(w->err, "rl_check_many", codes[i],
                            errtext(r->lim));
                continue;
            }
            hist_add(&w->h, t1 - t0);
            if (res[i].flags & RL_FLAG_FALLBACK)
                w->fallback++;
            if (res[i].flags & DEGRADED)
                w->degraded++;
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

    while ((ph = atomic_load(&r->phase)) < 2 && !atomic_load(&g_stop)) {
        rl_result res;
        uint64_t t0, t1, x = splitmix64(&w->rng);
        unsigned long long id;
        int rc, cur = r->hot ? atomic_load(&r->cur) : -1, hot = 0;

        if (cur >= 0 && (x & 1) && r->hot[cur].n > 0) {
            id = r->hot[cur].id[((x >> 32) * r->hot[cur].n) >> 32];
            hot = 1;
        } else {
            id = ((x >> 32) * r->nkeys) >> 32;
        }
        snprintf(key, sizeof key, "user:%llu", id);
        t0 = now_ns();
        rc = rl_allow(r->lim, key, "bench", 1, &res);
        t1 = now_ns();
        if (ph != 1 || atomic_load(&r->phase) != 1)
            continue;
        w->calls++;
        w->hot_calls += (unsigned long long)hot;
        if (rc != RL_OK) {
            if (w->errors++ == 0)
                set_err(w->err, "rl_allow", rc, errtext(r->lim));
            continue;
        }
        hist_add(&w->h, t1 - t0);
        if (res.flags & RL_FLAG_FALLBACK)
            w->fallback++;
        if (res.flags & DEGRADED)
            w->degraded++;
        if (!res.allowed)
            w->denied++;
    }
    return NULL;
}

typedef struct tp {
    tp_run run;
    tp_worker *w;
    pthread_t tid[THREADS];
    int started;
    uint64_t t0, t1;
    store_redis_stats s0, s1;
    cpu_snap c0, c1;
    /* the sums, after tp_stop() */
    unsigned long long calls, hot_calls, fallback, degraded, denied, errors;
    hist all;
    char first_err[ERRLEN];
} tp;

static int tp_start(tp *t, const char *uri, const hot_pool *hot,
                    unsigned long long nkeys, int per_call, char *err)
{
    char rules[512];
    int threads = per_call > 1 ? THREADS / per_call : THREADS;

    memset(t, 0, sizeof *t);
    atomic_store(&t->run.cur, -1);
    t->run.hot = hot;
    t->run.nkeys = nkeys;
    t->run.per_call = per_call;
    one_rule(rules, sizeof rules, "bench", 0, BIG_LIMIT, BIG_WINDOW_S, 0);
    if (make_limiter(uri, "plain", rules, &t->run.lim, err))
        return -1;
    if ((t->w = calloc(THREADS, sizeof *t->w)) == NULL) {
        rl_limiter_free(t->run.lim);
        t->run.lim = NULL;
        return snprintf(err, ERRLEN, "out of memory"), -1;
    }
    for (int i = 0; i < threads; i++) {
        t->w[i].run = &t->run;
        t->w[i].rng = 0xBE4C0000ULL + (uint64_t)i * 7919;
        if (pthread_create(&t->tid[i], NULL,
                           per_call > 1 ? tp_many_main : tp_main,
                           &t->w[i]) != 0) {
            snprintf(err, ERRLEN, "pthread_create failed");
            return -1; /* tp_stop() joins what started */
        }
        t->started++;
    }
    return 0;
}

static void tp_measure_begin(tp *t, const pidset *ps)
{
    cpu_take(&t->c0, ps);
    store_redis_stats_get(limiter_store(t->run.lim), &t->s0);
    t->t0 = now_ns();
    atomic_store(&t->run.phase, 1);
}

static void tp_measure_end(tp *t, const pidset *ps)
{
    atomic_store(&t->run.phase, 0); /* stop counting; keep the load on */
    t->t1 = now_ns();
    store_redis_stats_get(limiter_store(t->run.lim), &t->s1);
    cpu_take(&t->c1, ps);
}

static void tp_stop(tp *t)
{
    atomic_store(&t->run.phase, 2);
    for (int i = 0; i < t->started; i++)
        pthread_join(t->tid[i], NULL);
    for (int i = 0; i < t->started; i++) {
        tp_worker *w = &t->w[i];
        if (w->errors && t->first_err[0] == '\0')
            memcpy(t->first_err, w->err, ERRLEN);
        t->calls += w->calls;
        t->hot_calls += w->hot_calls;
        t->fallback += w->fallback;
        t->degraded += w->degraded;
        t->denied += w->denied;
        t->errors += w->errors;
        hist_merge(&t->all, &w->h);
    }
    t->started = 0;
    if (t->run.lim)
        rl_limiter_free(t->run.lim);
    t->run.lim = NULL;
    free(t->w);
    t->w = NULL;
}

/* ---- group 3: throughput ---------------------------------------------- */

typedef struct tp_figs {
    double rate, p50, p99;
} tp_figs;

/* CONFIG RESETSTAT on every server in cs[0..n) / their EVALSHA totals. */
static int reset_all(redisContext **cs, int n, char *err)
{
    for (int i = 0; i < n; i++)
        if (bcmd_ok(cs[i], err, "CONFIG RESETSTAT"))
            return -1;
    return 0;
}

static int throughput(const options *o, const char *name, const char *uri,
                      int per_call, const pidset *ps, redisContext **servers,
                      int nservers, const tp_figs *ref, const char *ref_name,
                      tp_figs *out, char *err)
{
    tp t;
    cmdstats cs = {0};
    double secs, rate;
    cpu_use cu;
    int rc = -1;

    if (tp_start(&t, uri, NULL, o->keys, per_call, err))
        goto out;
    sleep_s(WARM_S);
    if (interrupted(err) || reset_all(servers, nservers, err))
        goto out;
    tp_measure_begin(&t, ps);
    sleep_s(o->seconds);
    tp_measure_end(&t, ps);
    if (interrupted(err))
        goto out;
    for (int i = 0; i < nservers; i++)
        if (cmdstats_add(servers[i], &cs, err))
            goto out;
    rc = 0;
out:
    tp_stop(&t);
    if (rc != 0)
        return -1;
    if (t.errors > 0)
        return snprintf(err, ERRLEN, "%s: %llu errors, the first: %.400s",
                        name, t.errors, t.first_err), -1;
    secs = (double)(t.t1 - t.t0) / 1e9;
    rate = (double)t.calls / secs;
    cu = cpu_diff(&t.c0, &t.c1);
    out->rate = rate;
    out->p50 = hist_pct(&t.all, 0.50) / 1000.0;
    out->p99 = hist_pct(&t.all, 0.99) / 1000.0;
    {
        figure f = {0};
        double checks = (double)(t.s1.checks - t.s0.checks);
        double calls = (double)(t.s1.batches - t.s0.batches);
        char n50[64], n99[64];

        f.name = name;
        f.value = rate;
        f.unit = "checks/s";
        if (ref) {
            f.nrefs = 1;
            f.ref[0] = ref->rate;
            f.ref_name[0] = ref_name;
        }
        xnum(&f, "threads", per_call > 1 ? THREADS / per_call : THREADS);
        xnum(&f, "per_call", per_call);
        xnum(&f, "keys", (double)o->keys);
        xnum(&f, "seconds", secs);
        xnum(&f, "checks", (double)t.calls);
        xnum(&f, "p50_us", out->p50);
        xnum(&f, "p99_us", out->p99);
        xnum(&f, "fallback", (double)t.fallback);
        xnum(&f, "degraded", (double)t.degraded);
        xnum(&f, "denied", (double)t.denied);
        xnum(&f, "servers", nservers);
        xnum(&f, "server_usec_per_check",
             (double)t.calls > 0 ? cs_usec(&cs, "evalsha") / (double)t.calls
                                 : NAN);
        xnum(&f, "evalsha_calls", cs_calls(&cs, "evalsha"));
        xnum(&f, "checks_per_batch", calls > 0 ? checks / calls : NAN);
        xnum(&f, "evalsha_calls_per_check",
             (double)t.calls > 0 ? cs_calls(&cs, "evalsha") / (double)t.calls
                                 : NAN);
        xnum(&f, "client_cpu", cu.client);
        xnum(&f, "redis_cpu", cu.redis);
        xnum(&f, "replica_cpu", cu.replica);
        xnum(&f, "other_cpu", cu.other);
        xnum(&f, "steal_cpu", cu.steal);
        xnum(&f, "nproc", (double)sysconf(_SC_NPROCESSORS_ONLN));
        xnum(&f, "timeouts", (double)(t.s1.timeouts - t.s0.timeouts));
        xnum(&f, "moved", (double)(t.s1.moved - t.s0.moved));
        if (cluster_up) {
            xnum(&f, "failovers", failovers());
            xnum(&f, "cluster_start_s", cluster_start_s);
        }
        xnum(&f, "loadavg_1m", loadavg1());
        emit(o, &f);

        snprintf(n50, sizeof n50, "%s_p50", name);
        snprintf(n99, sizeof n99, "%s_p99", name);
        f = (figure){0};
        f.name = n50;
        f.value = out->p50;
        f.unit = "us";
        if (ref) {
            f.nrefs = 1;
            f.ref[0] = ref->p50;
            f.ref_name[0] = "ref_p50";
        }
        xnum(&f, "samples", (double)t.all.n);
        emit(o, &f);
        f = (figure){0};
        f.name = n99;
        f.value = out->p99;
        f.unit = "us";
        if (ref) {
            f.nrefs = 1;
            f.ref[0] = ref->p99;
            f.ref_name[0] = "ref_p99";
        }
        xnum(&f, "p999_us", hist_pct(&t.all, 0.999) / 1000.0);
        emit(o, &f);
    }
    return 0;
}

/* ---- group 4: resharding under load ------------------------------------ */

static int first_master_other_than(int not)
{
    for (int i = 0; i < cl.n; i++)
        if (i != not && rh_cluster_is_master(&cl, i) == 1)
            return i;
    return -1;
}

static int group_reshard(const options *o, const char *uri, const pidset *ps,
                         const tp_figs *cluster_ref, char *err)
{
    int nslots = (int)o->slots, src, dst, rc = -1, moved_keys = 0;
    int *slot = NULL;
    hot_pool *hot = NULL;
    tp t;
    char key[32];
    double secs, hot_min = 1e9;
    unsigned long long scan;

    if ((slot = calloc((size_t)nslots, sizeof *slot)) == NULL ||
        (hot = calloc((size_t)nslots, sizeof *hot)) == NULL) {
        free(slot);
        return snprintf(err, ERRLEN, "out of memory"), -1;
    }
    /* nslots consecutive slots of the master of slot 1000 (redis-cli
     * gives each master one range), to the next master. */
    src = rh_cluster_master_of(&cl, 1000);
    dst = first_master_other_than(src);
    if (src < 0 || dst < 0) {
        snprintf(err, ERRLEN, "reshard: no source or target master");
        goto out_free;
    }
    for (int i = 0; i < nslots; i++) {
        slot[i] = 1000 + i;
        if (rh_cluster_master_of(&cl, slot[i]) != src) {
            snprintf(err, ERRLEN, "reshard: slot %d is not on node %d",
                     slot[i], src);
            goto out_free;
        }
    }
    /* Their clients among the key space (and past it if it is small). */
    scan = o->keys < 4000000ULL ? 4000000ULL : o->keys;
    for (unsigned long long id = 0; id < scan; id++) {
        int len = snprintf(key, sizeof key, "user:%llu", id);
        unsigned s = rh_key_slot(key, (size_t)len);
        if (s >= (unsigned)slot[0] && s < (unsigned)(slot[0] + nslots)) {
            hot_pool *h = &hot[s - (unsigned)slot[0]];
            if (h->n < HOT_PER_SLOT && (id < o->keys || h->n < 16))
                h->id[h->n++] = (unsigned)id;
        }
    }
    for (int i = 0; i < nslots; i++)
        if (hot[i].n < hot_min)
            hot_min = hot[i].n;

    if (tp_start(&t, uri, hot, o->keys, 1, err))
        goto out;
    sleep_s(WARM_S);
    if (interrupted(err))
        goto out;
    tp_measure_begin(&t, ps);
    for (int i = 0; i < nslots; i++) {
        int k;
        atomic_store(&t.run.cur, i);
        sleep_s(DWELL_S); /* the slot's clients are created on src */
        if (rh_cluster_migrate_begin(&cl, slot[i], dst) != 0) {
            snprintf(err, ERRLEN, "migrate_begin slot %d failed (stderr)",
                     slot[i]);
            goto stop;
        }
        while ((k = rh_cluster_migrate_keys(&cl, slot[i], MIGRATE_STEP)) > 0)
            moved_keys += k;
        if (k < 0 || rh_cluster_migrate_end(&cl, slot[i], dst) != 0) {
            snprintf(err, ERRLEN, "migrating slot %d failed (stderr)",
                     slot[i]);
            goto stop;
        }
        sleep_s(DWELL_S); /* MOVED met, the map refreshed */
        if (interrupted(err))
            goto stop;
    }
    tp_measure_end(&t, ps);
    rc = 0;
stop:
    atomic_store(&t.run.cur, -1);
out:
    tp_stop(&t);
    if (rc != 0)
        goto out_free;
    secs = (double)(t.t1 - t.t0) / 1e9;
    {
        figure f = {0};
        double moved = (double)(t.s1.moved - t.s0.moved),
               asks = (double)(t.s1.asks - t.s0.asks),
               checks = (double)(t.s1.checks - t.s0.checks);
        cpu_use cu = cpu_diff(&t.c0, &t.c1);

        f.name = "reshard_redirect_share";
        f.value = checks > 0 ? (moved + asks) / checks : NAN;
        f.unit = "share";
        xnum(&f, "moved", moved);
        xnum(&f, "asks", asks);
        xnum(&f, "elsewhere", (double)(t.s1.elsewhere - t.s0.elsewhere));
        xnum(&f, "tryagain", (double)(t.s1.tryagain - t.s0.tryagain));
        xnum(&f, "refreshes", (double)(t.s1.refreshes - t.s0.refreshes));
        xnum(&f, "store_checks", checks);
        xnum(&f, "calls", (double)t.calls);
        xnum(&f, "redirects_per_call",
             t.calls ? (moved + asks) / (double)t.calls : NAN);
        xnum(&f, "hot_calls", (double)t.hot_calls);
        xnum(&f, "hot_share", t.calls ? (double)t.hot_calls / (double)t.calls
                                      : NAN);
        xnum(&f, "redirects_per_hot_call",
             t.hot_calls ? (moved + asks) / (double)t.hot_calls : NAN);
        xnum(&f, "slots", nslots);
        xnum(&f, "keys_moved", moved_keys);
        xnum(&f, "min_clients_per_slot", hot_min);
        xnum(&f, "source_node", src);
        xnum(&f, "target_node", dst);
        xnum(&f, "seconds", secs);
        xnum(&f, "timeouts", (double)(t.s1.timeouts - t.s0.timeouts));
        xnum(&f, "reconnects", (double)(t.s1.reconnects - t.s0.reconnects));
        xnum(&f, "client_cpu", cu.client);
        xnum(&f, "redis_cpu", cu.redis);
        xnum(&f, "replica_cpu", cu.replica);
        xnum(&f, "other_cpu", cu.other);
        xnum(&f, "failovers", failovers());
        emit(o, &f);

        f = (figure){0};
        f.name = "reshard_checks_per_s";
        f.value = (double)t.calls / secs;
        f.unit = "checks/s";
        if (cluster_ref && cluster_ref->rate > 0) {
            f.nrefs = 1;
            f.ref[0] = cluster_ref->rate;
            f.ref_name[0] = "throughput_cluster_64";
        }
        xnum(&f, "p50_us", hist_pct(&t.all, 0.50) / 1000.0);
        xnum(&f, "p99_us", hist_pct(&t.all, 0.99) / 1000.0);
        xnum(&f, "p999_us", hist_pct(&t.all, 0.999) / 1000.0);
        xnum(&f, "max_us", hist_pct(&t.all, 1.0) / 1000.0);
        emit(o, &f);

        f = (figure){0};
        f.name = "reshard_fallback";
        f.value = (double)t.fallback;
        f.unit = "checks";
        xnum(&f, "degraded", (double)t.degraded);
        xnum(&f, "denied", (double)t.denied);
        emit(o, &f);

        f = (figure){0};
        f.name = "reshard_errors";
        f.value = (double)t.errors;
        f.unit = "calls";
        xstr(&f, "first_error", t.first_err);
        emit(o, &f);
    }
out_free:
    free(slot);
    free(hot);
    return rc;
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

int main(int argc, char **argv)
{
    options o;
    int prc, status = 1;
    char err[ERRLEN] = "", ver[64] = "", uri[1024], cpu_model[128] = "";
    redisContext *ctl = NULL, *mctl[RH_CLUSTER_MAX] = {0};
    int nm = 0;
    uint64_t t_start = now_ns();
    tp_figs single_tp = {0}, cluster_tp = {0};
    tp_figs single_many_tp = {0}, cluster_many_tp = {0};
    int have_cluster_tp = 0;
    struct sigaction sa;

    prc = parse_args(argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    signal(SIGPIPE, SIG_IGN); /* a dropped connection is an error */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    if (!rh_available() || !rh_cluster_available()) {
        snprintf(err, ERRLEN, "needs redis-server and redis-cli on PATH");
        goto out;
    }
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

    /* ---- the single server: groups 1, 2 and throughput_single_64 ---- */
    if (want(&o, "bytes") || want(&o, "throughput")) {
        pidset ps = {0};

        if (rh_start(&single, NULL) != 0) {
            snprintf(err, ERRLEN, "cannot start redis-server (stderr)");
            goto out;
        }
        single_up = 1;
        if ((ctl = control(&single, err)) == NULL ||
            info_str(ctl, "server", "redis_version", ver, sizeof ver, err))
            goto out;
        /* The script loaded first, so no figure counts its cache entry. */
        {
            redisReply *r = bcmd(ctl, err, "SCRIPT LOAD %b", rl_lua_check,
                                rl_lua_check_len);
            if (r == NULL)
                goto out;
            freeReplyObject(r);
        }
        print_params(&o, ver, cpu_model);
        fflush(stdout);
        if (!rh_uri(&single, uri, sizeof uri)) {
            snprintf(err, ERRLEN, "rh_uri failed");
            goto out;
        }
        if (want(&o, "bytes") && group_bytes(&o, ctl, uri, err))
            goto out;
        ps.master[ps.nmaster++] = single.pid;
        if (want(&o, "throughput") &&
            (flush_wait(ctl, err) ||
             throughput(&o, "throughput_single_64", uri, 1, &ps, &ctl, 1,
                        NULL, NULL, &single_tp, err) ||
             flush_wait(ctl, err) ||
             throughput(&o, "throughput_single_64_many", uri, MANY_PER_CALL,
                        &ps, &ctl, 1, &single_tp, "throughput_single_64",
                        &single_many_tp, err)))
            goto out;
        redisFree(ctl);
        ctl = NULL;
        rh_stop(&single);
        single_up = 0;
    }

    /* ---- the cluster: throughput_cluster_64 and resharding ----------- */
    if (want(&o, "throughput") || want(&o, "reshard")) {
        pidset ps = {0};

        uint64_t tcs = now_ns();
        if (rh_cluster_start(&cl, 3, 1, NODE_TIMEOUT_MS) != 0) {
            snprintf(err, ERRLEN, "cannot start the cluster (stderr)");
            goto out;
        }
        cluster_up = 1;
        cluster_start_s = (double)(now_ns() - tcs) / 1e9;
        if (interrupted(err))
            goto out;
        if (!rh_cluster_uri(&cl, 0, uri, sizeof uri)) {
            snprintf(err, ERRLEN, "rh_cluster_uri failed");
            goto out;
        }
        for (int i = 0; i < cl.n; i++) {
            int m = rh_cluster_is_master(&cl, i);
            cluster_master[i] = m == 1;
            if (m == 1) {
                ps.master[ps.nmaster++] = cl.node[i].pid;
                if ((mctl[nm] = control(&cl.node[i], err)) == NULL)
                    goto out;
                nm++;
            } else {
                ps.replica[ps.nreplica++] = cl.node[i].pid;
            }
        }
        if (ver[0] == '\0' &&
            info_str(mctl[0], "server", "redis_version", ver, sizeof ver,
                     err))
            goto out;
        print_params(&o, ver, cpu_model);
        if (want(&o, "throughput")) {
            if (throughput(&o, "throughput_cluster_64", uri, 1, &ps, mctl,
                           nm, &single_tp, "throughput_single_64",
                           &cluster_tp, err) ||
                throughput(&o, "throughput_cluster_64_many", uri,
                           MANY_PER_CALL, &ps, mctl, nm, &single_many_tp,
                           "throughput_single_64_many", &cluster_many_tp,
                           err))
                goto out;
            have_cluster_tp = 1;
        }
        if (want(&o, "reshard") &&
            group_reshard(&o, uri, &ps, have_cluster_tp ? &cluster_tp : NULL,
                          err))
            goto out;
    }

    if (!o.json)
        printf("clusterbench: done in %.1f s, loadavg=%.2f\n",
               (double)(now_ns() - t_start) / 1e9, loadavg1());
    else
        printf("{\"name\":\"done\",\"seconds\":%.1f,\"loadavg_1m\":%.2f}\n",
               (double)(now_ns() - t_start) / 1e9, loadavg1());
    status = 0;
out:
    if (ctl)
        redisFree(ctl);
    for (int i = 0; i < nm; i++)
        redisFree(mctl[i]);
    stop_servers();
    if (status != 0) {
        fprintf(stderr, "clusterbench: %s\n", err[0] ? err : "failed");
        if (g_signal)
            status = 128 + (int)g_signal;
    }
    fflush(stdout);
    return status;
}
