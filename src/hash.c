/*
 * hash.c -- hash_bytes(): reads 8 bytes at a time (memcpy, so unaligned
 * keys are fine), folds each word in with a 128-bit multiply, and finishes
 * with the length so "ab" and "ab\0" differ.
 */
#include "hash.h"

#include <string.h>

uint64_t hash_bytes(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = seed ^ 0x8ebc6af09c88c6e3ULL;
    uint64_t w;
    size_t n = len;

    while (n >= 8) {
        memcpy(&w, p, 8);
        h = hash_mix(h, w);
        p += 8;
        n -= 8;
    }
    w = 0;
    if (n)
        memcpy(&w, p, n);
    h = hash_mix(h, w ^ ((uint64_t)n << 56));
    return hash_mix(h, (uint64_t)len);
}
