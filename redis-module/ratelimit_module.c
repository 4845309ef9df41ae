/*
 * ratelimit_module.c -- ratelimit.so, a Redis module: the check of the Lua
 * library (lua/check.lua, mode "c") as a native command, RL.CHECK, for
 * servers that may load modules (managed services forbid them: the Lua
 * library stays the baseline).  One call decides one request: its keys
 * (one per rule) are read, each is decided by the C maths (src/base/algo.c,
 * the very code the memory store runs), and only when every hard rule
 * passes are the charged states written, all or nothing.  The states are
 * the Lua library's formats (module_state.c), so limiters calling the
 * module and limiters running the script share one fleet's keys.
 *
 *   RL.CHECK numkeys key [key ...] then per key
 *            algo limit burst window_ms cost mode field
 *            (or packed: one argument algo:limit:burst:window_ms:cost:
 *            mode:field a key, answered by one string)
 *            [SHAPES ...]           (a changed rule: module_convert.c)
 *            [REQS m k1 .. km]      (a batch: each request on its own)
 *            [NOW ms]                (only when loaded with "testclock")
 *
 * algo is lua/check.lua's number (0 sliding_window, 1 token_bucket,
 * 2 fixed_window, 3 gcra, 4 sliding_log), burst 0 for "the limit"; mode
 * is "0" (hard), "1" (soft: a denial vetoes nothing) or -m (a lease: cost
 * units, or as many as are left but at least m); field is "" for the plain
 * layout (the key is the state's), else the client's field in the compact
 * layout (the key is the rule's base name).  The answer is an array (the
 * packed form: one string, ':' between): the time decided at (ms), then
 * per key its verdict (1 allowed, a lease's units charged, or -retry ms),
 * remaining, and reset (ms).
 *
 * Clock: the server's (RedisModule_Milliseconds: the same ms as the
 * script's TIME).  Replication and AOF get the resulting writes (SET ...
 * PXAT, INCR, INCRBY, HSET, HDEL, PEXPIREAT, DEL), never the command, so
 * a replica and a replay hold the same state whatever their clocks.
 * Keys are declared by the getkeys API (numkeys as EVAL's), so Cluster
 * routing and ACL key patterns see them.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "decimal.h"
#include "module_api.h"
#include "module_cmd.h"
#include "module_convert.h"
#include "module_state.h"
#include "ratelimit.h"

#define MOD_NAME "ratelimit"
#define MOD_VERSION 1
#define MOD_MAX_OPS 64                 /* keys of one request            */
#define MOD_MAX_KEYS 2048              /* keys of one call (REQS: many
                                          requests, 64 x 32 a batch)      */
#define MOD_VALUES 7                   /* values per key                 */
#define MOD_LOG_MAX (2 * RL_LOG_LIMIT_MAX) /* a log's times, and a charge */
#define MOD_BASE_MAX 512               /* a compact base name's bytes    */

/* Loaded with "testclock": a trailing "NOW ms" sets the time (tests). */
static int test_clock;

/* The server's time of the command running, read once by mod_time():
 * what its writes compare expiries with (the time it decides at, but for
 * a test's NOW).  Commands run on Redis's main thread: no lock. */
static int64_t wall_ms;

/* "PXAT", made once: an argument of every SET replicated. */
static RedisModuleString *pxat;

/* The error of a bad number (module_cmd.h). */
const char mod_enum[] = "ERR ratelimit: a number expected";

typedef struct op {
    RedisModuleString *key, *field; /* field NULL: the plain layout      */
    RedisModuleKey *k;              /* plain: the key, open              */
    algo_params ap;
    int64_t cost, least;            /* least > 0: a lease's              */
    int soft;
    algo_state st;                  /* as read                           */
    const char *log;                /* a log's bytes as read             */
    size_t loglen;
    int64_t exp;                    /* the key's expiry as read          */
    algo_decision d;
    int64_t verdict;
    algo_state next;                /* the state to write (d.changed)    */
    const char *newlog;             /* the log to write (d.changed)      */
    size_t newlen;
    RedisModuleString *logval;      /* its copy (a request of many keys) */
    mc_old *old;                    /* its rule's replaced shapes, or NULL */
    RedisModuleString *own_field;   /* the packed form's field, to free  */
} op;

/* The ops' replaced shapes (the command runs on Redis's main thread). */
static mc_old olds[MOD_MAX_KEYS];

static int is_bucket(int algo)
{
    return algo == RL_ALGO_TOKEN_BUCKET || algo == RL_ALGO_GCRA;
}

const char *mod_rule_params(algo_params *ap, long long algo,
                            long long limit, long long burst, long long w)
{
    if (algo < 0 || algo > RL_ALGO_SLIDING_LOG)
        return "ERR ratelimit: algo must be 0..4";
    if (limit < 1 || limit > RL_LIMIT_MAX ||
        (algo == RL_ALGO_SLIDING_LOG && limit > RL_LOG_LIMIT_MAX))
        return "ERR ratelimit: limit out of range";
    if (w < 1 || w > RL_WINDOW_MAX * 1000)
        return "ERR ratelimit: window_ms out of range";
    if (burst < 0 || burst > RL_LIMIT_MAX || (burst && !is_bucket((int)algo)))
        return "ERR ratelimit: burst out of range";
    int64_t g = algo_gcd64(w, limit);
    *ap = (algo_params){
        .algo = (int)algo, .limit = limit, .window_ms = w,
        .burst = is_bucket((int)algo) ? (burst ? burst : limit) : 0,
        .p = w / g, .q = limit / g};
    if (is_bucket(ap->algo) ? ap->burst > RL_EXACT_MAX / ap->p
                            : limit > RL_EXACT_MAX / w)
        return "ERR ratelimit: the rule needs more than 52 bits";
    return NULL;
}

/* Op o's rule, cost and mode from its values v (algo limit burst
 * window_ms cost mode); NULL, or the error. */
static const char *op_rule(op *o, const long long *v)
{
    const char *err;

    if ((err = mod_rule_params(&o->ap, v[0], v[1], v[2], v[3])) != NULL)
        return err;
    if (v[4] < 0 || v[4] > RL_COST_MAX)
        return "ERR ratelimit: cost out of range";
    if (v[5] > 1 || v[5] < -RL_COST_MAX)
        return "ERR ratelimit: mode must be 0, 1 or -least";
    o->cost = v[4];
    o->soft = v[5] == 1;
    o->least = v[5] < 0 ? -v[5] : 0;
    return NULL;
}

/* Op o's field (flen bytes at f; 0: the plain layout), its rule set. */
static const char *op_field(RedisModuleCtx *ctx, op *o,
                            RedisModuleString *field, const char *f,
                            size_t flen)
{
    if (flen && o->ap.algo == RL_ALGO_SLIDING_LOG)
        return "ERR ratelimit: sliding_log has no compact layout";
    if (flen && !field) /* the packed form's: a string of its own */
        o->own_field = field = RedisModule_CreateString(ctx, f, flen);
    o->field = flen ? field : NULL;
    return NULL;
}

/* Key j's values, from argv[at]: the long form's 7 arguments. */
static const char *parse_op(RedisModuleCtx *ctx, op *o,
                            RedisModuleString **argv, int at)
{
    long long v[6];
    size_t flen;
    const char *err;

    for (int i = 0; i < 6; i++)
        if (RedisModule_StringToLongLong(argv[at + i], &v[i]) !=
            REDISMODULE_OK)
            return mod_enum;
    RedisModule_StringPtrLen(argv[at + 6], &flen);
    if ((err = op_rule(o, v)) != NULL)
        return err;
    return op_field(ctx, o, argv[at + 6], NULL, flen);
}

/* The packed form's last rule read: its argument up to the field (the
 * sixth ':' included) and the op it made.  A fleet checks few rules, so
 * most packed arguments start as the one before, and a memcmp replaces
 * the parse and the rule's gcd (the command runs on Redis's main thread:
 * no lock). */
#define MOD_HEAD_MAX 128
static char last_head[MOD_HEAD_MAX];
static size_t last_len;                /* 0: none yet                    */
static op last_rule;                   /* its ap, cost, soft, least      */

/* The packed form's one argument "algo:limit:burst:window_ms:cost:mode:
 * field" (each a decimal integer, mode perhaps negative; field empty for
 * the plain layout): one argument instead of seven, read here at a
 * fraction of what Redis and StringToLongLong spend on seven. */
static const char *parse_packed(RedisModuleCtx *ctx, op *o,
                                RedisModuleString *arg)
{
    size_t len, i = 0;
    const char *s = RedisModule_StringPtrLen(arg, &len), *err;
    long long v[6];

    if (last_len && len >= last_len && memcmp(s, last_head, last_len) == 0) {
        o->ap = last_rule.ap;
        o->cost = last_rule.cost;
        o->soft = last_rule.soft;
        o->least = last_rule.least;
        return op_field(ctx, o, NULL, s + last_len, len - last_len);
    }
    for (int k = 0; k < 6; k++, i++) {
        size_t from;
        unsigned d;
        int neg = k == 5 && i < len && s[i] == '-';
        unsigned long long x = 0;
        for (from = i += neg; i < len && (d = (unsigned char)s[i] - '0') < 10;
             i++)
            x = x * 10 + d;
        if (i == from || i - from > 18 || i >= len || s[i] != ':')
            return mod_enum;
        v[k] = neg ? -(long long)x : (long long)x;
    }
    if ((err = op_rule(o, v)) != NULL)
        return err;
    if (i <= MOD_HEAD_MAX) {
        memcpy(last_head, s, i);
        last_len = i;
        last_rule = *o;
    }
    return op_field(ctx, o, NULL, s + i, len - i);
}

/* Read op o's state: its own, or (none, its rule replaced shapes) one
 * converted from a replaced shape's (module_convert.c). */
static int read_op(RedisModuleCtx *ctx, op *o, int64_t now)
{
    int found, rc;

    if (!o->field) {
        o->k = RedisModule_OpenKey(ctx, o->key,
                                   REDISMODULE_READ | REDISMODULE_WRITE);
        rc = ms_plain_read(o->k, &o->ap, &o->st, &o->log, &o->loglen,
                           &found, &o->exp);
    } else {
        size_t blen;
        const char *base = RedisModule_StringPtrLen(o->key, &blen);
        if (blen > MOD_BASE_MAX)
            return MS_CORRUPT;
        rc = ms_compact_read(ctx, base, blen, o->field, &o->ap, now, &o->st,
                             &found);
    }
    if (rc != MS_OK || found || !o->old)
        return rc;
    return mc_migrate(ctx, o->key, o->field, &o->ap, o->old, now, &o->st);
}

/* A charge of `cost` on o's state as read: *d, and the state it leaves
 * in *next (a log: *drop and *at, algo_log_apply's). */
static void decide(const op *o, int64_t now, int64_t cost, algo_decision *d,
                   algo_state *next, size_t *drop, int64_t *at)
{
    static int64_t t[MOD_LOG_MAX];
    size_t n = o->loglen / MS_LOG_B;

    memset(d, 0, sizeof *d);
    if (o->ap.algo != RL_ALGO_SLIDING_LOG) {
        *next = o->st;
        algo_apply(&o->ap, next, now, cost, d);
        return;
    }
    for (size_t i = 0; i < n; i++)
        t[i] = ms_log_time(o->log + i * MS_LOG_B);
    algo_log_apply(&o->ap, t, n, now, cost, d, drop, at);
}

/* Decide op o: a plain charge, or a lease as lua/check.lua's lease().
 * A log to write is composed in a static buffer, copied to a string of
 * its own when `many` (the request's other keys compose theirs there). */
static void decide_op(RedisModuleCtx *ctx, op *o, int64_t now, int many)
{
    static char buf[MOD_LOG_MAX * MS_LOG_B];
    size_t drop = 0;
    int64_t at = 0, charged = o->cost;

    decide(o, now, o->cost, &o->d, &o->next, &drop, &at);
    if (o->least && !o->d.allowed) {
        charged = o->d.remaining;
        if (charged > o->least)
            decide(o, now, charged, &o->d, &o->next, &drop, &at);
        if (charged <= o->least || !o->d.allowed) {
            charged = o->least;
            decide(o, now, charged, &o->d, &o->next, &drop, &at);
        }
    }
    o->verdict = !o->d.allowed ? -o->d.retry_ms : o->least ? charged : 1;
    if (o->ap.algo == RL_ALGO_SLIDING_LOG && o->d.changed) {
        size_t keep = o->loglen - drop * MS_LOG_B, len = keep;
        if (keep + (size_t)charged * MS_LOG_B > sizeof buf) {
            o->d.changed = 0; /* a longer log than any rule keeps */
            return;
        }
        memcpy(buf, o->log + drop * MS_LOG_B, keep);
        for (int64_t i = 0; i < charged; i++, len += MS_LOG_B)
            ms_log_put(buf + len, at);
        o->newlog = buf;
        o->newlen = len;
        if (many) {
            o->logval = RedisModule_CreateString(ctx, buf, len);
            o->newlog = RedisModule_StringPtrLen(o->logval, &o->newlen);
        }
        o->next.a = at + o->ap.window_ms; /* its expiry: newest + W */
    }
}

/* A plain key's new value and expiry, written in place, and its expiry
 * (`was` before) only when it moves (a window's stays): a third of what a
 * SET's new object, its key's overwrite and its expiry's removal and
 * insertion cost.  A new key is made by StringTruncate, a plain (raw)
 * string, which a later read's StringDMA need not convert as it does an
 * embedded or integer one (what a SET makes).  1 when the key held these
 * very bytes already (only its expiry moved), else 0. */
static int write_value(RedisModuleKey *k, const char *p, size_t n,
                       int64_t exp, int64_t was)
{
    size_t len = 0;
    char *dst = NULL;
    int same;

    if (RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_STRING)
        dst = RedisModule_StringDMA(k, &len, REDISMODULE_WRITE);
    same = dst && len == n && memcmp(dst, p, n) == 0;
    if (!dst || len != n) {
        RedisModule_StringTruncate(k, n);
        dst = RedisModule_StringDMA(k, &len, REDISMODULE_WRITE);
    }
    if (!same)
        memcpy(dst, p, n);
    if (was != exp)
        RedisModule_SetAbsExpire(k, exp);
    return same;
}

void mod_put_plain(RedisModuleCtx *ctx, RedisModuleKey *k,
                   RedisModuleString *key, const char *p, size_t n,
                   int64_t exp, int64_t was)
{
    char at[DECIMAL_MAX];

    if (exp <= wall_ms) {
        RedisModule_DeleteKey(k);
        RedisModule_Replicate(ctx, "DEL", "s", key);
        return;
    }
    if (write_value(k, p, n, exp, was)) /* e.g. a GCRA with q = 1 */
        RedisModule_Replicate(ctx, "PEXPIREAT", "sb", key, at,
                              decimal_put(at, exp));
    else
        RedisModule_Replicate(ctx, "SET", "sbsb", key, p, n, pxat, at,
                              decimal_put(at, exp));
}

/* 1 when op o's charge only adds to its window's count, the key's expiry
 * kept (a window charged in its own window): its value is the integer it
 * was plus the charge (sliding: prev * 10^10 + curr, within int64 while
 * prev < 9 * 10^8), so INCRBY replicates it, for less than a SET's
 * arguments (lua/check.lua writes such a charge with INCRBY too), and a
 * charge of 1 INCR, one argument fewer again. */
static int counted_on(const op *o, int64_t exp)
{
    return (o->ap.algo == RL_ALGO_FIXED_WINDOW ||
            o->ap.algo == RL_ALGO_SLIDING_WINDOW) &&
           exp == o->exp && exp > wall_ms &&
           o->next.a == o->st.a && o->next.c == o->st.c &&
           o->st.c < 900000000 && o->next.b > o->st.b;
}

/* Write op o's charged state (plain: SET ... PXAT, replicated as such, or
 * INCR / INCRBY (counted_on); an expiry already past deletes, as SET
 * does). */
static int write_op(RedisModuleCtx *ctx, op *o, int64_t now, int reopen)
{
    char buf[MS_VALUE_MAX], by[DECIMAL_MAX];
    const char *p;
    int64_t exp;
    size_t blen, n;
    int moved = o->old && o->old->from >= 0, rc;

    if (o->field) {
        const char *base = RedisModule_StringPtrLen(o->key, &blen);
        rc = ms_compact_write(ctx, base, blen, o->field, &o->ap, now,
                              &o->next, moved);
        if (rc == MS_OK && moved)
            mc_drop(ctx, o->old, o->field, now);
        return rc;
    }
    if (reopen)
        o->k = RedisModule_OpenKey(ctx, o->key, REDISMODULE_WRITE);
    if (o->newlog) {
        p = o->newlog;
        n = o->newlen;
        exp = o->next.a;
    } else {
        n = ms_plain_value(&o->ap, &o->next, buf, &exp);
        p = buf;
    }
    if (!reopen && !moved && counted_on(o, exp)) {
        int64_t add = o->next.b - o->st.b;
        write_value(o->k, p, n, exp, o->exp); /* replicated as INCR(BY) */
        if (add == 1)
            RedisModule_Replicate(ctx, "INCR", "s", o->key);
        else
            RedisModule_Replicate(ctx, "INCRBY", "sb", o->key, by,
                                  decimal_put(by, add));
    } else { /* a reopened key may have been written by an earlier op */
        mod_put_plain(ctx, o->k, o->key, p, n, exp,
                      reopen ? RedisModule_GetAbsExpire(o->k) : o->exp);
    }
    if (moved)
        mc_drop(ctx, o->old, NULL, now);
    if (reopen) {
        RedisModule_CloseKey(o->k);
        o->k = NULL;
    }
    return MS_OK;
}

static void close_ops(RedisModuleCtx *ctx, op *ops, int n)
{
    for (int i = 0; i < n; i++) {
        if (ops[i].k)
            RedisModule_CloseKey(ops[i].k);
        if (ops[i].logval)
            RedisModule_FreeString(ctx, ops[i].logval);
        if (ops[i].old)
            mc_free(ctx, ops[i].old);
        if (ops[i].own_field)
            RedisModule_FreeString(ctx, ops[i].own_field);
        ops[i].own_field = NULL;
        ops[i].k = NULL;
        ops[i].logval = NULL;
        ops[i].newlog = NULL;
    }
}

static const char *state_error(int rc)
{
    return rc == MS_WRONGTYPE ? REDISMODULE_ERRORMSG_WRONGTYPE
                              : "ERR ratelimit: a state no limiter writes";
}

int64_t mod_time(RedisModuleString **argv, int argc, int at)
{
    long long ms;
    size_t len;

    wall_ms = RedisModule_Milliseconds();
    if (argc == at)
        return wall_ms;
    if (!test_clock || argc != at + 2)
        return -1;
    if (strcmp(RedisModule_StringPtrLen(argv[at], &len), "NOW") != 0 ||
        RedisModule_StringToLongLong(argv[at + 1], &ms) != REDISMODULE_OK ||
        ms < 0)
        return -1;
    return ms ? ms : wall_ms;
}

/* The SHAPES sections after the keys' values (module_convert.h), each
 * into its op; *at: the index after them.  NULL, or the error. */
static const char *parse_shapes(op *ops, int n, RedisModuleString **argv,
                                int argc, int *at)
{
    const char *err;
    long long i;
    size_t len;

    while (*at < argc &&
           strcmp(RedisModule_StringPtrLen(argv[*at], &len), "SHAPES") == 0) {
        if (*at + 1 >= argc ||
            RedisModule_StringToLongLong(argv[*at + 1], &i) !=
                REDISMODULE_OK || i < 0 || i >= n || ops[i].old)
            return "ERR ratelimit: SHAPES names no key";
        if ((*at = mc_parse(&olds[i], argv, argc, *at, &err)) < 0)
            return err;
        ops[i].old = &olds[i];
    }
    return NULL;
}

/* A batch's requests: REQS m k1 .. km, each request's number of keys, in
 * order (their sum the call's); none: one request of every key. */
static const char *parse_reqs(RedisModuleString **argv, int argc, int n,
                              int *at, int *reqs, int *nreq)
{
    long long m, k, sum = 0;
    size_t len;

    *nreq = 1;
    reqs[0] = n;
    if (*at >= argc ||
        strcmp(RedisModule_StringPtrLen(argv[*at], &len), "REQS") != 0)
        return n > MOD_MAX_OPS ? "ERR ratelimit: more keys than a request "
                                 "has; REQS says whose"
                               : NULL;
    if (*at + 1 >= argc ||
        RedisModule_StringToLongLong(argv[*at + 1], &m) != REDISMODULE_OK ||
        m < 1 || m > n || *at + 2 + m > argc)
        return "ERR ratelimit: REQS m, then m key counts";
    for (int r = 0; r < m; r++) {
        if (RedisModule_StringToLongLong(argv[*at + 2 + r], &k) !=
                REDISMODULE_OK || k < 1 || k > MOD_MAX_OPS)
            return "ERR ratelimit: a request has 1..64 keys";
        reqs[r] = (int)k;
        sum += k;
    }
    if (sum != n)
        return "ERR ratelimit: REQS counts other than the keys";
    *nreq = (int)m;
    *at += 2 + (int)m;
    return NULL;
}

/* Every op's values (the packed form's one argument each, or the long
 * form's seven), then the SHAPES sections, the requests and the time;
 * NULL, or the error to answer. */
static const char *parse_ops(RedisModuleCtx *ctx, op *ops, int n, int packed,
                             RedisModuleString **argv, int argc,
                             int64_t *now, int *reqs, int *nreq)
{
    const char *err = NULL;
    int at = 2 + n * (packed ? 2 : 1 + MOD_VALUES);

    memset(ops, 0, sizeof ops[0] * (size_t)n);
    for (int i = 0; i < n && !err; i++) {
        ops[i].key = argv[2 + i];
        err = packed ? parse_packed(ctx, &ops[i], argv[2 + n + i])
                     : parse_op(ctx, &ops[i], argv, 2 + n + i * MOD_VALUES);
    }
    if (!err)
        err = parse_shapes(ops, n, argv, argc, &at);
    if (!err)
        err = parse_reqs(argv, argc, n, &at, reqs, nreq);
    if (!err && (*now = mod_time(argv, argc, at)) < 0)
        err = "ERR wrong number of arguments for 'rl.check' command";
    return err;
}

/* The answer: an array of integers (the long form), or for the packed
 * form the same integers in one string, ':' between them: one reply
 * instead of 1 + 3n, for what Redis spends on each. */
static void reply(RedisModuleCtx *ctx, const op *ops, int n, int packed,
                  int64_t now)
{
    static char buf[(1 + 3 * MOD_MAX_KEYS) * (DECIMAL_MAX + 1)];
    size_t len = decimal_put(buf, now);

    if (!packed) {
        RedisModule_ReplyWithArray(ctx, 1 + 3 * n);
        RedisModule_ReplyWithLongLong(ctx, now);
        for (int i = 0; i < n; i++) {
            RedisModule_ReplyWithLongLong(ctx, ops[i].verdict);
            RedisModule_ReplyWithLongLong(ctx, ops[i].d.remaining);
            RedisModule_ReplyWithLongLong(ctx, ops[i].d.reset_ms);
        }
        return;
    }
    for (int i = 0; i < n; i++) {
        buf[len++] = ':';
        len += decimal_put(buf + len, ops[i].verdict);
        buf[len++] = ':';
        len += decimal_put(buf + len, ops[i].d.remaining);
        buf[len++] = ':';
        len += decimal_put(buf + len, ops[i].d.reset_ms);
    }
    RedisModule_ReplyWithStringBuffer(ctx, buf, len);
}

/* Request ops[0..n): read and decide every key at now, then, when every
 * hard one passed, write the charges (all or nothing).  MS_OK or the
 * error of a state. */
static int decide_request(RedisModuleCtx *ctx, op *ops, int n, int64_t now)
{
    int all = 1, rc = MS_OK;

    for (int i = 0; i < n && rc == MS_OK; i++)
        if ((rc = read_op(ctx, &ops[i], now)) == MS_OK) {
            decide_op(ctx, &ops[i], now, n > 1);
            all &= ops[i].d.allowed || ops[i].soft;
        }
    if (rc != MS_OK)
        return rc;
    if (n > 1) /* a key named twice: each write on a handle of its own */
        for (int i = 0; i < n; i++)
            if (ops[i].k) {
                RedisModule_CloseKey(ops[i].k);
                ops[i].k = NULL;
            }
    for (int i = 0; all && i < n && rc == MS_OK; i++)
        if (ops[i].d.allowed && ops[i].d.changed)
            rc = write_op(ctx, &ops[i], now, n > 1);
    return rc;
}

static int check_command(RedisModuleCtx *ctx, RedisModuleString **argv,
                         int argc)
{
    static op ops[MOD_MAX_KEYS];
    static int reqs[MOD_MAX_KEYS];
    long long n;
    int64_t now = 0;
    int rc = MS_OK, packed, nreq, at = 0;
    const char *err, *v;
    size_t len;

    if (argc < 2 || RedisModule_StringToLongLong(argv[1], &n) !=
                        REDISMODULE_OK || n < 1 || n > MOD_MAX_KEYS ||
        argc < 2 + n * 2)
        return RedisModule_WrongArity(ctx);
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        for (int i = 0; i < n; i++)
            RedisModule_KeyAtPos(ctx, 2 + i);
        return REDISMODULE_OK;
    }
    v = RedisModule_StringPtrLen(argv[2 + n], &len);
    packed = memchr(v, ':', len) != NULL; /* no long form's algo has one */
    if (!packed && argc < 2 + n * (1 + MOD_VALUES))
        return RedisModule_WrongArity(ctx);
    err = parse_ops(ctx, ops, (int)n, packed, argv, argc, &now, reqs, &nreq);
    /* each request in turn: a later one reads what an earlier wrote */
    for (int r = 0; !err && r < nreq && rc == MS_OK; at += reqs[r++]) {
        rc = decide_request(ctx, ops + at, reqs[r], now);
        close_ops(ctx, ops + at, reqs[r]);
    }
    if (err || rc != MS_OK) {
        close_ops(ctx, ops, (int)n);
        return RedisModule_ReplyWithError(ctx, err ? err : state_error(rc));
    }
    reply(ctx, ops, (int)n, packed, now);
    return REDISMODULE_OK;
}

/* The entry point Redis calls at loadmodule / MODULE LOAD. */
int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    size_t len;

    if (rl_module_api(ctx, MOD_NAME, MOD_VERSION) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    for (int i = 0; i < argc; i++) {
        if (strcmp(RedisModule_StringPtrLen(argv[i], &len), "testclock"))
            return REDISMODULE_ERR;
        test_clock = 1;
    }
    pxat = RedisModule_CreateString(NULL, "PXAT", 4);
    if (RedisModule_CreateCommand(ctx, "rl.check", check_command,
                                  "write deny-oom getkeys-api", 0, 0, 0) !=
        REDISMODULE_OK)
        return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, "rl.settle", mod_settle_command,
                                     "write deny-oom getkeys-api", 0, 0, 0);
}
