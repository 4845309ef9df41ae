/*
 * redis_script.c -- see redis_script.h.
 *
 * A call carries each rule its keys use once, in a table (the rule's
 * numbers, and the shapes it replaced while they may still hold state),
 * and per key only its rule's place in that table, cost, soft and field:
 * Redis runs one script, and reads its clock once, for many checks.  On a
 * single server the call declares its keys.  A cluster master gets them
 * as arguments instead ("C" mode: Redis would route by declared keys and
 * refuse keys of several slots; the script is flagged
 * allow-cross-slot-keys) and answers "not here" for a request whose keys
 * it does not serve now (RN_ELSEWHERE); a master demoted by a failover
 * refuses such a call with READONLY, which means the same.
 *
 * A lone request of one charge, the common case of an unbatched fleet,
 * goes to the library's lean function instead (lua/lean.lua): its key
 * and one argument, "algo:limit:burst:window:p:q:cost" (and ":1" where
 * option redis_oldest_limiter says no limiter before 1.1.0 shares the
 * keys: the token bucket may then write its expiry alone), answered by
 * one string of four doubles (the op's three, then the time).  A batch of
 * such requests (no multi-rule one among them) goes to the lean batch:
 * their keys, then an argument each, answered as the general path is.
 */
#include "redis_script.h"
#include "cluster_reply.h"
#include "ratelimit.h"
#include "redis_key.h"
#include "sha1.h"

#include <stdio.h>
#include <string.h>

/* ---- the rule table ---------------------------------------------------- */

/* A script call sends each rule its keys use once, in a table at the head
 * of its arguments; a key sends the index in ARGV of its rule's first
 * value, which the script reads the numbers from (lua/check.lua).  A
 * small direct-mapped cache maps a rule to that index: a rule missing
 * from it (first seen, or pushed out by another rule of the same slot)
 * enters the table again, which is harmless.  The same walk over the same
 * ops makes the same choices, so the table and the keys' indices come
 * from walks over the ops, with no list of rules kept (a call may carry
 * up to 64 x RL_OPS_MAX keys). */
#define RULE_CACHE 64
#define RULES_AT 4                /* ARGV index of the table's first value */

typedef struct rule_table {
    const rl_rule *rule[RULE_CACHE];
    int64_t at[RULE_CACHE];       /* its ARGV index                         */
    int64_t next;                 /* the next rule's                        */
} rule_table;

/* The ARGV index of op's rule; *is_new when it enters the table here,
 * taking `len` values. */
static int64_t rule_at(rule_table *t, const rl_rule *r, int64_t len,
                       int *is_new)
{
    unsigned h = (unsigned)(((uint64_t)(uintptr_t)r *
                             0x9e3779b97f4a7c15ULL) >> 58);

    *is_new = t->rule[h] != r;
    if (*is_new) {
        t->rule[h] = r;
        t->at[h] = t->next;
        t->next += len;
    }
    return t->at[h];
}

static void table_init(rule_table *t)
{
    memset(t->rule, 0, sizeof t->rule);
    t->next = RULES_AT;
}

/* Is r's replaced shape s sent with it, at `now`?  While its states may
 * still be alive, and (compact layout) when it is kept in the same layout
 * as the current shape: a bucket too big for the compact layout keeps
 * the plain one, whose names differ in more than the shape. */
static int old_shape_sent(const script_ctx *x, const rl_rule *r,
                          const rule_shape *s, int64_t now)
{
    return s->until_ms > now &&
           (!x->compact ||
            redis_key_compact_ok(&s->ap) == redis_key_compact_ok(&r->ap));
}

static int64_t old_shapes(const script_ctx *x, const rl_rule *r, int64_t now)
{
    int64_t k = 0;

    for (int i = 0; i < r->nprev; i++)
        k += old_shape_sent(x, r, &r->prev[i], now);
    return k;
}

/* How many values rule r takes in the table. */
static int64_t rule_len(int64_t nold)
{
    return 7 + (nold ? 1 + 8 * nold : 0);
}

void script_put_numbers(resp_buf *b, const algo_params *ap)
{
    resp_num(b, ap->algo);
    resp_num(b, ap->limit);
    resp_num(b, ap->burst);
    resp_num(b, ap->window_ms);
    resp_num(b, ap->p);
    resp_num(b, ap->q);
}

/* One rule of the table: its numbers, and the shapes it replaced that may
 * still hold state (nold of them; none for a refund), each with its
 * numbers, its name and the time it was replaced. */
static void put_rule(const script_ctx *x, resp_buf *b, const rl_rule *r,
                     int64_t nold, int64_t now)
{
    script_put_numbers(b, &r->ap);
    resp_num(b, nold);
    if (!nold)
        return;
    resp_arg(b, r->shape.name, r->shape.len);
    for (int i = 0; i < r->nprev; i++) {
        const rule_shape *s = &r->prev[i];
        if (!old_shape_sent(x, r, s, now))
            continue;
        script_put_numbers(b, &s->ap);
        resp_arg(b, s->name, s->len);
        resp_num(b, s->since_ms);
    }
}

/* ---- the call ------------------------------------------------------------ */

/* The table's size and whether any rule sends old shapes; *nkeys. */
static int64_t table_size(const script_ctx *x, rio_job *const *jobs, int nb,
                          int old, int64_t now, int64_t *nkeys, int *moves)
{
    rule_table t;
    int is_new;

    table_init(&t);
    *nkeys = 0;
    *moves = 0;
    for (int j = 0; j < nb; j++) {
        *nkeys += (int64_t)jobs[j]->n;
        for (size_t i = 0; i < jobs[j]->n; i++) {
            const rl_rule *rule = jobs[j]->ops[i].rule;
            int64_t nold = old ? old_shapes(x, rule, now) : 0;
            *moves |= nold != 0;
            rule_at(&t, rule, rule_len(nold), &is_new);
        }
    }
    return t.next;
}

static void put_keys(const script_ctx *x, resp_buf *b, rio_job *const *jobs,
                     int nb)
{
    for (int j = 0; j < nb; j++)
        for (size_t i = 0; i < jobs[j]->n; i++) {
            char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
            size_t flen;
            resp_arg(b, key, redis_key(&jobs[j]->ops[i], x->compact, key,
                                       field, &flen));
        }
}

/* A request sent short: its key count negated, then per op only its
 * rule's index and cost (soft 0 and the plain layout's empty field
 * implied; lua/check.lua): mode "c" on the plain layout, every op hard
 * and none a lease.  Two values per op fewer: each ARGV value costs Redis
 * a Lua string per call. */
static int short_job(const script_ctx *x, const rio_job *j, char mode)
{
    if (mode != 'c' || x->compact)
        return 0;
    for (size_t i = 0; i < j->n; i++)
        if (j->ops[i].soft || j->ops[i].lease_min > 0)
            return 0;
    return 1;
}

/* Which requests go short: bit j for jobs[j], decided once a call (by
 * ops_size(), for put_ops() too).  A call of more than SHORT_JOBS requests
 * (the I/O loop's batches have at most BATCH_MAX, 64) sends the rest in
 * the long form, which is always right. */
#define SHORT_JOBS 64

static int is_short(uint64_t brief, int j)
{
    return j < SHORT_JOBS && (brief >> j & 1);
}

/* The values put_ops() sends for the requests: a count each, and per op
 * 2 (short_job), 4, or 5 (cross-slot: its key name too); *brief which
 * requests go short. */
static int64_t ops_size(const script_ctx *x, rio_job *const *jobs, int nb,
                        char mode, uint64_t *brief)
{
    int64_t v = nb;

    *brief = 0;
    for (int j = 0; j < nb; j++) {
        int s = j < SHORT_JOBS && short_job(x, jobs[j], mode);
        *brief |= (uint64_t)s << (j % SHORT_JOBS);
        v += (int64_t)jobs[j]->n * (s ? 2 : mode == 'C' ? 5 : 4);
    }
    return v;
}

/* Per op: its rule's index, cost, soft (or the charge's time), field
 * (and key, cross-slot); a short request's (brief_jobs, from ops_size())
 * ops the first two. */
static void put_ops(const script_ctx *x, resp_buf *b, rio_job *const *jobs,
                    int nb, char mode, int old, int64_t now,
                    uint64_t brief_jobs)
{
    int cross = mode == 'C', is_new;
    rule_table t;

    table_init(&t);
    for (int j = 0; j < nb; j++) {
        int brief = is_short(brief_jobs, j);
        resp_num(b, brief ? -(int64_t)jobs[j]->n : (int64_t)jobs[j]->n);
        for (size_t i = 0; i < jobs[j]->n; i++) {
            const store_op *op = &jobs[j]->ops[i];
            const algo_decision *d = &jobs[j]->out[i];
            char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
            size_t flen = 0, klen = 0;
            int64_t nold = old ? old_shapes(x, op->rule, now) : 0;
            resp_num(b, rule_at(&t, op->rule, rule_len(nold), &is_new));
            resp_num(b, mode != 'r'                     ? op->cost
                        : !(d->allowed && d->changed) ? 0
                        : d->granted                  ? d->granted
                                                      : op->cost);
            if (brief)
                continue;
            /* a lease sends its least, negated, where soft goes */
            resp_num(b, mode == 'r'        ? jobs[j]->now_ms
                        : op->lease_min > 0 ? -op->lease_min
                                            : op->soft);
            if (x->compact || cross)
                klen = redis_key(op, x->compact, key, field, &flen);
            resp_arg(b, field, flen);
            if (cross)
                resp_arg(b, key, klen);
        }
    }
}

void script_ctx_names(script_ctx *x, const char *library, size_t len)
{
    char sha[41];

    sha1_hex(x->script, x->script_len, x->sha);
    x->fn[0] = x->lean[0] = 0;
    if (library) {
        sha1_hex(library, len, sha);
        snprintf(x->fn, sizeof x->fn, "rl_%s", sha);
        snprintf(x->lean, sizeof x->lean, "%s_l", x->fn);
    }
}

/* ---- the lean path ------------------------------------------------------- */

/* The lean function's argument: 7 integers and their colons, and the
 * tail (":1": option redis_oldest_limiter 1.1). */
#define LEAN_ARG_MAX (7 * 21 + 4)

/* Does the lean path serve this call (see redis_script.h): every request
 * one op, on the plain layout, no lease, no sliding log, no replaced
 * shape in force?  Then 1 for a lone request (x->lean), 2 for a batch
 * (x->fn and "_b"). */
static int lean_call(const script_ctx *x, rio_job *const *jobs, int nb,
                     char mode, int how, int64_t now)
{
    if (how != SCRIPT_FCALL || mode != 'c' || x->compact || !x->lean[0])
        return 0;
    for (int j = 0; j < nb; j++) {
        const store_op *op;
        if (jobs[j]->n != 1)
            return 0;
        op = jobs[j]->ops;
        if (op->lease_min > 0 || op->rule->ap.algo == RL_ALGO_SLIDING_LOG ||
            old_shapes(x, op->rule, now) != 0)
            return 0;
    }
    return nb == 1 ? 1 : 2;
}

/* One op's key, or its argument "algo:limit:burst:window:p:q:cost" and
 * x->lean_tail. */
static void put_lean_key(resp_buf *b, const rio_job *j)
{
    char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
    size_t flen, klen = redis_key(&j->ops[0], 0, key, field, &flen);

    resp_arg(b, key, klen);
}

static void put_lean_arg(const script_ctx *x, resp_buf *b, const rio_job *j)
{
    const store_op *op = &j->ops[0];
    const algo_params *ap = &op->rule->ap;
    char arg[LEAN_ARG_MAX];
    int n = snprintf(arg, sizeof arg, "%d:%lld:%lld:%lld:%lld:%lld:%lld%s",
                     ap->algo, (long long)ap->limit, (long long)ap->burst,
                     (long long)ap->window_ms, (long long)ap->p,
                     (long long)ap->q, (long long)op->cost,
                     x->lean_tail ? x->lean_tail : "");

    resp_arg(b, arg, (size_t)n);
}

/* FCALL of the lean function (one job) or the lean batch (nb jobs): the
 * keys, then an argument each (lua/lean.lua). */
static void put_lean(const script_ctx *x, resp_buf *b, rio_job *const *jobs,
                     int nb)
{
    char fn[sizeof x->lean + 8];
    size_t fl = (size_t)snprintf(fn, sizeof fn, "%s%s",
                                 nb == 1 ? x->lean : x->fn,
                                 nb == 1 ? "" : "_b");

    resp_head(b, '*', 3 + 2 * (int64_t)nb);
    resp_arg(b, "FCALL", 5);
    resp_arg(b, fn, fl);
    resp_num(b, nb);
    for (int j = 0; j < nb; j++)
        put_lean_key(b, jobs[j]);
    for (int j = 0; j < nb; j++)
        put_lean_arg(x, b, jobs[j]);
}

void script_put(const script_ctx *x, resp_buf *b, rio_job *const *jobs,
                int nb, char mode, int how)
{
    int64_t nkeys, test_now = 0, now, ntable, nops;
    uint64_t brief;
    int cross = mode == 'C', old = mode != 'r', moves, is_new;
    rule_table t;

    if (x->clock && x->clock->fn)
        test_now = x->clock->fn(x->clock->arg);
    now = test_now ? test_now : clock_wall_ms();
    if (lean_call(x, jobs, nb, mode, how, now)) {
        put_lean(x, b, jobs, nb);
        return;
    }
    ntable = table_size(x, jobs, nb, old, now, &nkeys, &moves);
    nops = ops_size(x, jobs, nb, mode, &brief);
    resp_head(b, '*', 3 + (cross ? 0 : nkeys) + ntable + nops);
    if (how == SCRIPT_EVAL) {
        resp_arg(b, "EVAL", 4);
        resp_arg(b, x->script, x->script_len);
    } else if (how == SCRIPT_FCALL) {
        resp_arg(b, "FCALL", 5);
        resp_arg(b, x->fn, strlen(x->fn));
    } else {
        resp_arg(b, "EVALSHA", 7);
        resp_arg(b, x->sha, 40);
    }
    resp_num(b, cross ? 0 : nkeys);
    if (!cross)
        put_keys(x, b, jobs, nb);
    resp_num(b, test_now);
    resp_arg(b, &mode, 1);
    resp_num(b, moves ? -ntable : ntable); /* the requests' part */
    table_init(&t);
    for (int j = 0; j < nb; j++)
        for (size_t i = 0; i < jobs[j]->n; i++) {
            const rl_rule *rule = jobs[j]->ops[i].rule;
            int64_t nold = old ? old_shapes(x, rule, now) : 0;
            rule_at(&t, rule, rule_len(nold), &is_new);
            if (is_new)
                put_rule(x, b, rule, nold, now);
        }
    resp_num(b, nb);
    put_ops(x, b, jobs, nb, mode, old, now, brief);
}

void script_put_asking(resp_buf *b)
{
    resp_raw(b, "*1\r\n$6\r\nASKING\r\n", 16);
}

/* ---- the answer ---------------------------------------------------------- */

/* Redis 7's answer to an FCALL of a function it does not have, and to
 * one the user may not run (an ACL with +function|load but not +fcall):
 * both are met as NOSCRIPT, the connection falls back to EVALSHA. */
#define SCRIPT_NO_FUNCTION "ERR Function not found"
#define SCRIPT_NO_FCALL "NOPERM"

int script_classify(const redisReply *rep, rnode_reply *why)
{
    const char *s = rep->str;
    int slot;

    if (strncmp(s, "NOSCRIPT", 8) == 0 ||
        strncmp(s, SCRIPT_NO_FUNCTION, sizeof SCRIPT_NO_FUNCTION - 1) == 0 ||
        (strncmp(s, SCRIPT_NO_FCALL, sizeof SCRIPT_NO_FCALL - 1) == 0 &&
         strstr(s, "'fcall'")))
        return -1;
    why->addr[0] = 0;
    switch (cluster_redirect_parse(s, rep->len, &slot, why->addr,
                                   sizeof why->addr)) {
    case 'M':
        return RN_MOVED;
    case 'A':
        return RN_ASK;
    }
    if (strncmp(s, "TRYAGAIN", 8) == 0)
        return RN_TRYAGAIN;
    if (strncmp(s, "CLUSTERDOWN", 11) == 0)
        return RN_DOWN;
    /* A replica refusing the write: in a cluster, a master just demoted by
     * a failover, met by a call whose keys it cannot route (undeclared).
     * Not a failure: sent again, keys declared, it answers MOVED (or,
     * while it turns replica, CLUSTERDOWN: store_cluster.c). */
    if (strncmp(s, "READONLY", 8) == 0)
        return RN_REPLICA;
    return RN_ERROR;
}

/* The answer of "c"/"C" (lua/check.lua): {the ops' answers as one string,
 * SCRIPT_ANSWER bytes an op, now}.  An op's answer is three little-endian
 * IEEE doubles, Lua's own numbers (struct.pack '<ddd'): the verdict (1
 * allowed, a lease's units charged; -retry ms denied; 0 not this node's),
 * remaining, reset ms.  Outside input all the same: a value that is not
 * an integer within +-2^53 makes the whole answer unreadable. */
#define SCRIPT_ANSWER 24
#define SCRIPT_INT_MAX 9007199254740992.0 /* 2^53 */

_Static_assert(sizeof(double) == 8, "doubles are IEEE binary64");

/* The double at p into *v; 0 if it is no integer within +-2^53. */
static int answer_int(const unsigned char *p, int64_t *v)
{
    uint64_t u = 0;
    double d;

    for (int i = 7; i >= 0; i--)
        u = u << 8 | p[i];
    memcpy(&d, &u, sizeof d);
    if (!(d >= -SCRIPT_INT_MAX && d <= SCRIPT_INT_MAX) ||
        d != (double)(int64_t)d)
        return 0;
    *v = (int64_t)d;
    return 1;
}

/* j's decisions from its ops' answers at p; 0 if one is unreadable. */
static int fill(rio_job *j, const unsigned char *p)
{
    for (size_t i = 0; i < j->n; i++, p += SCRIPT_ANSWER) {
        algo_decision *d = &j->out[i];
        int64_t verdict, remaining, reset;
        if (!answer_int(p, &verdict) || !answer_int(p + 8, &remaining) ||
            !answer_int(p + 16, &reset))
            return 0;
        d->allowed = verdict >= 1;
        d->granted = j->ops[i].lease_min > 0 && d->allowed ? verdict : 0;
        d->changed = d->allowed && j->ops[i].cost > 0;
        d->remaining = remaining;
        d->reset_ms = reset;
        d->retry_ms = verdict < 0 ? -verdict : 0;
        d->expires_ms = d->reset_ms;
    }
    return 1;
}

/* Is the first op's answer at p "not this node's" (verdict 0)? */
static int elsewhere(const unsigned char *p)
{
    int64_t verdict;

    return answer_int(p, &verdict) && verdict == 0;
}

/* The lean function's answer (lua/lean.lua): the op's SCRIPT_ANSWER
 * bytes, then the time, a fourth double.  Unreadable: the job untouched
 * (its rc stays a failure). */
static int lean_parse(const redisReply *rep, rio_job *j)
{
    const unsigned char *p = (const unsigned char *)rep->str;
    int64_t now;

    if (!j || rep->len != SCRIPT_ANSWER + 8 ||
        !answer_int(p + SCRIPT_ANSWER, &now) || !fill(j, p))
        return 0;
    j->now_ms = now;
    j->rc = RL_OK;
    j->why.status = RN_OK;
    return 0;
}

int script_parse(const redisReply *rep, rio_job *const *jobs,
                 const size_t *n, int nb)
{
    size_t want = 0;
    const unsigned char *p;

    if (rep->type == REDIS_REPLY_ERROR) {
        rnode_reply why = {0};
        int st = script_classify(rep, &why);
        if (st < 0)
            return 1;
        why.status = st;
        for (int j = 0; j < nb; j++)
            if (jobs[j])
                jobs[j]->why = why;
        return 0;
    }
    if (rep->type == REDIS_REPLY_STRING && nb == 1 && n[0] == 1)
        return lean_parse(rep, jobs[0]);
    for (int j = 0; j < nb; j++)
        want += n[j];
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING ||
        rep->element[1]->type != REDIS_REPLY_INTEGER ||
        rep->element[0]->len / SCRIPT_ANSWER != want ||
        rep->element[0]->len % SCRIPT_ANSWER)
        return 0;
    p = (const unsigned char *)rep->element[0]->str;
    for (int j = 0; j < nb; p += SCRIPT_ANSWER * n[j], j++) {
        if (!jobs[j])
            continue;
        if (n[j] && elsewhere(p)) {
            jobs[j]->why.status = RN_ELSEWHERE;
            continue;
        }
        if (!fill(jobs[j], p))
            continue;
        jobs[j]->now_ms = rep->element[1]->integer;
        jobs[j]->rc = RL_OK;
        jobs[j]->why.status = RN_OK;
    }
    return 0;
}

int script_shape_sent(const script_ctx *x, const rl_rule *r,
                      const rule_shape *s, int64_t now)
{
    return old_shape_sent(x, r, s, now);
}
