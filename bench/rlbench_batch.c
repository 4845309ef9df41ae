/*
 * rlbench_batch.c -- rlbench's batch figure: ns per check through
 * rl_check_many(), --batch requests a call, beside the bare table's lookup
 * of the same keys.  Method: docs/BENCHMARKS.md, "How each bench measures".
 */
#include "rlbench.h"

typedef struct batch_run {
    bench_set set;
    size_t nseq, batch;
    rl_request *req;
    rl_result *res;
    int *codes;
    uint64_t sink;
    unsigned long long denied;
    char *err;
} batch_run;

/* Checks [lo, hi) of the sequence, batch at a time: 0, or -1 (err set). */
static int lib_block(batch_run *b, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i += b->batch) {
        size_t n = hi - i < b->batch ? hi - i : b->batch;
        int rc;

        for (size_t k = 0; k < n; k++) {
            const char *key = b->set.keys + (size_t)b->set.seq[i + k] * KEY_STRIDE;
            b->req[k] = (rl_request){.size = sizeof(rl_request),
                                     .user = key + KEY_PREFIX_LEN, .cost = 1};
            b->res[k] = (rl_result)RL_RESULT_INIT;
        }
        rc = rl_check_many(b->set.lim, b->req, b->res, b->codes, n);
        if (rc != RL_OK) {
            set_err(b->err, "rl_check_many", rc, errtext(b->set.lim));
            return -1;
        }
        for (size_t k = 0; k < n; k++)
            b->denied += !b->res[k].allowed;
    }
    return 0;
}

static int ref_block(batch_run *b, size_t lo, size_t hi)
{
    for (size_t i = lo; i < hi; i++) {
        const char *key = b->set.keys + (size_t)b->set.seq[i] * KEY_STRIDE;
        if (bare_touch(b->set.tab, key, &b->sink, b->err) != 0)
            return -1;
    }
    return 0;
}

int run_batch(rl_limiter *lim, const bare_table *tab, const char *keys,
              const uint32_t *seq, size_t nseq, size_t batch,
              batch_figs *out, char *err)
{
    batch_run b = {.set = {.lim = lim, .tab = tab, .keys = keys, .seq = seq},
                   .nseq = nseq, .batch = batch, .err = err};
    uint64_t wall[2] = {0, 0};
    int rc = 0;

    b.req = malloc(batch * sizeof *b.req);
    b.res = malloc(batch * sizeof *b.res);
    b.codes = malloc(batch * sizeof *b.codes);
    if (!b.req || !b.res || !b.codes) {
        snprintf(err, ERRLEN, "out of memory for a batch");
        rc = -1;
    }
    for (int step = 0; step < NBLOCKS && rc == 0; step++)
        for (int which = LIB; which <= REF && rc == 0; which++) {
            size_t lo, hi;
            uint64_t t0;
            block_of(nseq, step, which, &lo, &hi);
            t0 = now_ns();
            rc = which == LIB ? lib_block(&b, lo, hi) : ref_block(&b, lo, hi);
            wall[which] += now_ns() - t0;
        }
    for (int which = LIB; which <= REF; which++)
        out->per_check_ns[which] = (double)wall[which] / (double)nseq;
    out->denied = b.denied;
    out->sink = b.sink;
    free(b.req);
    free(b.res);
    free(b.codes);
    return rc;
}
