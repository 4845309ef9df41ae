/*
 * sha1.h -- SHA-1, only to name the Lua script the way Redis does
 * (EVALSHA), so the name is known before any server is reached.
 */
#ifndef RL_SHA1_H
#define RL_SHA1_H

#include <stddef.h>

/* Write the 40 hex digits of SHA-1(data) and a NUL into hex. */
void sha1_hex(const void *data, size_t len, char hex[41]);

#endif
