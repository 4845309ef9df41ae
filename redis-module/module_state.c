/*
 * module_state.c -- the state formats of lua/ in C, for ratelimit.so: the
 * plain layout's value and expiry per algorithm (lua/fixed_window.lua,
 * sliding_window.lua, token_bucket.lua, gcra.lua: *_load and *_save) and the compact layout's
 * per-epoch hashes (lua/compact.lua).  Each function here repeats one Lua
 * function step for step, in the same exact integers; module_state.h says
 * why the formats must be the same.
 */
#include "module_state.h"

#include <string.h>

#include "decimal.h"

static int64_t floor_div(int64_t a, int64_t b) /* b > 0 */
{
    int64_t q = a / b;
    return q * b > a ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b) /* a >= 0, b > 0 */
{
    return a / b + (a % b != 0);
}

/* A decimal integer of the whole of s[0..n), no sign, no spaces (what
 * the library writes); -1 for anything else. */
static int64_t parse_dec(const char *s, size_t n)
{
    int64_t x = 0;

    if (n == 0 || n > 18)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        x = x * 10 + (s[i] - '0');
    }
    return x;
}

int64_t ms_log_time(const char *p)
{
    int64_t t = 0;

    for (int i = 0; i < MS_LOG_B; i++)
        t = t << 8 | (unsigned char)p[i];
    return t;
}

void ms_log_put(char *p, int64_t t)
{
    for (int i = MS_LOG_B - 1; i >= 0; i--, t >>= 8)
        p[i] = (char)(t & 0xff);
}

/* *_load of lua/: the state from a value and the key's expiry. */
static int plain_load(const algo_params *ap, const char *v, size_t n,
                      int64_t exp, algo_state *st)
{
    int64_t cap = ap->burst * ap->p, x, w = ap->window_ms;

    if (ap->algo == RL_ALGO_SLIDING_WINDOW && n > 10) {
        int64_t prev = parse_dec(v, n - 10), curr = parse_dec(v + n - 10, 10);
        if (prev < 0 || curr < 0 || prev > UINT32_MAX)
            return MS_CORRUPT;
        *st = (algo_state){.a = floor_div(exp, w) - 2, .b = curr,
                           .c = (uint32_t)prev};
        return MS_OK;
    }
    if ((x = parse_dec(v, n)) < 0)
        return MS_CORRUPT;
    switch (ap->algo) {
    case RL_ALGO_TOKEN_BUCKET:
        *st = (algo_state){.a = x,
                           .b = exp - ceil_div(cap - (x > cap ? cap : x),
                                               ap->q)};
        break;
    case RL_ALGO_FIXED_WINDOW:
        *st = (algo_state){.a = floor_div(exp, w) - 1, .b = x};
        break;
    case RL_ALGO_GCRA:
        *st = x > 0 ? (algo_state){.a = exp - 1, .b = x}
                    : (algo_state){.a = exp};
        break;
    default:
        *st = (algo_state){.a = floor_div(exp, w) - 2, .b = x};
    }
    return MS_OK;
}

/* x >= 0 at buf as decimal_put() writes it, zeros before it to `width`
 * digits (a sliding window's current count: "%010d"); its length. */
static size_t put_width(char *buf, int64_t x, size_t width)
{
    size_t d = decimal_digits((uint64_t)x);
    size_t pad = d < width ? width - d : 0;

    memset(buf, '0', pad);
    return pad + decimal_put(buf + pad, x);
}

size_t ms_plain_value(const algo_params *ap, const algo_state *st,
                      char *buf, int64_t *exp)
{
    int64_t w = ap->window_ms, cap = ap->burst * ap->p;
    size_t n;

    switch (ap->algo) {
    case RL_ALGO_TOKEN_BUCKET:
        *exp = st->b + ceil_div(cap - st->a, ap->q);
        return decimal_put(buf, st->a);
    case RL_ALGO_FIXED_WINDOW:
        *exp = (st->a + 1) * w;
        return decimal_put(buf, st->b);
    case RL_ALGO_GCRA:
        *exp = st->b > 0 ? st->a + 1 : st->a;
        return decimal_put(buf, st->b);
    default: /* prev * 10^10 + curr: "%d%010d" */
        *exp = (st->a + 2) * w;
        if (st->c == 0)
            return decimal_put(buf, st->b);
        n = decimal_put(buf, st->c);
        return n + put_width(buf + n, st->b, 10);
    }
}

int ms_plain_read(RedisModuleKey *k, const algo_params *ap, algo_state *st,
                  const char **log, size_t *loglen, int *found, int64_t *exp)
{
    int type = RedisModule_KeyType(k);
    size_t n;
    const char *v;

    *st = (algo_state){0};
    *log = NULL;
    *loglen = 0;
    *found = 0;
    *exp = REDISMODULE_NO_EXPIRE;
    if (type == REDISMODULE_KEYTYPE_EMPTY)
        return MS_OK;
    if (type != REDISMODULE_KEYTYPE_STRING)
        return MS_WRONGTYPE;
    v = RedisModule_StringDMA(k, &n, REDISMODULE_READ);
    *exp = RedisModule_GetAbsExpire(k);
    *found = 1;
    if (ap->algo == RL_ALGO_SLIDING_LOG) {
        if (n % MS_LOG_B)
            return MS_CORRUPT;
        *log = v;
        *loglen = n;
        return MS_OK;
    }
    return plain_load(ap, v, n, *exp, st);
}

/* ---- the compact layout (lua/compact.lua) ---------------------------- */

size_t ms_hash_name(char *buf, size_t size, const char *base, size_t blen,
                    int64_t e)
{
    if (blen + 22 > size) /* ':', 20 digits and a NUL */
        return 0;
    memcpy(buf, base, blen);
    buf[blen] = ':';
    blen += 1 + decimal_put(buf + blen + 1, e);
    buf[blen] = '\0';
    return blen;
}

#define MS_NAME_MAX 600 /* a base name's length is at most 512 (below) */

/* HGET of epoch e's hash: *v (-1 when none). */
static int hget(RedisModuleCtx *ctx, const char *base, size_t blen,
                int64_t e, RedisModuleString *field, int64_t *v)
{
    char name[MS_NAME_MAX];
    size_t n = ms_hash_name(name, sizeof name, base, blen, e);
    RedisModuleString *s = RedisModule_CreateString(ctx, name, n), *val = NULL;
    RedisModuleKey *k = RedisModule_OpenKey(ctx, s, REDISMODULE_READ);
    int rc = MS_OK;

    *v = -1;
    if (k && RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_HASH) {
        RedisModule_HashGet(k, REDISMODULE_HASH_NONE, field, &val, NULL);
        if (val) {
            size_t len;
            const char *p = RedisModule_StringPtrLen(val, &len);
            if ((*v = parse_dec(p, len)) < 0)
                rc = MS_CORRUPT;
            RedisModule_FreeString(ctx, val);
        }
    } else if (k && RedisModule_KeyType(k) != REDISMODULE_KEYTYPE_EMPTY) {
        rc = MS_WRONGTYPE;
    }
    if (k)
        RedisModule_CloseKey(k);
    RedisModule_FreeString(ctx, s);
    return rc;
}

/* HSET of epoch e's hash, and its expiry when that is not set yet (Lua
 * sets it when the HSET created the field; every write of an epoch's hash
 * sets the same time, so the hash ends alike); exp < 0: a refund's HSET
 * of a field that exists, the expiry left as it is. */
static int hput(RedisModuleCtx *ctx, const char *base, size_t blen,
                int64_t e, RedisModuleString *field, int64_t v, int64_t exp)
{
    char name[MS_NAME_MAX], num[DECIMAL_MAX];
    size_t n = ms_hash_name(name, sizeof name, base, blen, e);
    size_t vn = decimal_put(num, v);
    RedisModuleString *s = RedisModule_CreateString(ctx, name, n);
    RedisModuleString *val = RedisModule_CreateString(ctx, num, vn);
    RedisModuleKey *k = RedisModule_OpenKey(ctx, s, REDISMODULE_WRITE);
    int type = RedisModule_KeyType(k), rc = MS_OK;

    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_HASH) {
        rc = MS_WRONGTYPE;
    } else {
        RedisModule_HashSet(k, REDISMODULE_HASH_NONE, field, val, NULL);
        RedisModule_Replicate(ctx, "HSET", "bss", name, n, field, val);
        if (exp >= 0 && RedisModule_GetAbsExpire(k) != exp) {
            RedisModule_SetAbsExpire(k, exp);
            RedisModule_Replicate(ctx, "PEXPIREAT", "bb", name, n, num,
                                  decimal_put(num, exp));
        }
    }
    RedisModule_CloseKey(k);
    RedisModule_FreeString(ctx, val);
    RedisModule_FreeString(ctx, s);
    return rc;
}

/* A bucket's epoch: life() of lua/compact.lua. */
static int64_t life(const algo_params *ap)
{
    return ceil_div(ap->burst * ap->p, ap->q) + 2;
}

int64_t ms_epoch_ms(const algo_params *ap)
{
    return ap->algo == RL_ALGO_TOKEN_BUCKET || ap->algo == RL_ALGO_GCRA
               ? life(ap)
               : ap->window_ms;
}

int ms_compact_read(RedisModuleCtx *ctx, const char *base, size_t blen,
                    RedisModuleString *field, const algo_params *ap,
                    int64_t now, algo_state *st, int *found)
{
    int64_t w = ap->window_ms, cap = ap->burst * ap->p, q = ap->q;
    int64_t cur, prev = -1, e, l;
    int rc;

    *st = (algo_state){0};
    *found = 0;
    if (ap->algo == RL_ALGO_FIXED_WINDOW || ap->algo == RL_ALGO_SLIDING_WINDOW) {
        e = now / w;
        if ((rc = hget(ctx, base, blen, e, field, &cur)) != MS_OK)
            return rc;
        if (ap->algo == RL_ALGO_SLIDING_WINDOW &&
            (rc = hget(ctx, base, blen, e - 1, field, &prev)) != MS_OK)
            return rc;
        if (cur >= 0)
            *st = (algo_state){.a = e, .b = cur,
                               .c = (uint32_t)(prev > 0 ? prev : 0)};
        else if (prev >= 0)
            *st = (algo_state){.a = e - 1, .b = prev};
        *found = cur >= 0 || prev >= 0;
        return MS_OK;
    }
    l = life(ap); /* the buckets: a virtual time (vread) */
    e = now / l;
    if ((rc = hget(ctx, base, blen, e, field, &cur)) != MS_OK)
        return rc;
    if (cur < 0) {
        e--;
        if ((rc = hget(ctx, base, blen, e, field, &cur)) != MS_OK)
            return rc;
        if (cur < 0)
            return MS_OK;
    }
    *found = 1;
    if (ap->algo == RL_ALGO_TOKEN_BUCKET) {
        int64_t k = ceil_div(cap, q);
        int64_t t = ceil_div(cur + k * q - cap, q) - k;
        *st = (algo_state){.a = t * q + cap - cur, .b = e * l + t};
    } else {
        *st = (algo_state){.a = e * l + cur / q, .b = cur % q};
    }
    return MS_OK;
}

int ms_compact_write(RedisModuleCtx *ctx, const char *base, size_t blen,
                     RedisModuleString *field, const algo_params *ap,
                     int64_t now, const algo_state *st, int converted)
{
    int64_t w = ap->window_ms, l, e, v;
    int rc;

    /* a converted sliding window's previous count, in its own hash
     * (compact.lua's compact_move) */
    if (converted && ap->algo == RL_ALGO_SLIDING_WINDOW && st->c > 0 &&
        (rc = hput(ctx, base, blen, st->a - 1, field, st->c,
                   (st->a + 1) * w)) != MS_OK)
        return rc;
    switch (ap->algo) {
    case RL_ALGO_FIXED_WINDOW:
        return hput(ctx, base, blen, st->a, field, st->b, (st->a + 1) * w);
    case RL_ALGO_SLIDING_WINDOW: /* the previous count is in its own hash */
        return hput(ctx, base, blen, st->a, field, st->b, (st->a + 2) * w);
    default:
        l = life(ap);
        e = now / l;
        v = ap->algo == RL_ALGO_TOKEN_BUCKET
                ? (st->b - e * l) * ap->q + ap->burst * ap->p - st->a
                : (st->a - e * l) * ap->q + st->b;
        return hput(ctx, base, blen, e, field, v, (e + 2) * l);
    }
}

/* A refund of a field that exists (lua/compact.lua's window_crefund and
 * bucket_crefund): a window's count in the epoch the charge was made in,
 * less cost; GCRA's virtual time, in the hash it is read from, less
 * cost * p; neither below 0. */
int ms_compact_refund(RedisModuleCtx *ctx, const char *base, size_t blen,
                      RedisModuleString *field, const algo_params *ap,
                      int64_t cost, int64_t at, int64_t now)
{
    int64_t e, v, l, take = cost;
    int rc;

    if (ap->algo == RL_ALGO_FIXED_WINDOW ||
        ap->algo == RL_ALGO_SLIDING_WINDOW) {
        e = at / ap->window_ms;
        rc = hget(ctx, base, blen, e, field, &v);
    } else {
        l = life(ap);
        e = now / l;
        take = cost * ap->p;
        if ((rc = hget(ctx, base, blen, e, field, &v)) == MS_OK && v < 0)
            rc = hget(ctx, base, blen, --e, field, &v);
    }
    if (rc != MS_OK || v < 0)
        return rc;
    return hput(ctx, base, blen, e, field, v > take ? v - take : 0, -1);
}
