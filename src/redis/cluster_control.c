/*
 * cluster_control.c -- see cluster_control.h.  What answers on a seed's
 * address is outside input: an HTTP server, a plain Redis, a cluster
 * node.  hiredis's message for bytes that are not RESP quotes one of them,
 * so it is never shown (the connection is redis_link's: plain, or TLS for
 * rediss-cluster://): the messages here name the address and say what
 * was wrong in words of their own.
 */
#include "cluster_control.h"

#include <stdio.h>
#include <string.h>

/* AUTH on l: 0, or -1 with err set (*bad: the answer was not RESP). */
static int auth(rlink *l, const redis_uri *u, const char *host, int port,
                int *bad, char *err, size_t errlen)
{
    redisReply *r = u->user[0]
                        ? rlink_command(l, "AUTH %s %s", u->user, u->password)
                        : rlink_command(l, "AUTH %s", u->password);

    if (!r && l->not_resp) {
        snprintf(err, errlen, "seed %s:%d answered, but is not a Redis "
                 "server (no RESP reply to AUTH)", host, port);
        if (bad)
            *bad = 1;
        return -1;
    }
    if (!r || r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s:%d: AUTH: %s", host, port,
                 r ? r->str : l->errstr);
        if (r)
            freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

int cluster_control(rlink *l, const redis_uri *cred, SSL_CTX *tls,
                    const char *host, int port, int64_t ms, int *bad,
                    char *err, size_t errlen)
{
    redis_uri at = {.port = port, .tls = cred->tls};

    snprintf(at.host, sizeof at.host, "%s", host);
    /* its message names host:port already */
    if (rlink_open(l, &at, tls, NULL, ms, err, errlen) != 0)
        return -1;
    if (cred->password[0] &&
        auth(l, cred, host, port, bad, err, errlen) != 0) {
        rlink_close(l);
        return -1;
    }
    return 0;
}

int cluster_state_ok(rlink *l)
{
    redisReply *r = rlink_command(l, "CLUSTER INFO");
    int ok = -1;

    if (r && r->type == REDIS_REPLY_STRING)
        ok = strstr(r->str, "cluster_state:ok") != NULL;
    if (r)
        freeReplyObject(r);
    return ok;
}

int cluster_seed_kind(const redis_uri *cred, SSL_CTX *tls,
                      const redis_uri *seed, int64_t ms, char *err,
                      size_t errlen)
{
    char why[256];
    int bad = 0, rc = 0;
    rlink l;
    redisReply *r;

    if (cluster_control(&l, cred, tls, seed->host, seed->port, ms, &bad, why,
                        sizeof why) != 0) {
        if (bad)
            snprintf(err, errlen, "%s", why);
        return bad ? -2 : 0;
    }
    r = rlink_command(&l, "CLUSTER INFO");
    if (!r && l.not_resp) {
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
    rlink_close(&l);
    return rc;
}

int cluster_check_seeds(const redis_uri *seeds, int n, SSL_CTX *tls,
                        int64_t ms, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (cluster_seed_kind(&seeds[0], tls, &seeds[i], ms, err, errlen) ==
            -2)
            return -2;
    return 0;
}
