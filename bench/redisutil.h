/*
 * redisutil.h -- what the Redis benchmarks (redisbench and its modes) ask a
 * server on a control connection: commands that fail with a message, INFO
 * fields, used_memory once it has settled, FLUSHALL with its lazy freeing
 * waited for, and the keys a SCAN walks; and the loads both put on a
 * server: a timed load of threads of rl_allow(), rl_check() or
 * rl_check_many(), and a job, a fixed number of rl_allow() checks on the
 * same threads; and where the CPU went meanwhile.  err is ERRLEN bytes.
 */
#ifndef RL_BENCH_REDISUTIL_H
#define RL_BENCH_REDISUTIL_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include "benchutil.h"
#include "ratelimit.h"

/* A command's reply, or NULL (an error reply or no reply) with why in err;
 * the caller frees the reply. */
redisReply *bcmd(redisContext *c, char *err, const char *fmt, ...);

/* The same, the reply dropped: 0, or -1 with why in err. */
#define bcmd_ok(c, err, ...) bcmd_done(bcmd(c, err, __VA_ARGS__))
int bcmd_done(redisReply *r); /* frees r: 0, or -1 when NULL */

/* The peer's script: rate-limiter-flexible 11.4.0's incrTtlLuaScript
 * (bench/redisbench_usec.c), EVALSHA sha 1 key points duration. */
extern const char peer_lua[];

/* The value of "key:value" in INFO <section> ("" if absent): 0 or -1. */
int info_str(redisContext *c, const char *section, const char *key,
             char *out, size_t outlen, char *err);

/* The same as a number; a missing key is an error. */
int info_num(redisContext *c, const char *section, const char *key,
             double *v, char *err);

/* "name=value" inside a comma-separated INFO value; 0 if absent. */
double kv_num(const char *line, const char *name);

/* INFO memory used_memory once three readings 0.15 s apart agree (at most
 * 100 readings), so an incremental dict rehash (serverCron) is finished:
 * 0 or -1. */
int used_memory_settled(redisContext *c, double *v, char *err);

/* FLUSHALL SYNC, then wait (up to 10 s) until lazy freeing, if any, is
 * over: 0, or -1 with why in err. */
int flushall_wait(redisContext *c, char *err);

/* Every key a SCAN (COUNT count) returns, handed to fn (its err: err),
 * which returns 0 for more, 1 for enough (the SCAN ends) or -1 for a
 * failure: 0, or -1 after a failure of the SCAN or of fn. */
int scan_keys(redisContext *c, int count,
              int (*fn)(redisContext *c, const redisReply *key, void *arg,
                        char *err),
              void *arg, char *err);

/* Wait (up to 5 s) until only n clients (the caller's) remain connected
 * to c's server: 0, or -1 with why in err. */
int clients_wait(redisContext *c, double n, char *err);

/* ---- a job: a fixed number of rl_allow() checks ---------------------- */

/* total checks of rule_id on lim, each on "user:<k>": k the check's ticket
 * (nkeys 0), the ticket % nkeys, or (random) drawn uniformly below nkeys;
 * a set *stop (when stop is not NULL) ends the job early. */
typedef struct job {
    rl_limiter *lim;
    const char *rule_id;
    unsigned long long total, nkeys;
    int random;
    _Atomic int *stop;
} job;

/* What the runs of a job found, added up over the runs; seconds: the
 * last run's.  degraded: fallback, fail-open and fail-closed results. */
typedef struct job_result {
    unsigned long long fallback, degraded, denied;
    double seconds;
} job_result;

/* Runs j on n threads (at most JOB_THREADS; a load of the timed load's
 * workers, below, each taking tickets), adding to *jr: 0, or -1 with why in
 * err (a check failed, a thread did not start, *stop was set). */
#define JOB_THREADS 64
int run_job(job *j, int n, job_result *jr, const char *prog, char *err);

/* ---- a timed load: threads of rl_allow(), or of rl_check_many() ------- */

#define TP_MAX_THREADS 64
#define TP_MAX_PER_CALL 32
#define HOT_PER_SLOT 256

/* Client ids a load draws half its keys from (redisbench cluster: the clients
 * of a slot being moved). */
typedef struct hot_pool {
    unsigned n;
    unsigned id[HOT_PER_SLOT];
} hot_pool;

/* What the workers share; the caller sets it before tp_load_start(). A
 * worker checks "user:<id>" (rl_allow() of rule, NULL: "bench"; with
 * check, rl_check() of user <id>), or per_call
 * requests of user <id> in one rl_check_many(), ids drawn uniformly below
 * nkeys (nkeys 0: the worker's index, a key of its own; while cur >= 0,
 * every other one from hot[cur]) and printed zero-padded to key_digits;
 * key set: every rl_allow() of that key.  Only phase 1 is counted. */
typedef struct tp_run {
    rl_limiter *lim;
    const char *rule, *key;
    unsigned long long nkeys;
    int key_digits;
    int per_call;             /* > 1: rl_check_many() of this many       */
    int check;                /* per_call 1: rl_check(), not rl_allow()  */
    const hot_pool *hot;
    _Atomic int cur;          /* the pool half the draws go to; -1 none  */
    _Atomic int *stop;        /* NULL, or set to end the load at once    */
    _Atomic int phase;        /* 0 warm-up, 1 measured, 2 stop           */
    unsigned long long total; /* > 0: a job's (run_job()) checks, ids of
                                 tickets, not drawn unless random        */
    int random;
    _Atomic unsigned long long next; /* the next ticket                  */
} tp_run;

/* What the workers counted in phase 1 (errors: failed calls, the first
 * one's message in first_err; each request's latency is its call's;
 * local: allowed by the fallback). */
typedef struct tp_sums {
    unsigned long long calls, hot_calls, fallback, degraded, denied, errors;
    unsigned long long local;
    hist all;
    char first_err[ERRLEN];
} tp_sums;

typedef struct tp_load {
    tp_run run;
    tp_sums *w;               /* one per worker                          */
    struct tp_arg {           /* a worker's own: its index, its draws    */
        struct tp_load *l;
        int i;
        uint64_t rng;
    } arg[TP_MAX_THREADS];
    pthread_t tid[TP_MAX_THREADS];
    int started;
} tp_load;

/* Starts `threads` workers on l->run: 0, or -1 with why in err (then
 * tp_load_stop() joins those that started). */
int tp_load_start(tp_load *l, int threads, char *err);

/* Phase 2: joins the workers and adds what they counted to *sum. */
void tp_load_stop(tp_load *l, tp_sums *sum);

/* A whole load: tp_load_start(), phase 1 for ms milliseconds (or until
 * *l->run.stop), tp_load_stop() into *sum: 0, or -1 with why in err. */
int tp_load_for(tp_load *l, int threads, long ms, tp_sums *sum, char *err);

/* Where the CPU went: a snapshot (each program's cpu_take() fills it: the
 * servers by INFO cpu or by /proc/<pid>/stat) and the cores used between
 * two (cpu_diff). */
typedef struct cpu_snap {
    uint64_t wall;     /* ns, monotonic                                   */
    double busy;       /* s, all CPUs (/proc/stat, not idle/iowait)       */
    double steal;      /* s, taken by the hypervisor                      */
    double self;       /* s, this process (and its reaped children)       */
    double redis;      /* s, redis-server, or the masters                 */
    double replica;    /* s, the replicas                                 */
    double preempt;    /* redis-server's involuntary context switches     */
    double csw;        /* this process's context switches, all threads    */
} cpu_snap;

typedef struct cpu_use {
    double client, redis, replica, other, steal; /* cores      */
    double preempt, csw;                         /* per second */
} cpu_use;

cpu_use cpu_diff(const cpu_snap *a, const cpu_snap *b);

#endif
