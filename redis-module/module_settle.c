/*
 * module_settle.c -- RL.SETTLE, ratelimit.so's other command: what the
 * Lua library does after a check, natively.  A refund (mode r: check.lua's
 * "r" op, a lease's give-back and a cluster batch's undo) and rl_settle's
 * two steps (lua/settle.lua: s refunds, d charges a debt, each op at most
 * once per reservation through a marker key), on the same states, so a
 * fleet may settle through the module what the script charged.
 *
 *   RL.SETTLE mode numkeys key [key ...] then per op
 *             algo limit burst window_ms cost at_ms field  [NOW ms]
 *
 * Mode r: numkeys is the ops' state keys; an op of cost 0 is skipped; the
 * answer is the number of ops.  Modes s and d: numkeys is twice the ops,
 * their state keys then their markers (redis_settle.c names them); an op
 * is settled while now <= at_ms + its rule's state life and when its
 * marker is absent (the marker is then made, alive until then); the
 * answer is the number settled now.  The maths are src/base/settle.c's
 * (the C side of the twin tests), a token bucket's refund taken at now in
 * every mode and layout, but for what check.lua's "r" does its own way:
 * the compact layout's other refunds take the units off the stored count
 * or virtual time (lua/compact.lua's window_crefund, bucket_crefund).
 */
#include <string.h>

#include "algo.h"
#include "module_api.h"
#include "module_cmd.h"
#include "module_state.h"
#include "ratelimit.h"
#include "settle.h"

#define SETTLE_VALUES 7  /* values per op */
#define SETTLE_MAX_OPS 64
#define LOG_MAX (2 * RL_LOG_LIMIT_MAX)

typedef struct sop {
    RedisModuleString *key, *field, *marker; /* field NULL: plain   */
    algo_params ap;
    int64_t cost, at;
} sop;

static const char *parse_sop(sop *o, RedisModuleString **argv, int at)
{
    long long v[6];
    size_t flen;
    const char *err;

    for (int i = 0; i < 6; i++)
        if (RedisModule_StringToLongLong(argv[at + i], &v[i]) !=
            REDISMODULE_OK)
            return mod_enum;
    if ((err = mod_rule_params(&o->ap, v[0], v[1], v[2], v[3])) != NULL)
        return err;
    if (v[4] < 0 || v[4] > RL_COST_MAX || v[5] < 0)
        return "ERR ratelimit: cost or time out of range";
    o->cost = v[4];
    o->at = v[5];
    RedisModule_StringPtrLen(argv[at + 6], &flen);
    o->field = flen ? argv[at + 6] : NULL;
    if (o->field && o->ap.algo == RL_ALGO_SLIDING_LOG)
        return "ERR ratelimit: sliding_log has no compact layout";
    return NULL;
}

/* A log's refund (algo_log_refund), written back; none left: deleted. */
static void log_refund(RedisModuleCtx *ctx, RedisModuleKey *k, const sop *o,
                       const char *log, size_t len, int64_t exp)
{
    static int64_t t[LOG_MAX];
    static char buf[LOG_MAX * MS_LOG_B];
    size_t n = len / MS_LOG_B;

    if (n > LOG_MAX)
        return; /* a longer log than any rule keeps */
    for (size_t i = 0; i < n; i++)
        t[i] = ms_log_time(log + i * MS_LOG_B);
    n = algo_log_refund(t, n, o->at, o->cost);
    for (size_t i = 0; i < n; i++)
        ms_log_put(buf + i * MS_LOG_B, t[i]);
    mod_put_plain(ctx, k, o->key, buf, n * MS_LOG_B,
                  n ? t[n - 1] + o->ap.window_ms : 1, exp);
}

/* One plain op: mode 'r', 's' or 'd' on its state key. */
static int plain_op(RedisModuleCtx *ctx, const sop *o, char mode,
                    int64_t now)
{
    RedisModuleKey *k = RedisModule_OpenKey(ctx, o->key, REDISMODULE_READ |
                                                         REDISMODULE_WRITE);
    algo_state st;
    const char *log;
    size_t loglen, n;
    int64_t exp, was;
    int found, rc, write = 1;
    char buf[MS_VALUE_MAX];

    rc = ms_plain_read(k, &o->ap, &st, &log, &loglen, &found, &was);
    if (rc != MS_OK || (!found && mode != 'd')) {
    } else if (o->ap.algo == RL_ALGO_SLIDING_LOG) {
        log_refund(ctx, k, o, log, loglen, was);
        write = 0;
    } else {
        write = settle_state(&o->ap, mode == 'd', o->cost, o->at, now, &st,
                             found, &exp);
    }
    if (rc == MS_OK && (found || mode == 'd') && write) {
        n = ms_plain_value(&o->ap, &st, buf, &exp);
        mod_put_plain(ctx, k, o->key, buf, n, exp, was);
    }
    RedisModule_CloseKey(k);
    return rc;
}

/* One compact op (settle.lua's settle_one; check.lua's "r": a refund; a
 * token bucket's, lua/compact.lua's token_bucket_crefund, at now). */
static int compact_op(RedisModuleCtx *ctx, const sop *o, char mode,
                      int64_t now)
{
    size_t blen;
    const char *base = RedisModule_StringPtrLen(o->key, &blen);
    algo_state st;
    int64_t exp;
    int found, rc;

    if (mode != 'd' && o->ap.algo != RL_ALGO_TOKEN_BUCKET)
        return ms_compact_refund(ctx, base, blen, o->field, &o->ap, o->cost,
                                 o->at, now);
    if ((rc = ms_compact_read(ctx, base, blen, o->field, &o->ap, now, &st,
                              &found)) != MS_OK)
        return rc;
    if (mode != 'd' && !found)
        return MS_OK; /* nothing to give back */
    settle_state(&o->ap, mode == 'd', o->cost, o->at, now, &st, found, &exp);
    return ms_compact_write(ctx, base, blen, o->field, &o->ap, now, &st, 0);
}

/* Settle op o once per reservation: its marker made when absent and the
 * charge can still count; 1 when settled now, 0 when not, or an MS_*
 * error. */
static int settle_once(RedisModuleCtx *ctx, const sop *o, char mode,
                       int64_t now)
{
    int64_t until = settle_until(&o->ap, o->at);
    RedisModuleKey *m;
    int type, rc;

    if (now > until)
        return 0;
    m = RedisModule_OpenKey(ctx, o->marker, REDISMODULE_READ |
                                            REDISMODULE_WRITE);
    type = RedisModule_KeyType(m);
    if (type == REDISMODULE_KEYTYPE_EMPTY)
        mod_put_plain(ctx, m, o->marker, "1", 1, until,
                      REDISMODULE_NO_EXPIRE);
    RedisModule_CloseKey(m);
    if (type != REDISMODULE_KEYTYPE_EMPTY)
        return 0;
    rc = o->field ? compact_op(ctx, o, mode, now)
                  : plain_op(ctx, o, mode, now);
    return rc == MS_OK ? 1 : rc;
}

int mod_settle_command(RedisModuleCtx *ctx, RedisModuleString **argv,
                       int argc)
{
    sop ops[SETTLE_MAX_OPS];
    long long nk;
    size_t len;
    const char *m = argc > 1 ? RedisModule_StringPtrLen(argv[1], &len) : "";
    char mode = m[0];
    int64_t n, now, done = 0;
    const char *err;

    if (argc < 3 || (mode != 'r' && mode != 's' && mode != 'd') || m[1] ||
        RedisModule_StringToLongLong(argv[2], &nk) != REDISMODULE_OK ||
        nk < 1 || (mode != 'r' && nk % 2))
        return RedisModule_WrongArity(ctx);
    n = mode == 'r' ? nk : nk / 2;
    if (n > SETTLE_MAX_OPS || argc < 3 + nk + n * SETTLE_VALUES)
        return RedisModule_WrongArity(ctx);
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        for (int i = 0; i < nk; i++)
            RedisModule_KeyAtPos(ctx, 3 + i);
        return REDISMODULE_OK;
    }
    if ((now = mod_time(argv, argc, (int)(3 + nk + n * SETTLE_VALUES))) < 0)
        return RedisModule_WrongArity(ctx);
    for (int i = 0; i < n; i++) {
        ops[i] = (sop){.key = argv[3 + i],
                       .marker = mode == 'r' ? NULL : argv[3 + n + i]};
        if ((err = parse_sop(&ops[i], argv,
                             (int)(3 + nk + i * SETTLE_VALUES))) != NULL)
            return RedisModule_ReplyWithError(ctx, err);
    }
    for (int i = 0; i < n; i++) {
        int rc = MS_OK;
        if (mode != 'r')
            rc = settle_once(ctx, &ops[i], mode, now);
        else if (ops[i].cost > 0)
            rc = ops[i].field ? compact_op(ctx, &ops[i], mode, now)
                              : plain_op(ctx, &ops[i], mode, now);
        if (rc < 0)
            return RedisModule_ReplyWithError(
                ctx, rc == MS_WRONGTYPE ? REDISMODULE_ERRORMSG_WRONGTYPE
                                        : "ERR ratelimit: a state no "
                                          "limiter writes");
        done += mode == 'r' ? 1 : rc;
    }
    return RedisModule_ReplyWithLongLong(ctx, done);
}
