/*
 * decimal.h -- an integer in decimal, two digits a division.
 *
 * Four places write numbers on a hot path: the response headers
 * (headers.c: a response's three 10-digit numbers took ~530 instructions
 * one digit at a time), the RESP encoder of every command sent to Redis
 * (redis/resp.c), the packed RL.CHECK argument the library sends
 * (redis/redis_module_cmd.c) and the packed answer ratelimit.so gives
 * (redis-module/).  They share this one writer; it is a header so the
 * module, which compiles a few of the library's files in, needs no more.
 */
#ifndef RL_DECIMAL_H
#define RL_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

/* "00" "01" ... "99". */
#define DECIMAL_PAIRS_(t)                                                  \
    t "0" t "1" t "2" t "3" t "4" t "5" t "6" t "7" t "8" t "9"
static const char decimal_pairs[] =
    DECIMAL_PAIRS_("0") DECIMAL_PAIRS_("1") DECIMAL_PAIRS_("2")
    DECIMAL_PAIRS_("3") DECIMAL_PAIRS_("4") DECIMAL_PAIRS_("5")
    DECIMAL_PAIRS_("6") DECIMAL_PAIRS_("7") DECIMAL_PAIRS_("8")
    DECIMAL_PAIRS_("9");

/* x in decimal at p ('-' first when negative; at most 20 bytes, no NUL);
 * its length. */
static inline size_t decimal_put(char *p, int64_t x)
{
    char tmp[24];
    size_t n = 0, k = 0;
    uint64_t u = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;

    for (; u >= 100; u /= 100) {
        tmp[n++] = decimal_pairs[u % 100 * 2 + 1];
        tmp[n++] = decimal_pairs[u % 100 * 2];
    }
    if (u >= 10)
        tmp[n++] = decimal_pairs[u * 2 + 1];
    tmp[n++] = u >= 10 ? decimal_pairs[u * 2] : (char)('0' + u);
    if (x < 0)
        p[k++] = '-';
    while (n)
        p[k++] = tmp[--n];
    return k;
}

#endif
