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


static int one_call(worker *w, int which, const char *key)
{
    if (which == LIB) {
        rl_result res = RL_RESULT_INIT;
        int rc = rl_allow(w->lim, key, RULE_ID, 1, &res);
        if (rc != RL_OK) {
            /* rl_errmsg() is per thread: capture it here. */
            char what[64];
            snprintf(what, sizeof what, "rl_allow(%s)", key);
            set_err(w->err, what, rc, errtext(w->lim));
            w->rc = rc;
            return rc;
        }
        if (!res.allowed)
            w->denied++;
        return RL_OK;
    } else {
        const bare_slot *s = bare_lookup(w->tab, key);
        if (s == NULL) {
            snprintf(w->err, ERRLEN, "bare table lost key %s", key);
            w->rc = -100;
            return w->rc;
        }
        w->sink += s->s[0];
        return RL_OK;
    }
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void block_of(size_t nseq, int step, int which, size_t *lo, size_t *hi)
{
    size_t bs = (nseq + NBLOCKS - 1) / NBLOCKS;
    int b = which == LIB ? step : (step + NBLOCKS / 2) % NBLOCKS;

    *lo = (size_t)b * bs < nseq ? (size_t)b * bs : nseq;
    *hi = *lo + bs < nseq ? *lo + bs : nseq;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    size_t warm = w->nseq / 10;
    uint64_t wall[2] = {0, 0}, cpu[2] = {0, 0};

    /* Warm-up (untimed), the timed run, then the untimed run.  Barriers
     * keep the threads in the same phase; a thread that failed still
     * meets every barrier. */
    for (int which = LIB; which <= REF; which++)
        for (size_t i = 0; i < warm && w->rc == 0; i++)
            one_call(w, which, w->keys + (size_t)w->seq[i] * KEY_STRIDE);
    w->denied = 0;
    for (int step = 0; step < NBLOCKS; step++) {
        for (int which = LIB; which <= REF; which++) {
            size_t lo, hi;

            block_of(w->nseq, step, which, &lo, &hi);
            pthread_barrier_wait(w->bar);
            for (size_t i = lo; i < hi && w->rc == 0; i++) {
                const char *key = w->keys + (size_t)w->seq[i] * KEY_STRIDE;
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
    for (int step = 0; step < NBLOCKS; step++) {
        for (int which = LIB; which <= REF; which++) {
            size_t lo, hi;
            uint64_t t0, c0;

            block_of(w->nseq, step, which, &lo, &hi);
            pthread_barrier_wait(w->bar);
            c0 = thread_cpu_ns();
            t0 = now_ns();
            for (size_t i = lo; i < hi && w->rc == 0; i++)
                one_call(w, which, w->keys + (size_t)w->seq[i] * KEY_STRIDE);
            wall[which] += now_ns() - t0;
            cpu[which] += thread_cpu_ns() - c0;
        }
    }
    for (int which = LIB; which <= REF; which++) {
        w->untimed_ns[which] = (double)wall[which] / (double)w->nseq;
        /* Below 1: the thread was off its CPU part of the time (another
         * process, or the other thread on a single core). */
        w->cpu_share[which] =
            wall[which] > 0 ? (double)cpu[which] / (double)wall[which] : 1.0;
    }
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
    pthread_t tid[2];
    pthread_barrier_t bar;
    int rc = 0;

    if (pthread_barrier_init(&bar, NULL, (unsigned)nthreads) != 0) {
        snprintf(err, ERRLEN, "pthread_barrier_init failed");
        return -1;
    }
    for (int t = 0; t < nthreads; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].lim = lim;
        w[t].tab = tab;
        w[t].keys = keys;
        w[t].seq = seqs[t];
        w[t].nseq = nseq;
        w[t].lat[LIB] = lat[LIB] + (size_t)t * nseq;
        w[t].lat[REF] = lat[REF] + (size_t)t * nseq;
        w[t].bar = &bar;
    }
    for (int t = 0; t < nthreads; t++) {
        if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0) {
            /* The threads already started wait at a barrier forever. */
            fprintf(stderr, "rlbench: pthread_create failed\n");
            exit(1);
        }
    }
    for (int t = 0; t < nthreads; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&bar);

    for (int which = LIB; which <= REF; which++) {
        memset(&out[which], 0, sizeof out[which]);
        out[which].cpu_share = 1.0;
    }
    for (int t = 0; t < nthreads; t++) {
        if (w[t].rc != 0 && rc == 0) {
            rc = w[t].rc;
            memcpy(err, w[t].err, ERRLEN);
        }
        for (int which = LIB; which <= REF; which++) {
            out[which].untimed += w[t].untimed_ns[which] / nthreads;
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
