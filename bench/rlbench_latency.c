/*
 * rlbench_latency.c -- rlbench's latency figures: ns per rl_allow() on 1
 * and 2 threads beside the bare table's lookup, blocks taken in turn.
 * Method: docs/BENCHMARKS.md, "How each bench measures".
 */
#include <math.h>

#include "rlbench.h"

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double percentile(const uint32_t *sorted, size_t n, double p)
{
    size_t rank = (size_t)((double)n * p + 0.999999);

    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return (double)sorted[rank - 1];
}

/* One call of the library (LIB) or the reference (REF) on key.  Returns
 * a number that is always 0 but that the compiler cannot know to be, read
 * from the call's answer: the chained pass (untimed_pass) folds it into
 * the next key's index, so the CPU cannot start the next call's misses
 * before this call is done.  A failure sets w->st.rc. */
static uint64_t one_call(worker *w, int which, const char *key)
{
    if (which == LIB) {
        rl_result res = RL_RESULT_INIT;
        int rc = rl_allow(w->set.lim, key, RULE_ID, 1, &res);
        if (rc != RL_OK) {
            char what[64]; /* rl_errmsg() is per thread: taken here */
            snprintf(what, sizeof what, "rl_allow(%s)", key);
            set_err(w->st.err, what, rc, errtext(w->set.lim));
            return w->st.rc = rc, 0;
        }
        w->denied += !res.allowed;
        return (uint64_t)res.remaining >> 62; /* limits are 10^9 */
    } else {
        uint64_t before = w->sink;
        if (bare_touch(w->set.tab, key, &w->sink, w->st.err) != 0) {
            w->st.rc = -100;
            return 0;
        }
        return (w->sink - before) >> 62; /* the slot's count of inserts */
    }
}

void block_of(size_t nseq, int step, int which, size_t *lo, size_t *hi)
{
    size_t bs = (nseq + NBLOCKS - 1) / NBLOCKS;
    int b = which == LIB ? step : (step + NBLOCKS / 2) % NBLOCKS;

    *lo = (size_t)b * bs < nseq ? (size_t)b * bs : nseq;
    *hi = *lo + bs < nseq ? *lo + bs : nseq;
}

/* The key string of index k. */
static const char *key_at(const worker *w, uint64_t k)
{
    return w->set.keys + (size_t)k * KEY_STRIDE;
}

/* The untimed passes: every call of the sequence, library and reference
 * in turns, the clock read per block only; mean_ns[] is the mean per call
 * and cpu_share[] the thread's CPU time over the wall time (below 1: the
 * thread was off its CPU part of the time).  Chained: each key's index
 * depends on the previous call's answer (docs/BENCHMARKS.md). */
static void untimed_pass(worker *w, int chained, double *mean_ns,
                         double *cpu_share)
{
    uint64_t wall[2] = {0, 0}, cpu[2] = {0, 0};

    for (int step = 0; step < NBLOCKS; step++) {
        for (int which = LIB; which <= REF; which++) {
            size_t lo, hi;
            uint64_t t0, c0, dep = 0;

            block_of(w->nseq, step, which, &lo, &hi);
            pthread_barrier_wait(w->bar);
            c0 = thread_cpu_ns();
            t0 = now_ns();
            if (chained) /* two loops: a select could chain both */
                for (size_t i = lo; i < hi && w->st.rc == 0; i++)
                    dep = one_call(w, which, key_at(w, w->set.seq[i] ^ dep));
            else
                for (size_t i = lo; i < hi && w->st.rc == 0; i++)
                    one_call(w, which, key_at(w, w->set.seq[i]));
            wall[which] += now_ns() - t0;
            cpu[which] += thread_cpu_ns() - c0;
        }
    }
    for (int which = LIB; which <= REF; which++) {
        mean_ns[which] = (double)wall[which] / (double)w->nseq;
        cpu_share[which] =
            wall[which] > 0 ? (double)cpu[which] / (double)wall[which] : 1.0;
    }
}

/* ns from a to b, clamped to [0, UINT32_MAX]. */
static uint32_t ns_between(const struct timespec *a, const struct timespec *b)
{
    int64_t d = (int64_t)(b->tv_sec - a->tv_sec) * 1000000000LL +
                (b->tv_nsec - a->tv_nsec);

    return d < 0 ? 0 : d > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    size_t warm = w->nseq / 10;
    double cpu[2];

    /* Warm-up (untimed), the timed run, then the untimed runs.  Barriers
     * keep the threads in the same phase; a thread that failed still
     * meets every barrier. */
    for (int which = LIB; which <= REF; which++)
        for (size_t i = 0; i < warm && w->st.rc == 0; i++)
            one_call(w, which, key_at(w, w->set.seq[i]));
    w->denied = 0;
    for (int step = 0; step < NBLOCKS; step++) {
        for (int which = LIB; which <= REF; which++) {
            size_t lo, hi;

            block_of(w->nseq, step, which, &lo, &hi);
            pthread_barrier_wait(w->bar);
            for (size_t i = lo; i < hi && w->st.rc == 0; i++) {
                const char *key = key_at(w, w->set.seq[i]);
                struct timespec a, b;

                clock_gettime(CLOCK_MONOTONIC, &a);
                one_call(w, which, key);
                clock_gettime(CLOCK_MONOTONIC, &b);
                w->lat[which][i] = ns_between(&a, &b);
            }
        }
    }
    untimed_pass(w, 0, w->untimed_ns, w->cpu_share);
    untimed_pass(w, 1, w->chained_ns, cpu);
    return NULL;
}

static void summarize(uint32_t *lat, size_t n, lat_figs *f)
{
    double sum = 0;

    for (size_t i = 0; i < n; i++)
        sum += lat[i];
    f->mean = sum / (double)n;
    qsort(lat, n, sizeof *lat, cmp_u32);
    f->p50 = percentile(lat, n, 0.50);
    f->p99 = percentile(lat, n, 0.99);
    f->p999 = percentile(lat, n, 0.999);
}

int run_latency(rl_limiter *lim, const bare_table *tab, const char *keys,
                uint32_t *const *seqs, size_t nseq, int nthreads,
                uint32_t *const *lat, lat_figs *out, char *err)
{
    worker w[2];
    pthread_barrier_t bar;
    int rc;

    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    for (int t = 0; t < nthreads; t++)
        w[t] = (worker){.set = {.lim = lim, .tab = tab, .keys = keys,
                                .seq = seqs[t]},
                        .nseq = nseq, .bar = &bar,
                        .lat = {lat[LIB] + (size_t)t * nseq,
                                lat[REF] + (size_t)t * nseq}};
    rc = bench_threads(w, sizeof w[0], nthreads, worker_main, "rlbench",
                       err);
    pthread_barrier_destroy(&bar);
    out[LIB] = out[REF] = (lat_figs){.cpu_share = 1.0};
    for (int t = 0; t < nthreads; t++) {
        for (int which = LIB; which <= REF; which++) {
            out[which].untimed += w[t].untimed_ns[which] / nthreads;
            out[which].chained += w[t].chained_ns[which] / nthreads;
            out[which].cpu_share =
                fmin(out[which].cpu_share, w[t].cpu_share[which]);
        }
        out[LIB].denied += w[t].denied;
    }
    if (rc != 0)
        return rc;
    for (int which = LIB; which <= REF; which++)
        summarize(lat[which], (size_t)nthreads * nseq, &out[which]);
    return 0;
}

/* Median cost of one clock_gettime(CLOCK_MONOTONIC) pair, in ns: what
 * every timed sample carries on top of the call it times. */
double timer_overhead(uint32_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        clock_gettime(CLOCK_MONOTONIC, &b);
        buf[i] = ns_between(&a, &b);
    }
    qsort(buf, n, sizeof *buf, cmp_u32);
    return percentile(buf, n, 0.50);
}
