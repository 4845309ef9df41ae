/*
 * cluster_control.h -- the blocking control connections the cluster store
 * opens off the request path (its slot-map thread, and rl_limiter_new):
 * connect and AUTH within a deadline, a node's cluster_state, and what a
 * seed is.  Apart from store_cluster.c so that the store keeps to routing
 * and its map.
 */
#ifndef RL_CLUSTER_CONTROL_H
#define RL_CLUSTER_CONTROL_H

#include <stdint.h>

#include "redis_link.h"
#include "redis_uri.h"

/* Opens *l to host:port with connect and command timeouts of ms, over TLS
 * when cred says rediss-cluster:// (tls: the store's client context),
 * AUTHed with cred's user and password if it has one.  0, or -1 with err
 * set (no password in it); *bad (if not NULL) set to 1 when the peer
 * answered AUTH with bytes that are not RESP (it is not Redis).  Close
 * with rlink_close(). */
int cluster_control(rlink *l, const redis_uri *cred, SSL_CTX *tls,
                    const char *host, int port, int64_t ms, int *bad,
                    char *err, size_t errlen);

/* cluster_state from CLUSTER INFO: 1 ok, 0 not, -1 no answer. */
int cluster_state_ok(rlink *l);

/* What the seed is, asked within ms: 0 a cluster node, or no answer (an
 * outage is not for this check to judge); -2 it answered but is not a
 * cluster node (not Redis at all, or a server with cluster support
 * disabled), with err naming it and saying which. */
int cluster_seed_kind(const redis_uri *cred, SSL_CTX *tls,
                      const redis_uri *seed, int64_t ms, char *err,
                      size_t errlen);

/* At start: every seed that answers must be a cluster node, wherever it
 * stands in the list (a wrong address is a mistake to report, not an
 * outage to ride out); seeds[0] holds the credentials.  0, or -2 with err
 * naming the first that is not. */
int cluster_check_seeds(const redis_uri *seeds, int n, SSL_CTX *tls,
                        int64_t ms, char *err, size_t errlen);

#endif
