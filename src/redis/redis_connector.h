/*
 * redis_connector.h -- (re)connecting a server's connections off the
 * request path: one thread per server that connects, AUTHs, SELECTs,
 * checks the role when asked (need_master: Sentinel), the version (7.0
 * or later), SCRIPT LOADs and FUNCTION LOADs (the function library, when
 * given) with blocking calls
 * bounded by connect_timeout_ms (redis_link.c: hiredis, or TLS with its
 * handshake for rediss://), then hands the non-blocking descriptor (and
 * its SSL) to its owner (the I/O loop, redis_io.c).  Over TLS it keeps
 * the server's last session and offers it on the next connect.
 */
#ifndef RL_REDIS_CONNECTOR_H
#define RL_REDIS_CONNECTOR_H

#include "redis_io.h"
#include "redis_tls.h"

typedef struct rconnector rconnector;

/* Called from the connector's thread, under its lock (so it may call no
 * rconnector_* function), with connection i's new descriptor and its SSL
 * (NULL: plain), which the callee owns from then on; fcall: bit
 * RCONN_LIBRARY, the server has the function library (FCALL), else
 * EVALSHA; bit RCONN_MODULE, it has ratelimit.so's RL.CHECK
 * (redis_module_cmd.h). */
typedef void (*rconnector_ready_fn)(void *arg, int i, int fd, SSL *ssl,
                                    int fcall);

/* Connect as above, now, in the calling thread; sha: the script's SHA-1
 * (40 hex digits), checked against the server's; *sess: the TLS session
 * to offer (NULL: none), replaced by the server's newest.  A non-blocking
 * fd and *ssl (NULL when plain), or -1 with the reason in err (no
 * password in it).  *fcall: RCONN_LIBRARY when o->library is set and the
 * server has it now (loaded, or there already); not when there is none or
 * the server refused FUNCTION LOAD (an ACL without it, a renamed command):
 * the connection calls EVALSHA, as before Redis functions.  Or'ed with
 * rcmd_detect()'s RCONN_MODULE. */
int rconnector_handshake(const rio_opts *o, const char *sha,
                         SSL_SESSION **sess, SSL **ssl, int *fcall,
                         char *err, size_t errlen);

/* Start the thread for n connections; need[i] set: connect i now; sess:
 * the session to offer first (the thread's from then on; NULL: none).
 * 0, or -1 when the thread cannot be started (sess then still the
 * caller's). */
int rconnector_start(rconnector **out, const rio_opts *o, const char *sha,
                     int n, const int *need, SSL_SESSION *sess,
                     rconnector_ready_fn ready, void *arg);

/* Connection i broke: connect it again (at once, then backing off). */
void rconnector_need(rconnector *k, int i);

/* Connect to host:port from now on (Sentinel: the new primary), at once:
 * a handshake still on its way to the old address is dropped, never
 * handed over; the caller drops the connections already up.  Called
 * from any thread but the `ready` callback, which runs under the
 * connector's lock. */
void rconnector_retarget(rconnector *k, const char *host, int port);

/* Stop the thread (a handshake in progress ends first: at most
 * connect_timeout_ms) and free.  NULL: nothing. */
void rconnector_stop(rconnector *k);

#endif
