/*
 * fuzz_uri.c -- store URIs (redis://, unix://), from an operator's
 * configuration.  Whatever parses must be usable as is: a host or a socket
 * path, a port in range, NUL-free credentials.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "redis_uri.h"

int fuzz_uri(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), err[200];
    redis_uri u;

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
