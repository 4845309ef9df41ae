/*
 * clusterbench.h -- what the files of `redisbench cluster` share beyond
 * redisbench.h: the servers it started (stopped on every way out), the
 * processes whose CPU it counts, the timed load with its counters around
 * the measured span (clusterbench_throughput.c), and each group's entry.
 * clusterbench.c says what the mode measures.
 */
#ifndef RL_BENCH_CLUSTERBENCH_H
#define RL_BENCH_CLUSTERBENCH_H

#include "redisbench.h"
#include "redis_harness.h"

#define NODE_TIMEOUT_MS 5000
#define MIGRATE_STEP 10
#define DWELL_S 0.1
#define WARM_S 1.0

/* The servers watched: masters (or the single server) and replicas. */
typedef struct pidset {
    pid_t master[RH_CLUSTER_MAX], replica[RH_CLUSTER_MAX];
    int nmaster, nreplica;
} pidset;

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

extern _Atomic int g_stop;
extern rh_cluster cl;
extern int cluster_up;
extern double cluster_start_s;

int interrupted(char *err);
int failovers(void); /* masters at start that are masters no more */

int tp_start(tp *t, const options *o, const hot_pool *hot, int per_call,
             char *err);
void tp_measure_begin(tp *t, const pidset *ps);
void tp_measure_end(tp *t, const pidset *ps);
void tp_stop(tp *t);

int throughput(const options *o, const char *name, int per_call,
               const pidset *ps, redisContext **servers, int nservers,
               const tp_figs *ref, const char *ref_name, tp_figs *out,
               char *err);

int group_reshard(const options *o, const pidset *ps,
                  const tp_figs *cluster_ref, char *err);

int group_failover(const options *o, char *err);

#endif
