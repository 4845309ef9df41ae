/*
 * rlbench_latency.c -- rlbench's latency figures: nanoseconds per
 * rl_allow() on the memory store with --keys keys in it, p50/p99/p999 and the
 * untimed mean, on 1 and 2 threads sharing one limiter, beside the bare
 * table's lookup of the same keys.  Library and reference take turns block
 * by block so that drift on a shared machine hits both alike; the clock's
 * own cost is measured apart (timer_overhead_ns).
 */
#include "rlbench.h"
/* ---- latency workers ------------------------------------------------------ */

/*
 * The library and the reference take turns, block by block, so that drift
 * on a shared machine (other processes, turbo, a neighbour's cache traffic)
 * lands on both alike.  Both run the same key sequence, but the reference
 * runs it half a round later, so it never finds the keys the library has
 * just pulled into cache (nor the other way round).
 */

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
            /* rl_errmsg() is per thread: capture it here. */
            char what[64];
            snprintf(what, sizeof what, "rl_allow(%s)", key);
            set_err(w->st.err, what, rc, errtext(w->set.lim));
            w->st.rc = rc;
            return 0;
        }
        if (!res.allowed)
            w->denied++;
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

/*
 * The untimed passes: every call of the sequence, library and reference in
 * turns, the clock read per block only; mean_ns[] is the mean per call and
 * cpu_share[] the thread's CPU time over the wall time.  Unchained, a
 * call's cache misses may overlap the next call's (the CPU runs ahead into
 * it); chained, each key's index depends on the previous call's answer, as
 * a server's next check waits for the request its last check let through,
 * so each call's misses are paid alone.
 */
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
        /* Below 1: the thread was off its CPU part of the time (another
         * process, or the other thread on a single core). */
        cpu_share[which] =
            wall[which] > 0 ? (double)cpu[which] / (double)wall[which] : 1.0;
    }
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
                int64_t d;

                clock_gettime(CLOCK_MONOTONIC, &a);
                one_call(w, which, key);
                clock_gettime(CLOCK_MONOTONIC, &b);
                d = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000LL +
                    (b.tv_nsec - a.tv_nsec);
                w->lat[which][i] = d < 0                      ? 0
                                   : d > (int64_t)UINT32_MAX ? UINT32_MAX
                                                              : (uint32_t)d;
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

/* Runs nthreads workers, each over the limiter and the reference table;
 * lat[LIB] and lat[REF] hold nthreads * nseq samples each. */
int run_latency(rl_limiter *lim, const bare_table *tab,
                       const char *keys, uint32_t *const *seqs, size_t nseq,
                       int nthreads, uint32_t *const *lat, lat_figs *out,
                       char *err)
{
    worker w[2];
    pthread_barrier_t bar;
    int rc;

    if (pthread_barrier_init(&bar, NULL, (unsigned)nthreads) != 0) {
        snprintf(err, ERRLEN, "pthread_barrier_init failed");
        return -1;
    }
    for (int t = 0; t < nthreads; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].set = (bench_set){.lim = lim, .tab = tab, .keys = keys,
                               .seq = seqs[t]};
        w[t].nseq = nseq;
        w[t].lat[LIB] = lat[LIB] + (size_t)t * nseq;
        w[t].lat[REF] = lat[REF] + (size_t)t * nseq;
        w[t].bar = &bar;
    }
    rc = bench_threads(w, sizeof w[0], nthreads, worker_main, "rlbench",
                       err);
    pthread_barrier_destroy(&bar);
    for (int which = LIB; which <= REF; which++) {
        memset(&out[which], 0, sizeof out[which]);
        out[which].cpu_share = 1.0;
    }
    for (int t = 0; t < nthreads; t++) {
        for (int which = LIB; which <= REF; which++) {
            out[which].untimed += w[t].untimed_ns[which] / nthreads;
            out[which].chained += w[t].chained_ns[which] / nthreads;
            if (w[t].cpu_share[which] < out[which].cpu_share)
                out[which].cpu_share = w[t].cpu_share[which];
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
        int64_t d = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000LL +
                    (b.tv_nsec - a.tv_nsec);
        buf[i] = d < 0 ? 0 : (uint32_t)d;
    }
    qsort(buf, n, sizeof *buf, cmp_u32);
    return percentile(buf, n, 0.50);
}
