/*
 * rlbench.h -- what the files of bench/rlbench share: the options and
 * constants, the keys and the limiter under test (rlbench.c), the
 * reference table (rlbench_bare.c), and each figure's entry point.
 * rlbench.c says what the program measures.
 */
#ifndef RL_BENCH_RLBENCH_H
#define RL_BENCH_RLBENCH_H

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "benchutil.h"

#define RULE_ID "bench"
#define RULE_LIMIT 1000000000LL
#define RULE_WINDOW 60
#define RULE_DIM "user"  /* the rule's dimension                        */
#define KEY_PREFIX RULE_DIM ":" /* a key: this + digits (fmt_key), as the
                                   rule names a request's user value      */
#define KEY_PREFIX_LEN (sizeof KEY_PREFIX - 1)
#define KEY_STRIDE 16 /* KEY_PREFIX + up to 10 digits + NUL */
#define DESIGN_NOTE_BYTES_PER_KEY 100.0
#define TARGET_BYTES_PER_KEY_BIG 48.0
#define MAX_KEYS 100000000ULL
#define MAX_SAMPLES 50000000ULL

typedef struct options {
    unsigned long long keys;    /* key set for latency and first memory figure */
    unsigned long long big;     /* second memory figure; 0 skips it           */
    unsigned long long samples; /* timed calls per thread per run             */
    const char *algo;           /* rule algorithm                             */
    unsigned long long batch;   /* requests per rl_check_many() call          */
    int json;
    int quick;
} options;

typedef struct bare_slot {
    uint64_t h;    /* 64-bit hash of the key; 0 marks an empty slot */
    uint64_t s[2]; /* 16 bytes of per-key state                     */
} bare_slot;

typedef struct bare_table {
    bare_slot *slots;
    size_t mask;
    size_t count;
} bare_table;

#define NBLOCKS 8
#define LIB 0
#define REF 1

/* What every figure's workers run over: the library and the reference,
 * the same keys, a sequence of key indexes. */
typedef struct bench_set {
    rl_limiter *lim;        /* LIB: the limiter under test           */
    const bare_table *tab;  /* REF: the reference table              */
    const char *keys;       /* KEY_STRIDE bytes per key              */
    const uint32_t *seq;    /* key indexes                           */
} bench_set;

/* The reference's lookup of key, its state added to *sink: 0, or -1
 * with err (ERRLEN bytes) set when the table lost the key. */
int bare_touch(const bare_table *t, const char *key, uint64_t *sink,
               char *err);

typedef struct worker {
    bench_status st;        /* first: bench_threads() reads it       */
    bench_set set;          /* seq: nseq key indexes                 */
    size_t nseq;
    uint32_t *lat[2];       /* out: ns per timed call, nseq each     */
    pthread_barrier_t *bar;
    double untimed_ns[2];   /* out: mean ns per call, untimed pass   */
    double cpu_share[2];    /* out: thread CPU time / wall, same pass */
    double chained_ns[2];   /* out: mean ns per call, chained pass   */
    unsigned long long denied;
    uint64_t sink;
} worker;

typedef struct lat_figs {
    double p50, p99, p999, mean, untimed, chained;
    double cpu_share; /* the lowest of the threads' */
    unsigned long long denied;
} lat_figs;

typedef struct mem_result {
    int rc;
    double bytes_per_key;   /* (RSS after inserts - RSS before) / N */
    double empty_bytes;     /* RSS growth of creating the empty store */
    double insert_ns;       /* mean ns per first-time insert          */
    unsigned long long denied;
    char err[ERRLEN];
} mem_result;

void fmt_key(char *buf, uint32_t i);
/* The memory store with the rule RULE_ID, its cap never binding: RL_OK, or
 * -1 with err set. */
int make_limiter(const options *o, unsigned long long nkeys,
                 rl_limiter **out, char *err);

int bare_init(bare_table *t, size_t n);
void bare_free(bare_table *t);
void bare_insert(bare_table *t, const char *key);

/* nthreads workers over the limiter and the table (rlbench_latency.c);
 * lat[LIB] and lat[REF] get nthreads * nseq samples each. */
int run_latency(rl_limiter *lim, const bare_table *tab, const char *keys,
                uint32_t *const *seqs, size_t nseq, int nthreads,
                uint32_t *const *lat, lat_figs *out, char *err);
double timer_overhead(uint32_t *buf, size_t n);

/* The sample range [*lo, *hi) of nseq that `which` (LIB, REF) runs at
 * `step` of NBLOCKS: the reference half a round after the library, so
 * neither finds the lines the other just fetched (rlbench_latency.c). */
void block_of(size_t nseq, int step, int which, size_t *lo, size_t *hi);

/* Checks per second on threads over keys of their own (rlbench_scaling.c),
 * [LIB] and [REF]. */
typedef struct scale_figs {
    double per_s_1t[2], per_s_2t[2];
    double ratio[2]; /* per_s_2t / per_s_1t */
} scale_figs;

#define TARGET_UNTIMED_RATIO_1T 1.5 /* issue 11: library / bare lookup */
#define TARGET_SCALING_2T 1.8       /* issue 11: 2 threads / 1 thread  */

int run_scaling(rl_limiter *lim, const bare_table *tab, const char *keys,
                size_t nkeys, uint32_t *const *seqs, size_t nseq,
                scale_figs *out, char *err);

/* ns per check through rl_check_many(), `batch` requests a call, 1
 * thread, untimed (rlbench_batch.c), [LIB]; [REF] the bare lookup's. */
typedef struct batch_figs {
    double per_check_ns[2];
    unsigned long long denied;
    uint64_t sink;
} batch_figs;

int run_batch(rl_limiter *lim, const bare_table *tab, const char *keys,
              const uint32_t *seq, size_t nseq, size_t batch,
              batch_figs *out, char *err);

/* Memory (rlbench_memory.c): fn(o, n, r) in a forked child, r copied
 * back: r->rc. */
void mem_limiter(const options *o, size_t n, mem_result *r);
void mem_table(const options *o, size_t n, mem_result *r);
int run_in_child(void (*fn)(const options *, size_t, mem_result *),
                 const options *o, size_t n, mem_result *r);

#endif
