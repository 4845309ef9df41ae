/*
 * redis_settle.c -- see redis_settle.h.
 *
 * The marker of op i of reservation id is the key
 * rl:{<tag>}:~r:<op id>:<reservation id> (ids in hex), where <tag> is
 * the hash tag of the op's state key (the text between its first '{' and
 * the next '}', as Redis Cluster reads it), so marker and state share a
 * slot and one script call declares both.  It is no state key's name (a
 * state key's tag is followed by a rule id, which has no '~'), and it
 * falls under the ACL pattern ~rl:{* the limiters' user already has.
 * The same settle through ratelimit.so is RL.SETTLE s|d with the same
 * keys (ratelimit.so(8)).
 */
#include "redis_settle.h"
#include "cluster_reply.h"
#include "ratelimit.h"
#include "redis_key.h"
#include "redis_module_cmd.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

#define MARKER_MAX (REDIS_KEY_MAX + 48)
#define RULE_VALUES 7 /* a rule's values in the table: check.lua's */

/* The marker's name of op (state key `key`, klen bytes) into buf. */
static size_t marker_name(const char *key, size_t klen, uint64_t op_id,
                          uint64_t id, char *buf)
{
    const char *open = memchr(key, '{', klen), *close = NULL;
    size_t tlen = klen;

    if (open)
        close = memchr(open + 1, '}', klen - (size_t)(open + 1 - key));
    if (open && close && close > open + 1) {
        key = open + 1;
        tlen = (size_t)(close - key);
    }
    return (size_t)snprintf(buf, MARKER_MAX, "rl:{%.*s}:~r:%016llx:%016llx",
                            (int)tlen, key, (unsigned long long)op_id,
                            (unsigned long long)id);
}

static void put_keys(const script_ctx *x, resp_buf *b,
                     const store_settle *ss, size_t from, size_t n)
{
    char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX], marker[MARKER_MAX];
    size_t flen;

    for (size_t i = from; i < from + n; i++)
        resp_arg(b, key, redis_key(&ss->ops[i], x->compact, key, field,
                                   &flen));
    for (size_t i = from; i < from + n; i++) {
        size_t klen = redis_key(&ss->ops[i], x->compact, key, field, &flen);
        resp_arg(b, marker, marker_name(key, klen, ss->op_id[i], ss->id,
                                        marker));
    }
}

void settle_put(const script_ctx *x, resp_buf *b, const store_settle *ss,
                size_t from, size_t n, int eval)
{
    int64_t test_now = x->clock && x->clock->fn ? x->clock->fn(x->clock->arg)
                                                : 0;
    int64_t part = 4 + RULE_VALUES * (int64_t)n; /* ARGV index of the ops */
    char mode = ss->debt ? 'd' : 's';

    resp_head(b, '*', 3 + 2 * (int64_t)n + 3 + RULE_VALUES * (int64_t)n + 2 +
                          4 * (int64_t)n);
    if (eval) {
        resp_arg(b, "EVAL", 4);
        resp_arg(b, x->script, x->script_len);
    } else {
        resp_arg(b, "EVALSHA", 7);
        resp_arg(b, x->sha, 40);
    }
    resp_num(b, 2 * (int64_t)n);
    put_keys(x, b, ss, from, n);
    resp_num(b, test_now);
    resp_arg(b, &mode, 1);
    resp_num(b, part);
    for (size_t i = from; i < from + n; i++) { /* one rule per op */
        script_put_numbers(b, &ss->ops[i].rule->ap);
        resp_num(b, 0); /* no replaced shapes */
    }
    resp_num(b, 1);
    resp_num(b, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
        size_t flen = 0;
        resp_num(b, 4 + RULE_VALUES * (int64_t)i);
        resp_num(b, ss->ops[from + i].cost);
        resp_num(b, ss->at_ms);
        if (x->compact)
            redis_key(&ss->ops[from + i], 1, key, field, &flen);
        resp_arg(b, field, flen);
    }
}

void settle_put_module(const script_ctx *x, resp_buf *b,
                       const store_settle *ss, size_t from, size_t n)
{
    int64_t test_now = x->clock && x->clock->fn ? x->clock->fn(x->clock->arg)
                                                : 0;
    char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
    size_t flen = 0;

    resp_head(b, '*', 3 + 9 * (int64_t)n + (test_now ? 2 : 0));
    resp_arg(b, "RL.SETTLE", 9);
    resp_arg(b, ss->debt ? "d" : "s", 1);
    resp_num(b, 2 * (int64_t)n);
    put_keys(x, b, ss, from, n);
    for (size_t i = from; i < from + n; i++) {
        redis_key(&ss->ops[i], x->compact, key, field, &flen);
        rcmd_put_settle_op(b, &ss->ops[i], ss->ops[i].cost, ss->at_ms, field,
                           x->compact ? flen : 0);
    }
    rcmd_put_now(b, test_now);
}

int settle_parse(const redisReply *rep, size_t *settled, rnode_reply *why)
{
    int slot;

    if (why)
        why->status = RN_ERROR;
    if (rep->type == REDIS_REPLY_INTEGER && rep->integer >= 0) {
        *settled = (size_t)rep->integer;
        if (why)
            why->status = RN_OK;
        return RL_OK;
    }
    if (rep->type != REDIS_REPLY_ERROR)
        return RL_ESTORE;
    if (strncmp(rep->str, "NOSCRIPT", 8) == 0)
        return 1;
    if (why) {
        why->addr[0] = 0;
        switch (cluster_redirect_parse(rep->str, rep->len, &slot, why->addr,
                                       sizeof why->addr)) {
        case 'M': why->status = RN_MOVED; break;
        case 'A': why->status = RN_ASK; break;
        }
    }
    return RL_ESTORE;
}
