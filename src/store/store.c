/*
 * store.c -- pick a store backend from a URI.  The only place that knows the
 * list of backends; everything else talks to the vtable in store.h.
 */
#include "store.h"
#include "store_cluster.h"
#include "store_memory.h"
#include "store_redis.h"
#include "store_sentinel.h"
#include "store_shm.h"
#include "redis_uri.h"
#include "rule.h"
#include "siphash.h"

#include <stdio.h>
#include <string.h>

int store_open(const char *uri, const store_options *opt, rl_store **out,
               char *err, size_t errlen)
{
    char shown[128]; /* a mistyped scheme may still carry a password */

    *out = NULL;
    if (strcmp(uri, "memory://") == 0 || strcmp(uri, "memory") == 0)
        return store_memory_new(opt, out, err, errlen);
    if (strncmp(uri, STORE_SHM_SCHEME, strlen(STORE_SHM_SCHEME)) == 0)
        return store_shm_new(uri, opt, out, err, errlen);
    if (strncmp(uri, "redis://", 8) == 0 || strncmp(uri, "unix://", 7) == 0 ||
        strncmp(uri, "rediss://", 9) == 0)
        return store_redis_new(uri, opt, out, err, errlen);
    if (strncmp(uri, "redis-cluster://", 16) == 0 ||
        strncmp(uri, "rediss-cluster://", 17) == 0)
        return store_cluster_new(uri, opt, out, err, errlen);
    if (strncmp(uri, "redis-sentinel://", 17) == 0 ||
        strncmp(uri, "rediss-sentinel://", 18) == 0)
        return store_sentinel_new(uri, opt, out, err, errlen);
    redis_uri_redact(uri, shown, sizeof shown);
    return snprintf(err, errlen,
                    "store \"%s\": unknown scheme (expected memory://, "
                    "shm://NAME, redis://, rediss://, unix://, redis-cluster://, "
                    "rediss-cluster://, redis-sentinel:// or "
                    "rediss-sentinel://)", shown),
           RL_ESTORE;
}

uint64_t store_op_fingerprint(const store_op *op, int64_t extra,
                              const uint64_t key[2])
{
    const algo_params *ap = &op->rule->ap;
    int64_t nums[5] = {ap->algo, ap->limit, ap->burst, ap->window_ms, extra};
    char buf[sizeof nums + RL_RULE_ID_MAX + 1 + RL_KEY_MAX];
    size_t idlen = strnlen(op->rule->id, RL_RULE_ID_MAX), at = 0;
    size_t klen = op->key_len < RL_KEY_MAX ? op->key_len : RL_KEY_MAX;
    uint64_t h;

    memcpy(buf, nums, sizeof nums);
    at += sizeof nums;
    memcpy(buf + at, op->rule->id, idlen);
    at += idlen;
    buf[at++] = '\0';
    memcpy(buf + at, op->key, klen);
    h = siphash13(buf, at + klen, key);
    return h ? h : 1;
}
