/*
 * cluster_control.c -- see cluster_control.h.  What answers on a seed's
 * address is outside input: an HTTP server, a plain Redis, a cluster
 * node.  hiredis's message for bytes that are not RESP quotes one of them,
 * so it is never shown: the messages here name the address and say what
 * was wrong in words of their own.
 */
#include "cluster_control.h"

#include <stdio.h>
#include <string.h>

/* The peer's bytes are not RESP: whatever answered is not Redis. */
static int not_resp(const redisContext *ctx)
{
    return ctx->err == REDIS_ERR_PROTOCOL;
}

/* AUTH on ctx: 0, or -1 with err set (*bad: the answer was not RESP). */
static int auth(redisContext *ctx, const redis_uri *u, const char *host,
                int port, int *bad, char *err, size_t errlen)
{
    redisReply *r = u->user[0]
                        ? redisCommand(ctx, "AUTH %s %s", u->user, u->password)
                        : redisCommand(ctx, "AUTH %s", u->password);

    if (!r && not_resp(ctx)) {
        snprintf(err, errlen, "seed %s:%d answered, but is not a Redis "
                 "server (no RESP reply to AUTH)", host, port);
        if (bad)
            *bad = 1;
        return -1;
    }
    if (!r || r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s:%d: AUTH: %s", host, port,
                 r ? r->str : ctx->errstr);
        if (r)
            freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

redisContext *cluster_control(const redis_uri *cred, const char *host,
                              int port, int64_t ms, int *bad, char *err,
                              size_t errlen)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    redisContext *ctx = redisConnectWithTimeout(host, port, tv);

    if (!ctx || ctx->err) {
        snprintf(err, errlen, "%s:%d: %s", host, port,
                 ctx ? ctx->errstr : "out of memory");
        redisFree(ctx);
        return NULL;
    }
    redisSetTimeout(ctx, tv);
    if (cred->password[0] &&
        auth(ctx, cred, host, port, bad, err, errlen) != 0) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

int cluster_state_ok(redisContext *ctx)
{
    redisReply *r = redisCommand(ctx, "CLUSTER INFO");
    int ok = -1;

    if (r && r->type == REDIS_REPLY_STRING)
        ok = strstr(r->str, "cluster_state:ok") != NULL;
    if (r)
        freeReplyObject(r);
    return ok;
}

int cluster_seed_kind(const redis_uri *cred, const redis_uri *seed,
                      int64_t ms, char *err, size_t errlen)
{
    char why[256];
    int bad = 0, rc = 0;
    redisContext *ctx = cluster_control(cred, seed->host, seed->port, ms,
                                        &bad, why, sizeof why);
    redisReply *r;

    if (!ctx) {
        if (bad)
            snprintf(err, errlen, "%s", why);
        return bad ? -2 : 0;
    }
    r = redisCommand(ctx, "CLUSTER INFO");
    if (!r && not_resp(ctx)) {
        snprintf(err, errlen, "seed %s:%d answered, but is not a Redis "
                 "server (no RESP reply to CLUSTER INFO)", seed->host,
                 seed->port);
        rc = -2;
    } else if (r && r->type == REDIS_REPLY_ERROR &&
               strstr(r->str, "cluster support disabled")) {
        snprintf(err, errlen, "seed %s:%d is not a Redis Cluster node "
                 "(cluster support disabled); use redis:// for a single "
                 "server", seed->host, seed->port);
        rc = -2;
    }
    if (r)
        freeReplyObject(r);
    redisFree(ctx);
    return rc;
}

int cluster_check_seeds(const redis_uri *seeds, int n, int64_t ms,
                        char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (cluster_seed_kind(&seeds[0], &seeds[i], ms, err, errlen) == -2)
            return -2;
    return 0;
}
