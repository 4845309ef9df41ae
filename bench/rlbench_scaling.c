/*
 * rlbench_scaling.c -- rlbench's scaling figure (mem_check_scaling_2t):
 * 2 threads' checks/s on keys of their own over 1 thread's, beside the bare
 * table's same ratio in the same rounds.  Method: docs/BENCHMARKS.md, "How
 * each bench measures".
 */
#include "rlbench.h"

#define SCALE_ROUNDS 4

typedef struct scale_worker {
    bench_status st; /* first: bench_threads() reads it */
    bench_set set;
    size_t nkeys, nseq;
    int which, parity;
    pthread_barrier_t *bar;
    uint64_t wall_ns;
    uint64_t sink;
} scale_worker;

/* The i-th key index of a thread: seq[i] moved to the thread's parity. */
static size_t own_key(const scale_worker *w, size_t i)
{
    size_t k = ((size_t)w->set.seq[i] & ~(size_t)1) | (size_t)w->parity;

    return k < w->nkeys ? k : k >= 2 ? k - 2 : 0;
}

static void *scale_main(void *arg)
{
    scale_worker *w = arg;
    uint64_t t0;

    pthread_barrier_wait(w->bar);
    t0 = now_ns();
    for (size_t i = 0; i < w->nseq && w->st.rc == 0; i++) {
        const char *key = w->set.keys + own_key(w, i) * KEY_STRIDE;
        if (w->which == LIB) {
            rl_result res = RL_RESULT_INIT;
            int rc = rl_allow(w->set.lim, key, RULE_ID, 1, &res);
            if (rc != RL_OK) {
                set_err(w->st.err, "rl_allow (scaling)", rc, errtext(w->set.lim));
                w->st.rc = rc;
            }
            w->sink += (uint64_t)res.remaining;
        } else {
            if (bare_touch(w->set.tab, key, &w->sink, w->st.err) != 0)
                w->st.rc = -100;
        }
    }
    w->wall_ns = now_ns() - t0;
    return NULL;
}

/* One pass of `which` on nthreads threads: checks per second, all
 * threads together (each thread's checks over its own wall time). */
static int scale_pass(const scale_worker *proto, int which, int nthreads,
                      uint32_t *const *seqs, double *per_s, char *err)
{
    scale_worker w[2];
    pthread_barrier_t bar;
    int rc;

    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    for (int t = 0; t < nthreads; t++) {
        w[t] = *proto;
        w[t].which = which;
        w[t].parity = t;
        w[t].set.seq = seqs[t];
        w[t].bar = &bar;
    }
    rc = bench_threads(w, sizeof w[0], nthreads, scale_main, "rlbench", err);
    pthread_barrier_destroy(&bar);
    *per_s = 0;
    for (int t = 0; t < nthreads; t++)
        if (w[t].wall_ns > 0)
            *per_s += (double)w[t].nseq * 1e9 / (double)w[t].wall_ns;
    return rc;
}

int run_scaling(rl_limiter *lim, const bare_table *tab, const char *keys,
                size_t nkeys, uint32_t *const *seqs, size_t nseq,
                scale_figs *out, char *err)
{
    scale_worker proto = {.set = {.lim = lim, .tab = tab, .keys = keys},
                          .nkeys = nkeys, .nseq = nseq / SCALE_ROUNDS};
    double sum[2][2] = {{0, 0}, {0, 0}}; /* [which][threads - 1] */

    if (proto.nseq == 0)
        proto.nseq = 1;
    for (int r = 0; r < SCALE_ROUNDS; r++)
        for (int which = LIB; which <= REF; which++)
            for (int threads = 1; threads <= 2; threads++) {
                double per_s;
                if (scale_pass(&proto, which, threads, seqs, &per_s, err))
                    return -1;
                sum[which][threads - 1] += per_s;
            }
    for (int which = LIB; which <= REF; which++) {
        out->per_s_1t[which] = sum[which][0] / SCALE_ROUNDS;
        out->per_s_2t[which] = sum[which][1] / SCALE_ROUNDS;
        out->ratio[which] = out->per_s_2t[which] / out->per_s_1t[which];
    }
    return 0;
}
