/*
 * redis_uri.h -- parse the store URIs that name one Redis server:
 *
 *   redis://[[user]:password@]host[:port][/db]     host may be [v6::addr]
 *   unix://[[user]:password@]/path/to/socket[?db=N]
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

#endif
