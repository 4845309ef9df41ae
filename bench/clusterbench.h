/*
 * clusterbench.h -- what the files of `redisbench cluster` share beyond
 * redisbench.h: the cluster it started (stopped on every way out), the
 * throughput figures kept as references, and each group's entry.
 * clusterbench.c says what the mode measures.
 */
#ifndef RL_BENCH_CLUSTERBENCH_H
#define RL_BENCH_CLUSTERBENCH_H

#include "redisbench.h"

#define NODE_TIMEOUT_MS 5000
#define MIGRATE_STEP 10
#define DWELL_S 0.1
#define WARM_S 1.0

typedef struct tp_figs {
    double rate, p50, p99;
} tp_figs;

extern rh_cluster cl;
extern int cluster_up;
extern double cluster_start_s;

int interrupted(char *err);
int failovers(void); /* masters at start that are masters no more */
int throughput(const options *o, const char *name, int per_call,
               const pidset *ps, redisContext **servers, int nservers,
               const tp_figs *ref, const char *ref_name, tp_figs *out,
               char *err);
int group_reshard(const options *o, const pidset *ps,
                  const tp_figs *cluster_ref, char *err);
int group_failover(const options *o, char *err);

#endif
