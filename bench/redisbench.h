/*
 * redisbench.h -- what the files of bench/redisbench share: the options,
 * the constants of every group, the control connection to the server under
 * test, CPU accounting, limiters and rules, and a pool of threads doing a
 * fixed number of checks (redisbench_util.c), and each group's entry point
 * (redisbench_<group>.c).  redisbench.c says what the program measures.
 */
#ifndef RL_BENCH_REDISBENCH_H
#define RL_BENCH_REDISBENCH_H

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
#include "algo.h"        /* algo_gcd64()                            */
#include "limiter.h"     /* limiter_store()                         */
#include "store_redis.h" /* rl_lua_check, store_redis_stats_get()   */
#include "benchutil.h"
#include "redis_harness.h" /* RH_CLUSTER_MAX */
#include "redisutil.h"

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
#define COMPACT_TARGET 48.0 /* bytes per client, compact layout */
#define TARGET_TP64 0.9
#define TARGET_TP1 0.95
#define USEC_KEYS 10000ULL
/* As many threads as throughput_64, the regime the peer figure comes from.
 * How busy Redis is kept changes usec_per_call itself (a script run one at
 * a time finds cold caches), hence hot_usec_per_call beside it. */
#define USEC_THREADS 64
#define MAX_KEYS 1000000000ULL

/* The first 4 run in every group; sliding_log (its limit capped at
 * RL_LOG_LIMIT_MAX) in usec_per_call and bytes_per_key only. */
#define ALGOS_ALL 5
static const char *const algo_names[ALGOS_ALL] = {
    "sliding_window", "token_bucket", "fixed_window", "gcra", "sliding_log"};

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
    int evalsha;                /* set by a group: redis_functions=0      */
    const char *command;        /* set by a group: redis_command (NULL:
                                   the default, auto)                    */
    const char *layout;         /* set by a group: redis_layout (NULL:
                                   the default, plain)                   */
    const char *uri;            /* the store (NULL: 127.0.0.1:port)       */
    unsigned long long slots;   /* cluster: slots moved by resharding    */
} options;

typedef struct cmdstat {
    double calls, usec_per_call, failed, rejected;
} cmdstat;

#define MANY_THREADS 2  /* throughput_64_many: 2 threads x 32 per call */
#define MANY_PER_CALL 32

#define OUT_TIMEOUT_MS 20        /* timeout_ms of the Redis limiters      */
#define OUT_FAILURES 5           /* breaker_failures: K                   */
#define OUT_COOLDOWN_MS 1000     /* breaker_cooldown_ms (the default)     */
#define OUT_OPEN_COOLDOWN_MS 60000 /* figure 1: no probe while measuring  */
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

#define DEGRADED (RL_FLAG_FAIL_OPEN | RL_FLAG_FALLBACK)

typedef struct rb_result {
    double rps, p50_ms, p99_ms;
    double wall_s;
    char cmd[1024];
} rb_result;

/* The servers whose CPU cpu_take() counts: masters (or the single server)
 * and replicas. */
typedef struct pidset {
    pid_t master[RH_CLUSTER_MAX], replica[RH_CLUSTER_MAX];
    int nmaster, nreplica;
} pidset;

/* A timed load (redisutil.h's) with the figures' counters around its
 * measured span (redisbench_throughput.c). */
typedef struct tp {
    tp_load l;
    uint64_t t0, t1;
    store_redis_stats s0, s1;
    cpu_snap c0, c1;
    tp_sums sum;              /* after tp_stop() */
} tp;

extern const text_layout layout;
extern redisContext *ctl;
extern long redis_pid;
extern pidset server_ps; /* {redis_pid} */
extern volatile sig_atomic_t g_signal; /* cluster: the signal that came */
extern _Atomic int g_stop;             /* cluster: workers, stop now    */

int64_t rt_ns(void);
void sleep_s(double s); /* cut short by a signal (g_signal) */

/* Sleeps until t_ns on clock clk (CLOCK_REALTIME: rt_ns()'s). */
void sleep_until(clockid_t clk, int64_t t_ns);
#define sleep_until_rt(t_ns) sleep_until(CLOCK_REALTIME, t_ns)

/* f as emit_figure() prints it; its extras counted up to the first with no
 * name, so a figure may list them in its initializer (.x = {...}). */
void emit(const options *o, const figure *f);

/* bcmd() and bcmd_ok() on ctl. */
#define ctl_cmd(err, ...) bcmd(ctl, err, __VA_ARGS__)
#define ctl_ok(err, ...) bcmd_ok(ctl, err, __VA_ARGS__)

/* INFO commandstats of cmd on c (on ctl: cmdstat_get); the script's, EVALSHA
 * and FCALL (redis_functions) together (on ctl: cmdstat_script). */
int cmdstat_at(redisContext *c, const char *cmd, cmdstat *cs, char *err);
int cmdstat_script_at(redisContext *c, cmdstat *cs, char *err);
#define cmdstat_get(cmd, cs, err) cmdstat_at(ctl, cmd, cs, err)
#define cmdstat_script(cs, err) cmdstat_script_at(ctl, cs, err)

/* n pipelined replies read from ctl: 0, or -1 (no reply, an error reply,
 * or with type > 0 a reply of another type) with "what: why" in err. */
int read_replies(unsigned long long n, int type, const char *what,
                 char *err);

/* The library's key as a redis-benchmark template; the keys' mean length
 * and one of them; the CPU the client and the servers in ps used so far. */
int key_template(char *out, size_t outlen, char *err);
int key_lengths(double *mean, char *example, size_t exlen, char *err);
void cpu_take(cpu_snap *s, const pidset *ps);

/* `threads` workers of rl_allow() (or rl_check_many() of per_call) on a
 * limiter of one rule of BIG_LIMIT on o's store, ids drawn below o->keys
 * (half from hot while t->l.run.cur >= 0) written with key_digits
 * digits: 0, or -1 with err (tp_stop() joins what started). */
int tp_start(tp *t, const options *o, const hot_pool *hot, int threads,
             int per_call, int key_digits, char *err);
/* The measured span: counting on (phase 1) and off (the load kept on),
 * each with the store's counters and cpu_take(ps). */
void tp_measure_begin(tp *t, const pidset *ps);
void tp_measure_end(tp *t, const pidset *ps);
void tp_stop(tp *t);
/* <name>_p50 and _p99 of sum's latencies: beside ref_us[i] (named
 * ref_name[i]) when given, else with x_us[] beside as ref_p50_us and
 * ref_p99_us when given. */
void tp_emit_latency(const options *o, const char *name, const tp_sums *sum,
                     const double ref_us[2], const char *const ref_name[2],
                     const double x_us[2]);

/* Limiters on o's store: of rules (JSON), or of one rule by user (one_rule()
 * writes its JSON; burst 0: none). */
int make_limiter(const options *o, const char *rules,
                 rl_limiter **out, char *err);
void one_rule(char *buf, size_t len, const char *id, int algo,
              long long limit, long long window_s, long long burst);
int limiter_one_rule(const options *o, const char *id, int algo,
                     long long limit, long long window_s, rl_limiter **out,
                     char *err);

/* redis-benchmark of the library's script (redisbench_throughput.c). */
int run_redis_benchmark(const options *o, const char *sha, int clients,
                        int pipeline, unsigned long long n,
                        unsigned long long keyspace, const char *key,
                        int algo, long long limit, long long window_s,
                        rb_result *out, char *err);
int group_throughput(const options *o, const char *sha, int threads,
                     int per_call, char *err);
int group_usec(const options *o, const char *sha, char *err);
int group_bytes(const options *o, char *err);
int group_compact(const options *o, char *err);
int bytes_one(const options *o, int a, long long limit, int passes,
              const char *name, double ref, const char *ref_name,
              double *value, char *err);

/* Group 5 (redisbench_accuracy.c): acc_prepare() forks the accuracy
 * processes before any thread runs, group_edge() runs window_edge, acc_run()
 * the accuracy figures; acc_stop() ends what acc_prepare() started. */
int acc_prepare(const options *o, char *err);
int group_edge(const options *o, char *err);
int acc_run(const options *o, char *err);
void acc_stop(void);

int group_outage(const options *o, char *err);
int group_module(const options *o, char *err);
int group_module_bytes(const options *o, char *err);

/* The mode `redisbench cluster` (clusterbench.c): a Redis Cluster it starts. */
int cluster_main(int argc, char **argv);

#endif
