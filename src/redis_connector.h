/*
 * redis_connector.h -- (re)connecting a server's connections off the
 * request path: one thread per server that connects, AUTHs, SELECTs,
 * checks the version (7.0 or later) and SCRIPT LOADs with blocking
 * hiredis calls bounded by connect_timeout_ms, then hands the
 * non-blocking descriptor to its owner (the I/O loop, redis_io.c).
 */
#ifndef RL_REDIS_CONNECTOR_H
#define RL_REDIS_CONNECTOR_H

#include "redis_io.h"

typedef struct rconnector rconnector;

/* Called from the connector's thread with connection i's new descriptor,
 * which the callee owns from then on. */
typedef void (*rconnector_ready_fn)(void *arg, int i, int fd);

/* Connect as above, now, in the calling thread; sha: the script's SHA-1
 * (40 hex digits), checked against the server's.  A non-blocking fd, or
 * -1 with the reason in err (no password in it). */
int rconnector_handshake(const rio_opts *o, const char *sha, char *err,
                         size_t errlen);

/* Start the thread for n connections; need[i] set: connect i now.  0, or
 * -1 when the thread cannot be started. */
int rconnector_start(rconnector **out, const rio_opts *o, const char *sha,
                     int n, const int *need, rconnector_ready_fn ready,
                     void *arg);

/* Connection i broke: connect it again (at once, then backing off). */
void rconnector_need(rconnector *k, int i);

/* Stop the thread (a handshake in progress ends first: at most
 * connect_timeout_ms) and free.  NULL: nothing. */
void rconnector_stop(rconnector *k);

#endif
