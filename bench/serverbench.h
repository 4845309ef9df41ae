/*
 * serverbench.h -- the modes of bench/redisbench that start their own
 * private redis-server through the test harness (tests/redis_harness.c):
 * deny (denybench.c), events (eventsbench.c), outage (outagebench.c), tls
 * (tlsbench.c) and timeout (timeoutbench.c).  Each mode reads its own
 * options (argv[0] is the mode's name); redisbench.c's server_mode()
 * starts the server a mode asks for and stops it however the mode ends.
 */
#ifndef RL_BENCH_SERVERBENCH_H
#define RL_BENCH_SERVERBENCH_H

#include <pthread.h>
#include <unistd.h>

#include "benchutil.h"
#include "redis_harness.h"

/* What the driver hands a mode: the server it started (srv and uri set
 * when the mode asks for one). */
typedef struct sb_env {
    rh_server srv;
    char uri[256];
} sb_env;

/* A mode: 0, 1 (a failure, said on stderr) or 2 (a usage error). */
int deny_main(int argc, char **argv, sb_env *env);
int events_main(int argc, char **argv, sb_env *env);
int outage_main(int argc, char **argv, sb_env *env);
int tls_main(int argc, char **argv, sb_env *env);
int timeout_main(int argc, char **argv, sb_env *env);
int clustermod_main(int argc, char **argv, sb_env *env);

#endif
