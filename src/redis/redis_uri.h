/*
 * redis_uri.h -- parse the store URIs that name one Redis server:
 *
 *   redis://[[user]:password@]host[:port][/db]     host may be [v6::addr]
 *   rediss://...                                   the same, over TLS
 *   unix://[[user]:password@]/path/to/socket[?db=N]
 *   redis-cluster://[[user]:password@]host[:port],host[:port]...
 *   rediss-cluster://...                           the same, over TLS
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/name[/db]
 *   rediss-sentinel://...                          the same, over TLS
 *
 * and show them without their secrets.  Port defaults to 6379, db to 0.
 *
 * The credentials ("user:password", or ":password") end at the LAST '@'
 * of the URI: nothing after them (host, port, db, seeds) may hold one.  So
 * a password may hold '@', '/', '?' and ':' as they are, or
 * percent-encoded (%40 %2F %3F %3A); a '%' is always an escape (%25 for
 * '%').  The user name ends at the first ':' (%3A inside it).  For
 * unix://, a URI whose path comes first ("unix:///run/r@1.sock") has no
 * credentials, so such a path may hold '@', but not together with
 * credentials; a path that holds "@/" is refused (it reads as credentials
 * written after the path).  A URI without '@' has no credentials.
 * redis_uri_parse() and redis_uri_redact() find the credentials with the
 * same function, so what the one takes as a password the other hides.
 */
#ifndef RL_REDIS_URI_H
#define RL_REDIS_URI_H

#include <stddef.h>

typedef struct redis_uri {
    int is_unix;
    int tls;            /* rediss://, rediss-cluster:// */
    char host[256];
    int port;
    char path[108];     /* unix socket path (sun_path size) */
    char user[128];
    char password[256];
    int db;
} redis_uri;

/* 0, or -1 with the reason in err. */
int redis_uri_parse(const char *uri, redis_uri *out, char *err,
                    size_t errlen);

/*
 * A Redis Cluster's seed list:
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...][/0]
 * or rediss-cluster://, each seed's tls set (the credentials apply to every node; a cluster has database 0 only).
 * Fills seeds[0..*n), at most max; 0, or -1 with the reason in err.
 */
int redis_uri_parse_cluster(const char *uri, redis_uri *seeds, int max,
                            int *n, char *err, size_t errlen);

/*
 * Redis Sentinel: the sentinels to ask (port 26379 unless given) into
 * sentinels[0..*n), at most max, and the master's name (at most
 * namelen - 1 bytes); *master gets the credentials (the master's, not the
 * sentinels'), the db and tls, its host and port being the sentinels' to
 * tell.  0, or -1 with the reason in err.
 */
#define REDIS_SENTINEL_PORT 26379
int redis_uri_parse_sentinel(const char *uri, redis_uri *master,
                             redis_uri *sentinels, int max, int *n,
                             char *name, size_t namelen, char *err,
                             size_t errlen);

/*
 * The URI for a message: its credentials, user name included, replaced by
 * "***" (the scheme, "***@", then the host and the rest), whatever its
 * scheme or shape (an unknown scheme, or none: everything up to the last
 * '@' is hidden), cut to about 120 bytes, with every byte below 0x21 and
 * 0x7f shown as '?'.
 */
void redis_uri_redact(const char *uri, char *out, size_t len);

#endif
