/*
 * redis_key.c -- see redis_key.h.  The names are part of the format every
 * limiter of a fleet shares: the compact layout's hash (hash_bytes with the
 * seed below) must never change between releases without a new prefix.
 * With option hash_key set, the client key is hashed with SipHash-1-3
 * under that key instead, so clients cannot pick keys that share a field
 * or crowd one bucket; every limiter of the fleet must be given the same.
 */
#include "redis_key.h"
#include "algo.h"
#include "crc16.h"
#include "hash.h"
#include "siphash.h"

#include <stdio.h>
#include <string.h>

#define COMPACT_SEED 0x726c632d6b657931ULL /* "rlc-key1" */

int redis_key_compact_ok(const algo_params *ap)
{
    int64_t cap, life;

    if (ap->algo == RL_ALGO_FIXED_WINDOW || ap->algo == RL_ALGO_SLIDING_WINDOW)
        return 1;
    /* Token bucket and GCRA store a time in 1/q ms relative to an epoch of
     * L = ceil(cap / q) + 2 ms: at most 2 L q. */
    cap = ap->burst * ap->p;
    life = cap / ap->q + 3;
    return life <= RL_EXACT_MAX / 2 / ap->q;
}

/* "}:<rule id>:<shape>" at key + n; returns the new length. */
static size_t put_tail(const store_op *op, char *key, size_t n)
{
    const rl_rule *r = op->rule;
    size_t idlen = strlen(r->id);

    memcpy(key + n, "}:", 2);
    n += 2;
    memcpy(key + n, r->id, idlen);
    n += idlen;
    key[n++] = ':';
    memcpy(key + n, r->shape.name, r->shape.len);
    return n + r->shape.len;
}

size_t redis_key(const store_op *op, int compact, char *key, char *field,
                 size_t *field_len)
{
    size_t n;

    if (compact && redis_key_compact_ok(&op->rule->ap)) {
        uint64_t h = op->layout_key
                         ? siphash13(op->key, op->key_len, op->layout_key)
                         : hash_bytes(op->key, op->key_len, COMPACT_SEED);
        n = (size_t)sprintf(key, "rlc:{%u", (unsigned)(h & 0xffff));
        *field_len = (size_t)sprintf(field, "%u", (unsigned)(h >> 33));
        return put_tail(op, key, n);
    }
    field[0] = 0;
    *field_len = 0;
    memcpy(key, "rl:{", 4);
    memcpy(key + 4, op->key, op->key_len);
    return put_tail(op, key, 4 + op->key_len);
}

unsigned redis_key_slot(const store_op *op, int compact)
{
    char key[REDIS_KEY_MAX], field[REDIS_FIELD_MAX];
    size_t flen;

    return key_slot(key, redis_key(op, compact, key, field, &flen));
}
