/*
 * redis_uri.h -- parse the store URIs that name one Redis server:
 *
 *   redis://[[user]:password@]host[:port][/db]     host may be [v6::addr]
 *   unix://[[user]:password@]/path/to/socket[?db=N]
 *   redis-cluster://[[user]:password@]host[:port],host[:port]...
 *
 * User and password may be percent-encoded (%40 for '@').  Port defaults
 * to 6379, db to 0.
 */
#ifndef RL_REDIS_URI_H
#define RL_REDIS_URI_H

#include <stddef.h>

typedef struct redis_uri {
    int is_unix;
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
 * (the credentials apply to every node; a cluster has database 0 only).
 * Fills seeds[0..*n), at most max; 0, or -1 with the reason in err.
 */
int redis_uri_parse_cluster(const char *uri, redis_uri *seeds, int max,
                            int *n, char *err, size_t errlen);

/* The URI with any password shown as ***, for messages. */
void redis_uri_redact(const char *uri, char *out, size_t len);

#endif
