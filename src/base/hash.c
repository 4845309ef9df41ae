/*
 * hash.c -- hash_bytes(): reads 8 bytes at a time (memcpy, so unaligned
 * keys are fine), folds each word in with a 128-bit multiply, and finishes
 * with the length so "ab" and "ab\0" differ.  Short tails are read as two
 * overlapping words rather than byte by byte: a byte loop into a stack word
 * followed by a word load stalls store-to-load forwarding.
 */
#include "hash.h"

#include <string.h>

static uint64_t read64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static uint64_t read32(const unsigned char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

uint64_t hash_bytes(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = seed ^ 0x8ebc6af09c88c6e3ULL, a, b;
    size_t n = len;

    if (n > 8) {
        for (; n > 8; p += 8, n -= 8)
            h = hash_mix(h, read64(p));
        a = read64(p + n - 8); /* the last 8 bytes, overlapping */
        b = 0;
    } else if (n >= 4) {
        a = read32(p);
        b = read32(p + n - 4);
    } else if (n > 0) {
        a = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
        b = 0;
    } else {
        a = b = 0;
    }
    h = hash_mix(h ^ a, b ^ 0x589965cc75374cc3ULL);
    return hash_mix(h, (uint64_t)len);
}
