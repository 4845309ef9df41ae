/*
 * clusterbench.h -- what the files of bench/clusterbench share: the
 * options and constants, the servers it started and how it stops them,
 * control connections, CPU accounting, limiters, the job pool
 * (clusterbench_util.c), the timed load (clusterbench_load.c), and each
 * group's entry point.  clusterbench.c says what the program measures.
 */
#ifndef RL_BENCH_CLUSTERBENCH_H
#define RL_BENCH_CLUSTERBENCH_H

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
#define MIGRATE_STEP 10
#define DWELL_S 0.1
#define WARM_S 1.0

static const char *const algo_names[4] = {"sliding_window", "token_bucket",
                                          "fixed_window", "gcra"};
static const char *const layouts[2] = {"plain", "compact"};

typedef struct options {
    double seconds;
    unsigned long long mem_keys, usec_checks, usec_clients, keys, slots;
    const char *only;
    int json, quick;
} options;

/* INFO commandstats, every command: calls and usec (total). */
#define MAX_CMDS 48

typedef struct cmdstats {
    int n;
    char name[MAX_CMDS][32];
    double calls[MAX_CMDS], usec[MAX_CMDS], failed[MAX_CMDS];
} cmdstats;

#define MAX_PIDS RH_CLUSTER_MAX

/* The servers watched: masters (or the single server) and replicas. */
typedef struct pidset {
    pid_t master[MAX_PIDS], replica[MAX_PIDS];
    int nmaster, nreplica;
} pidset;

#define DEGRADED (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN | RL_FLAG_FAIL_CLOSED)

/* A timed load (redisutil.h's) with the figures' counters around its
 * measured span. */
typedef struct tp {
    tp_load l;
    uint64_t t0, t1;
    store_redis_stats s0, s1;
    cpu_snap c0, c1;
    tp_sums sum;              /* after tp_stop() */
} tp;

typedef struct tp_figs {
    double rate, p50, p99;
} tp_figs;

extern volatile sig_atomic_t g_signal;
extern _Atomic int g_stop;
extern rh_server single;
extern int single_up;
extern rh_cluster cl;
extern int cluster_up;
extern double cluster_start_s;
extern int cluster_master[RH_CLUSTER_MAX];
extern const text_layout layout;

void on_signal(int sig);

int interrupted(char *err);

void sleep_s(double s);

int failovers(void);

void emit(const options *o, const figure *f);

redisContext *control(const rh_server *s, char *err);

int cmdstats_add(redisContext *c, cmdstats *cs, char *err);

int cmdstats_find(const cmdstats *cs, const char *name);

double cs_calls(const cmdstats *cs, const char *name);

double cs_usec(const cmdstats *cs, const char *name);
/* The same for the script, EVALSHA and FCALL (redis_functions) together. */
double cs_script_calls(const cmdstats *cs);
double cs_script_usec(const cmdstats *cs);

void cpu_take(cpu_snap *s, const pidset *ps);

int make_limiter(const char *store, const char *redis_layout,
                 const char *rules, rl_limiter **out, char *err);

void one_rule(char *buf, size_t len, const char *id, int algo,
              long long limit, long long window_s, long long burst);

int group_bytes(const options *o, redisContext *c, const char *uri,
                char *err);

int tp_start(tp *t, const char *uri, const hot_pool *hot,
             unsigned long long nkeys, int per_call, char *err);

void tp_measure_begin(tp *t, const pidset *ps);

void tp_measure_end(tp *t, const pidset *ps);

void tp_stop(tp *t);

int throughput(const options *o, const char *name, const char *uri,
               int per_call, const pidset *ps, redisContext **servers,
               int nservers, const tp_figs *ref, const char *ref_name,
               tp_figs *out, char *err);

int group_reshard(const options *o, const char *uri, const pidset *ps,
                  const tp_figs *cluster_ref, char *err);

int group_failover(const options *o, const char *uri, char *err);

#endif
