/*
 * fuzz_script.c -- the answer of a check script call (script_parse() in
 * src/redis/redis_script.c, lua/check.lua's reply): what a Redis server sends
 * back is outside input.  The first bytes choose the call's shape (how
 * many requests, how many ops each, which ops are leases, which requests
 * left); the rest goes through hiredis's RESP reader and each reply is
 * parsed for that call.  A request the parser says was answered must hold
 * decisions a limiter can use: retry >= 0 and 0 when allowed, a lease's
 * grant >= 1 only when allowed, every number within +-2^53; one it did not
 * answer is left as it was.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_resp.h"
#include "ratelimit.h"
#include "redis_script.h"

#define FZ_JOBS 4
#define FZ_OPS 4
#define FZ_NUM_MAX 9007199254740992LL /* 2^53 */

typedef struct fz_call {
    store_op ops[FZ_JOBS][FZ_OPS];
    algo_decision out[FZ_JOBS][FZ_OPS];
    rio_job job[FZ_JOBS];
    rio_job *jobs[FZ_JOBS];
    size_t n[FZ_JOBS];
    int nb;
} fz_call;

/* The call's shape from the first 2 + nb bytes; how many it used. */
static size_t shape(fz_call *c, const uint8_t *d, size_t size)
{
    size_t used = 2;

    memset(c, 0, sizeof *c);
    if (size < 2)
        return 0;
    c->nb = 1 + d[0] % FZ_JOBS;
    for (int j = 0; j < c->nb && used < size; j++, used++) {
        c->n[j] = d[used] % (FZ_OPS + 1);
        c->job[j] = (rio_job){.kind = RIO_CHECK, .ops = c->ops[j],
                              .n = c->n[j], .out = c->out[j],
                              .rc = RL_ESTORE};
        c->jobs[j] = d[1] >> (4 + j) & 1 ? NULL : &c->job[j];
        for (size_t i = 0; i < c->n[j]; i++)
            c->ops[j][i] = (store_op){.cost = 1 + (int64_t)i,
                                      .lease_min = d[1] >> i & 1};
    }
    return used;
}

static int in_range(int64_t v)
{
    return v >= -FZ_NUM_MAX && v <= FZ_NUM_MAX;
}

static void check_job(const rio_job *j)
{
    if (!j || j->rc != RL_OK) {
        FUZZ_CHECK(!j || j->rc == RL_ESTORE);
        return;
    }
    FUZZ_CHECK(j->why.status == RN_OK);
    for (size_t i = 0; i < j->n; i++) {
        const algo_decision *d = &j->out[i];
        FUZZ_CHECK(d->allowed == 0 || d->allowed == 1);
        FUZZ_CHECK(d->retry_ms >= 0 && in_range(d->retry_ms));
        FUZZ_CHECK(!d->allowed || d->retry_ms == 0);
        FUZZ_CHECK(in_range(d->remaining) && in_range(d->reset_ms));
        FUZZ_CHECK(d->granted == 0 ||
                   (d->allowed && j->ops[i].lease_min > 0 &&
                    d->granted >= 1 && in_range(d->granted)));
    }
}

/* What each reply is parsed for: the call's shape, from the input's head. */
typedef struct fz_input {
    const uint8_t *data;
    size_t size;
} fz_input;

static void parse_one(const redisReply *reply, void *arg)
{
    const fz_input *in = arg;
    fz_call c;
    int rc;

    shape(&c, in->data, in->size); /* each reply parsed for a fresh call */
    rc = script_parse(reply, c.jobs, c.n, c.nb);
    FUZZ_CHECK(rc == 0 || rc == 1);
    for (int j = 0; j < c.nb; j++)
        check_job(c.jobs[j]);
}

int fuzz_script(const uint8_t *data, size_t size)
{
    fz_call c;
    size_t used = shape(&c, data, size);
    fz_input in = {.data = data, .size = size};

    if (used)
        fuzz_resp_each(data + used, size - used, parse_one, &in);
    return 0;
}

#ifdef FUZZ_TARGET_script
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_script(data, size);
}
#endif
