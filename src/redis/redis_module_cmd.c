/*
 * redis_module_cmd.c -- see redis_module_cmd.h.  A request goes as
 *   RL.CHECK n key... then per key one packed argument
 *   algo:limit:burst:window_ms:cost:mode:field, then for a key whose rule
 *   replaced shapes SHAPES i <shape> n and 6 values a replaced shape,
 *   then (a batch of m requests) REQS m k1..km, then [NOW ms]
 * (ratelimit.so(8)); its reply is one string of integers, ':' between
 * them: the time, then per key the verdict (1, a lease's units, or -retry
 * ms), remaining and reset.  (Four arguments and one reply for a lone
 * check instead of eleven and five: what Redis spends on each.)  A refund
 * goes as
 *   RL.SETTLE r n key... then per key: algo limit burst window_ms cost
 *   at_ms field [NOW ms]
 * (rl_settle's as RL.SETTLE s|d, redis_settle.c), answered by a number.
 */
#include "redis_module_cmd.h"
#include "ratelimit.h"
#include "clock.h"
#include "decimal.h"
#include "redis_key.h"

#include <stdio.h>
#include <string.h>

#define RCMD_MAX_OPS 64 /* ratelimit_module.c's MOD_MAX_OPS */

int rcmd_detect(const rio_opts *o, rlink *l, char *err, size_t errlen)
{
    redisReply *r;
    int has;

    if (o->command == RCMD_LUA)
        return 0;
    if ((r = rlink_command(l, "COMMAND INFO rl.check rl.settle")) == NULL) {
        snprintf(err, errlen, "COMMAND INFO: %s", l->errstr);
        return -1;
    }
    /* both: a module with RL.CHECK alone (its first build) is not used */
    has = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
          r->element[0]->type == REDIS_REPLY_ARRAY &&
          r->element[1]->type == REDIS_REPLY_ARRAY;
    freeReplyObject(r);
    if (!has && o->command == RCMD_MODULE) {
        snprintf(err, errlen, "redis_command=module: the server has no "
                 "RL.CHECK and RL.SETTLE (load ratelimit.so)");
        return -1;
    }
    return has ? RCONN_MODULE : 0;
}

int rcmd_batch_ok(rio_job *const *jobs, int nb)
{
    if (nb > RIO_MAX_REPLIES)
        return 0;
    for (int j = 0; j < nb; j++)
        if (jobs[j]->n < 1 || jobs[j]->n > RCMD_MAX_OPS)
            return 0;
    return 1;
}

/* The replaced shapes of op i's rule sent at now: how many (put 0: only
 * counted), each as 6 values after "SHAPES i <its shape> n"; the number
 * of arguments. */
static int64_t put_shapes(const script_ctx *x, resp_buf *b, size_t i,
                          const rl_rule *r, int64_t now, int put)
{
    int64_t n = 0;

    for (int k = 0; k < r->nprev; k++)
        n += script_shape_sent(x, r, &r->prev[k], now);
    if (!n || !put)
        return n ? 4 + 6 * n : 0;
    resp_arg(b, "SHAPES", 6);
    resp_num(b, (int64_t)i);
    resp_arg(b, r->shape.name, r->shape.len);
    resp_num(b, n);
    for (int k = 0; k < r->nprev; k++) {
        const rule_shape *s = &r->prev[k];
        if (!script_shape_sent(x, r, s, now))
            continue;
        resp_num(b, s->ap.algo);
        resp_num(b, s->ap.limit);
        resp_num(b, s->ap.burst);
        resp_num(b, s->ap.window_ms);
        resp_arg(b, s->name, s->len);
        resp_num(b, s->since_ms);
    }
    return 4 + 6 * n;
}

/* Op op's one packed argument: algo:limit:burst:window_ms:cost:mode:field
 * (field empty for the plain layout). */
static void put_packed(const script_ctx *x, resp_buf *b, const store_op *op)
{
    char buf[6 * 21 + REDIS_FIELD_MAX + 8], key[REDIS_KEY_MAX];
    char field[REDIS_FIELD_MAX];
    const algo_params *ap = &op->rule->ap;
    int64_t v[6] = {ap->algo, ap->limit, ap->burst, ap->window_ms, op->cost,
                    op->lease_min > 0 ? -op->lease_min : op->soft};
    size_t len = 0, flen = 0;

    for (int k = 0; k < 6; k++) {
        len += decimal_put(buf + len, v[k]);
        buf[len++] = ':';
    }
    if (x->compact) {
        redis_key(op, 1, key, field, &flen);
        memcpy(buf + len, field, flen);
    }
    resp_arg(b, buf, len + flen);
}

void rcmd_put(const script_ctx *x, resp_buf *b, rio_job *const *jobs,
              int nb)
{
    char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
    size_t flen, k = 0;
    int64_t test_now = x->clock && x->clock->fn
                           ? x->clock->fn(x->clock->arg) : 0;
    int64_t now = test_now ? test_now : clock_wall_ms(), shapes = 0, n = 0;

    for (int j = 0; j < nb; j++)
        for (size_t i = 0; i < jobs[j]->n; i++, n++)
            shapes += put_shapes(x, b, (size_t)n, jobs[j]->ops[i].rule, now,
                                 0);
    resp_head(b, '*', 2 + 2 * n + shapes + (nb > 1 ? 2 + nb : 0) +
                          (test_now ? 2 : 0));
    resp_arg(b, "RL.CHECK", 8);
    resp_num(b, n);
    for (int j = 0; j < nb; j++)
        for (size_t i = 0; i < jobs[j]->n; i++)
            resp_arg(b, key, redis_key(&jobs[j]->ops[i], x->compact, key,
                                       field, &flen));
    for (int j = 0; j < nb; j++)
        for (size_t i = 0; i < jobs[j]->n; i++)
            put_packed(x, b, &jobs[j]->ops[i]);
    for (int j = 0; shapes && j < nb; j++)
        for (size_t i = 0; i < jobs[j]->n; i++, k++)
            put_shapes(x, b, k, jobs[j]->ops[i].rule, now, 1);
    if (nb > 1) { /* the requests, each all or nothing on its own */
        resp_arg(b, "REQS", 4);
        resp_num(b, nb);
        for (int j = 0; j < nb; j++)
            resp_num(b, (int64_t)jobs[j]->n);
    }
    rcmd_put_now(b, test_now);
}

/* The next integer of the packed answer at *p (before end), and the ':'
 * after it; 0 when there is none. */
static int next_num(const char **p, const char *end, int64_t *v)
{
    const char *s = *p;
    int neg = s < end && *s == '-', digits = 0;
    uint64_t x = 0;

    for (s += neg; s < end && *s >= '0' && *s <= '9' && digits < 19;
         s++, digits++)
        x = x * 10 + (uint64_t)(*s - '0');
    if (!digits || (s < end && *s != ':'))
        return 0;
    *v = neg ? -(int64_t)x : (int64_t)x;
    *p = s + (s < end);
    return 1;
}

/* j's decisions from its part of the packed answer at *p, the call's
 * time `now` (as script_parse's fill()); 0 when it is not one. */
static int fill(rio_job *j, const char **p, const char *end, int64_t now)
{
    int64_t v[3];

    for (size_t i = 0; i < j->n; i++) {
        algo_decision *d = &j->out[i];
        for (int k = 0; k < 3; k++)
            if (!next_num(p, end, &v[k]))
                return 0;
        d->allowed = v[0] >= 1;
        d->granted = j->ops[i].lease_min > 0 && d->allowed ? v[0] : 0;
        d->changed = d->allowed && j->ops[i].cost > 0;
        d->remaining = v[1];
        d->reset_ms = v[2];
        d->retry_ms = v[0] < 0 ? -v[0] : 0;
        d->expires_ms = d->reset_ms;
    }
    j->now_ms = now;
    j->rc = RL_OK;
    j->why.status = RN_OK;
    return 1;
}

int rcmd_refused(const redisReply *rep)
{
    return rep->type == REDIS_REPLY_ERROR &&
           (strncmp(rep->str, "ERR unknown command", 19) == 0 ||
            (strncmp(rep->str, "NOPERM", 6) == 0 &&
             strstr(rep->str, "rl.") != NULL));
}

void rcmd_put_settle_op(resp_buf *b, const store_op *op, int64_t cost,
                        int64_t at, const char *field, size_t flen)
{
    const algo_params *ap = &op->rule->ap;

    resp_num(b, ap->algo);
    resp_num(b, ap->limit);
    resp_num(b, ap->burst);
    resp_num(b, ap->window_ms);
    resp_num(b, cost);
    resp_num(b, at);
    resp_arg(b, field, flen);
}

void rcmd_put_refund(const script_ctx *x, resp_buf *b, const rio_job *j)
{
    char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
    size_t flen;
    int64_t test_now = x->clock && x->clock->fn
                           ? x->clock->fn(x->clock->arg) : 0;

    resp_head(b, '*', 3 + 8 * (int64_t)j->n + (test_now ? 2 : 0));
    resp_arg(b, "RL.SETTLE", 9);
    resp_arg(b, "r", 1);
    resp_num(b, (int64_t)j->n);
    for (size_t i = 0; i < j->n; i++)
        resp_arg(b, key, redis_key(&j->ops[i], x->compact, key, field,
                                   &flen));
    for (size_t i = 0; i < j->n; i++) { /* what script_put's 'r' sends */
        const algo_decision *d = &j->out[i];
        redis_key(&j->ops[i], x->compact, key, field, &flen);
        rcmd_put_settle_op(b, &j->ops[i],
                           !(d->allowed && d->changed) ? 0
                           : d->granted                ? d->granted
                                                       : j->ops[i].cost,
                           j->now_ms, field, x->compact ? flen : 0);
    }
    rcmd_put_now(b, test_now);
}

void rcmd_put_now(resp_buf *b, int64_t test_now)
{
    if (test_now) {
        resp_arg(b, "NOW", 3);
        resp_num(b, test_now);
    }
}

int rcmd_parse(const redisReply *rep, rio_job *const *jobs, const size_t *n,
               int nb)
{
    const char *p = rep->str, *end = rep->str + rep->len;
    int64_t now, skip;

    if (rep->type == REDIS_REPLY_ERROR) {
        rnode_reply why = {.module = 1};
        int st;
        if (rcmd_refused(rep))
            return 1;
        /* a cluster's redirects, met as the script's own calls meet them */
        st = script_classify(rep, &why);
        why.status = st < 0 ? RN_ERROR : st;
        for (int j = 0; j < nb; j++)
            if (jobs[j])
                jobs[j]->why = why;
        return 0;
    }
    if (rep->type != REDIS_REPLY_STRING || !next_num(&p, end, &now))
        return 0;
    for (int j = 0; j < nb; j++) {
        if (jobs[j] && !fill(jobs[j], &p, end, now))
            return 0;
        for (size_t i = 0; !jobs[j] && i < 3 * n[j]; i++) /* left */
            if (!next_num(&p, end, &skip))
                return 0;
    }
    return 0;
}
