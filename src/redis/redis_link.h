/*
 * redis_link.h -- a blocking command connection to one Redis server, with
 * a timeout on every step: plain (hiredis' blocking context) or TLS
 * (rediss://: a non-blocking connect and handshake with poll, redis_tls.c,
 * then commands formatted and parsed by hiredis, carried by OpenSSL).
 * The connector's handshake (AUTH, SELECT, INFO, SCRIPT LOAD) and the
 * cluster's slot map reads use it; an established link's descriptor (and
 * its SSL) can then be handed to the I/O loop.
 */
#ifndef RL_REDIS_LINK_H
#define RL_REDIS_LINK_H

#include <hiredis/hiredis.h>
#include <stdint.h>

#include "redis_tls.h"
#include "redis_uri.h"

typedef struct rlink {
    redisContext *ctx;      /* plain                                    */
    SSL *ssl;               /* TLS                                      */
    int fd;                 /* TLS: the socket; -1 none                  */
    redisReader *reader;    /* TLS: the replies                          */
    int64_t timeout_ms;     /* each step's                               */
    char host[256];
    int port;
    char errstr[256];       /* why the last command had no reply         */
    int not_resp;           /* the last answer's bytes were not RESP     */
} rlink;

/* Connect to u (host and port, or its socket path), over TLS when tls is
 * set (a client context, redis_tls.h) offering sess (if set) for
 * resumption; each step bounded by timeout_ms.  0, or -1 with the
 * reason in err (l is then closed). */
int rlink_open(rlink *l, const redis_uri *u, SSL_CTX *tls, SSL_SESSION *sess,
               int64_t timeout_ms, char *err, size_t errlen);

/* A command as redisCommand formats it; its reply (the caller frees it),
 * or NULL with the reason in l->errstr. */
redisReply *rlink_command(rlink *l, const char *fmt, ...);

/* The session to offer next time (TLS), into *sess (the old one freed). */
void rlink_keep_session(rlink *l, SSL_SESSION **sess);

/* Hand the connection over: its descriptor, now non-blocking, and *ssl
 * (NULL when plain), both the caller's; l is closed. */
int rlink_release(rlink *l, SSL **ssl);

void rlink_close(rlink *l);

#endif
