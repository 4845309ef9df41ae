/*
 * module_convert.c -- RL.CHECK for a rule whose shape changed, as
 * lua/check.lua's migrate() and compact.lua's compact_move() do it: a
 * client with no state under the rule's current shape is looked up under
 * the shapes the rule replaced (sent after the keys' values, newest
 * first), by the same name with the shape replaced; a state found is
 * converted as at the change (algo_convert, src/base/algo.c: the C side of
 * the twin tests) and decided on; none found, a bucket rule's newest old
 * shape gives the emptiest level the client can have had
 * (algo_convert_unknown).  When the request's charges are kept the new
 * state is written and the old one deleted; a denial writes and deletes
 * nothing, so the next request converts again, alike.
 */
#include "module_convert.h"

#include <string.h>

#include "module_cmd.h"
#include "module_state.h"

#define SHAPE_VALUES 6 /* algo limit burst window_ms name since_ms */
#define NAME_MAX 600   /* a key's name: a base is at most 512 bytes */

int mc_parse(mc_old *o, RedisModuleString **argv, int argc, int at,
             const char **err)
{
    long long n;
    size_t len;

    *err = "ERR ratelimit: SHAPES i shape n, then 6 values a shape";
    if (at + 4 > argc || /* argv[at]: SHAPES; at + 1: i (the caller's) */
        RedisModule_StringToLongLong(argv[at + 3], &n) != REDISMODULE_OK ||
        n < 1 || n > MC_MAX || at + 4 + n * SHAPE_VALUES > argc)
        return -1;
    RedisModule_StringPtrLen(argv[at + 2], &len);
    *o = (mc_old){.n = (int)n, .curlen = len, .from = -1};
    for (int i = 0; i < n; i++) {
        RedisModuleString **v = argv + at + 4 + i * SHAPE_VALUES;
        long long x[4], since;
        for (int j = 0; j < 4; j++)
            if (RedisModule_StringToLongLong(v[j], &x[j]) != REDISMODULE_OK)
                return *err = mod_enum, -1;
        if (RedisModule_StringToLongLong(v[5], &since) != REDISMODULE_OK)
            return *err = mod_enum, -1;
        if ((*err = mod_rule_params(&o->ap[i], x[0], x[1], x[2], x[3])))
            return -1;
        o->name[i] = v[4];
        o->since[i] = since;
    }
    *err = NULL;
    return at + 4 + (int)n * SHAPE_VALUES;
}

/* The name of old shape i: the key's stem (its name less the current
 * shape's) and the old shape's name. */
static RedisModuleString *old_name(RedisModuleCtx *ctx,
                                   RedisModuleString *key, const mc_old *o,
                                   int i)
{
    char buf[NAME_MAX];
    size_t klen, nlen;
    const char *k = RedisModule_StringPtrLen(key, &klen);
    const char *n = RedisModule_StringPtrLen(o->name[i], &nlen);

    if (o->curlen > klen || klen - o->curlen + nlen > sizeof buf)
        return NULL;
    memcpy(buf, k, klen - o->curlen);
    memcpy(buf + klen - o->curlen, n, nlen);
    return RedisModule_CreateString(ctx, buf, klen - o->curlen + nlen);
}

/* The state of old shape i: *found, *st. */
static int read_old(RedisModuleCtx *ctx, RedisModuleString *name,
                    RedisModuleString *field, const algo_params *ap,
                    int64_t now, algo_state *st, int *found)
{
    const char *log;
    size_t len;
    int64_t exp;
    int rc;

    if (field) {
        const char *base = RedisModule_StringPtrLen(name, &len);
        return ms_compact_read(ctx, base, len, field, ap, now, st, found);
    }
    RedisModuleKey *k = RedisModule_OpenKey(ctx, name, REDISMODULE_READ);
    rc = ms_plain_read(k, ap, st, &log, &len, found, &exp);
    RedisModule_CloseKey(k);
    return rc;
}

int mc_migrate(RedisModuleCtx *ctx, RedisModuleString *key,
               RedisModuleString *field, const algo_params *to,
               mc_old *o, int64_t now, algo_state *st)
{
    algo_state old;
    int found = 0, rc;

    *st = (algo_state){0};
    o->from = -1;
    for (int i = 0; i < o->n; i++) {
        if (o->ap[i].algo == RL_ALGO_SLIDING_LOG ||
            to->algo == RL_ALGO_SLIDING_LOG)
            continue; /* a log converts to nothing: left to expire */
        if (!(o->key = old_name(ctx, key, o, i)))
            return MS_CORRUPT;
        rc = read_old(ctx, o->key, field, &o->ap[i], now, &old, &found);
        if (rc != MS_OK || found) {
            if (found)
                algo_convert(&o->ap[i], &old, to, o->since[i], now, st);
            o->from = i;
            return rc;
        }
        RedisModule_FreeString(ctx, o->key);
        o->key = NULL;
    }
    if (o->ap[0].algo != RL_ALGO_TOKEN_BUCKET && o->ap[0].algo != RL_ALGO_GCRA)
        return MS_OK; /* none: fresh */
    if (!(o->key = old_name(ctx, key, o, 0)))
        return MS_CORRUPT;
    algo_convert_unknown(&o->ap[0], to, o->since[0], now, st);
    o->from = 0;
    return MS_OK;
}

/* HDEL of `field` in old shape's hash of epoch e, replicated when one
 * went. */
static void hdel(RedisModuleCtx *ctx, const char *base, size_t blen,
                 int64_t e, RedisModuleString *field)
{
    char name[NAME_MAX + 24];
    size_t n = ms_hash_name(name, sizeof name, base, blen, e);
    RedisModuleString *s = RedisModule_CreateString(ctx, name, n);
    RedisModuleKey *k = RedisModule_OpenKey(ctx, s, REDISMODULE_WRITE);

    if (RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_HASH &&
        RedisModule_HashSet(k, REDISMODULE_HASH_NONE, field,
                            REDISMODULE_HASH_DELETE, NULL) > 0)
        RedisModule_Replicate(ctx, "HDEL", "bs", name, n, field);
    RedisModule_CloseKey(k);
    RedisModule_FreeString(ctx, s);
}

void mc_drop(RedisModuleCtx *ctx, const mc_old *o, RedisModuleString *field,
             int64_t now)
{
    const algo_params *ap = &o->ap[o->from];
    size_t blen;
    const char *base = RedisModule_StringPtrLen(o->key, &blen);
    int64_t e;

    if (!field) {
        RedisModuleKey *k = RedisModule_OpenKey(ctx, o->key,
                                                REDISMODULE_WRITE);
        if (RedisModule_KeyType(k) != REDISMODULE_KEYTYPE_EMPTY) {
            RedisModule_DeleteKey(k);
            RedisModule_Replicate(ctx, "DEL", "s", o->key);
        }
        RedisModule_CloseKey(k);
        return;
    }
    e = now / ms_epoch_ms(ap); /* its window, or a bucket's life */
    hdel(ctx, base, blen, e, field);
    hdel(ctx, base, blen, e - 1, field);
}

void mc_free(RedisModuleCtx *ctx, mc_old *o)
{
    if (o->key)
        RedisModule_FreeString(ctx, o->key);
    o->key = NULL;
}
