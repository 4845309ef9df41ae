/*
 * fuzz_uri.c -- store URIs (redis://, unix://, redis-cluster://), from an
 * operator's configuration.  Whatever parses must be usable as is: a host
 * or a socket path, a port in range, NUL-free credentials; a seed list of
 * 1..16 TCP seeds, database 0, and a redacted form that never shows the
 * password.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "redis_uri.h"

int fuzz_uri(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), err[200], shown[128];
    redis_uri u, seeds[16];
    int n = -1;

    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data, size);
    buf[size] = '\0';
    if (redis_uri_parse(buf, &u, err, sizeof err) == 0) {
        FUZZ_CHECK(u.is_unix ? u.path[0] == '/' : u.host[0] != '\0');
        FUZZ_CHECK(u.is_unix || (u.port >= 1 && u.port <= 65535));
        FUZZ_CHECK(u.db >= 0);
        FUZZ_CHECK(!u.user[0] || u.password[0]);
    } else {
        FUZZ_CHECK(err[0] != '\0');
    }
    if (redis_uri_parse_cluster(buf, seeds, 16, &n, err, sizeof err) == 0) {
        FUZZ_CHECK(n >= 1 && n <= 16);
        for (int i = 0; i < n; i++) {
            FUZZ_CHECK(!seeds[i].is_unix && seeds[i].host[0] != '\0');
            FUZZ_CHECK(seeds[i].port >= 1 && seeds[i].port <= 65535);
            FUZZ_CHECK(seeds[i].db == 0);
            FUZZ_CHECK(strcmp(seeds[i].password, seeds[0].password) == 0);
        }
        /* the password never shows: with credentials, the message is the
         * URI up to the user name, ":***", then the URI from the last '@' */
        redis_uri_redact(buf, shown, sizeof shown);
        if (seeds[0].password[0]) {
            const char *at = strrchr(buf, '@'), *colon;
            size_t k;
            FUZZ_CHECK(at != NULL);
            colon = memchr(buf + 16, ':', (size_t)(at - buf - 16));
            k = (size_t)((colon ? colon : at) - buf);
            FUZZ_CHECK(strncmp(shown, buf, k < 100 ? k : 100) == 0);
            FUZZ_CHECK(k >= sizeof shown - 5 ||
                       strncmp(shown + k, ":***@", 5) == 0);
        }
    } else {
        FUZZ_CHECK(err[0] != '\0');
    }
    free(buf);
    return 0;
}

#ifdef FUZZ_TARGET_uri
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_uri(data, size);
}
#endif
