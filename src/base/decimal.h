/*
 * decimal.h -- an integer in decimal: its digits counted from its bit
 * length, then written eight a step (little-endian), four a division,
 * two digits a table copy.
 *
 * Four places write numbers on a hot path: the response headers
 * (headers.c: a response's three 10-digit numbers took ~530 instructions
 * one digit at a time), the RESP encoder of every command sent to Redis
 * (redis/resp.c), the packed RL.CHECK argument the library sends
 * (redis/redis_module_cmd.c) and the packed answer, state values and
 * replicated numbers of ratelimit.so (redis-module/).  They share this
 * one writer; it is a header so the module, which compiles a few of the
 * library's files in, needs no more.
 */
#ifndef RL_DECIMAL_H
#define RL_DECIMAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* "00" "01" ... "99". */
#define DECIMAL_PAIRS_(t)                                                  \
    t "0" t "1" t "2" t "3" t "4" t "5" t "6" t "7" t "8" t "9"
static const char decimal_pairs[] =
    DECIMAL_PAIRS_("0") DECIMAL_PAIRS_("1") DECIMAL_PAIRS_("2")
    DECIMAL_PAIRS_("3") DECIMAL_PAIRS_("4") DECIMAL_PAIRS_("5")
    DECIMAL_PAIRS_("6") DECIMAL_PAIRS_("7") DECIMAL_PAIRS_("8")
    DECIMAL_PAIRS_("9");

/* The most bytes decimal_put() writes: '-' and 19 digits. */
#define DECIMAL_MAX 20

/* 10^0 ... 10^19, every power of ten a uint64_t holds. */
static const uint64_t decimal_pow10[] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL,
    10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL,
    100000000000ULL, 1000000000000ULL, 10000000000000ULL,
    100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
    100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL};

/* The number of decimal digits of u, with no division: from its bit
 * length, t = floor(bits * log10(2)) (1233 / 4096 is log10(2) to within
 * the error the 64 bit lengths can show) is the digits less one, or the
 * digits when u reaches 10^t.  ~8 instructions, not a division loop. */
static inline size_t decimal_digits(uint64_t u)
{
    uint64_t v = u | 1;
    size_t t = ((size_t)(64 - __builtin_clzll(v)) * 1233) >> 12;

    return t + (v >= decimal_pow10[t]);
}

/* u (< 100) as its last two digits ending at q: q[-2], q[-1]. */
static inline void decimal_pair_at(char *q, unsigned u)
{
    memcpy(q - 2, decimal_pairs + u * 2, 2); /* one 16-bit load and store */
}

/* The eight-digit word on little-endian machines; digit pairs elsewhere,
 * or wherever DECIMAL_PORTABLE is defined before this header (the test
 * of the pairs' path on a little-endian machine: tests/decimal_portable.c). */
#if !defined(DECIMAL_PORTABLE) && defined(__BYTE_ORDER__) &&              \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define DECIMAL_EIGHT 1
/* x (< 10^8) as exactly eight digits at q[0..8), leading zeros kept, in
 * one 64-bit word and one store (no division loop): each step splits
 * every lane in two, the quotient moved up a lane and the remainder left
 * (v + (2^k - d) * q is the remainder plus q << k): x by 10^4 into two
 * 32-bit lanes, each by 100 into two 16-bit lanes, each by 10 into two
 * bytes.  The divisions are multiplications exact in these ranges
 * (x * 0x68DB8BB >> 40 is x / 10000 below 10^8; * 0x147B >> 19 is / 100
 * below 10^4; * 0x67 >> 10 is / 10 below 100), no lane carries into the
 * next, and one byte swap puts the first digit first.  ~16 instructions,
 * checked against printf for every x below 10^8. */
static inline void decimal_eight(char *q, uint32_t x)
{
    uint64_t v = x + ((1ULL << 32) - 10000) * ((x * 0x68DB8BBULL) >> 40);

    v += ((1ULL << 16) - 100) * ((v * 0x147B >> 19) & (0x7FULL << 32 | 0x7F));
    v += ((1ULL << 8) - 10) * ((v * 0x67 >> 10) & 0x000F000F000F000FULL);
    v = __builtin_bswap64(v) + 0x3030303030303030ULL; /* '0' in each byte */
    memcpy(q, &v, 8);
}
#endif

/* x in decimal at p ('-' first when negative; at most DECIMAL_MAX bytes,
 * no NUL); its length.  Written from its last digit back, in place (no
 * copy of reversed digits): a number of nine digits or more has its last
 * eight written in one step (decimal_eight), the rest in 32-bit
 * arithmetic once it fits (one multiply a division), four digits a step:
 * ~45 instructions for 10 digits, not ~200. */
static inline size_t decimal_put(char *p, int64_t x)
{
    uint64_t u = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
    size_t n = (x < 0) + decimal_digits(u);
    char *q = p + n;
    uint32_t w;

    if (x < 0)
        p[0] = '-';
#ifdef DECIMAL_EIGHT
    if (u >= 100000000) {
        q -= 8;
        decimal_eight(q, (uint32_t)(u % 100000000));
        u /= 100000000;
    }
#endif
    for (; u > UINT32_MAX; u /= 100, q -= 2)
        decimal_pair_at(q, (unsigned)(u % 100));
    for (w = (uint32_t)u; w >= 10000; w /= 10000, q -= 4) {
        unsigned r = w % 10000; /* four digits a step: half the loop */

        decimal_pair_at(q, r % 100);
        decimal_pair_at(q - 2, r / 100);
    }
    if (w >= 100) {
        decimal_pair_at(q, w % 100);
        w /= 100;
        q -= 2;
    }
    if (w >= 10)
        decimal_pair_at(q, w);
    else
        q[-1] = (char)('0' + w);
    return n;
}

#endif
