/*
 * siphash.c -- SipHash-1-3 (Aumasson and Bernstein; one compression round
 * per 8-byte word, three finalisation rounds: the variant Rust and Python
 * use for their hash tables), and the random key the memory store draws.
 * Words are read little-endian whatever the machine, so the compact Redis
 * layout's names are the same on every limiter of a fleet.
 */
#include "siphash.h"
#include "hash.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t w = 0;

    for (int i = 7; i >= 0; i--)
        w = w << 8 | p[i];
    return w;
}

static void sipround(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = ROTL(v[1], 13);
    v[1] ^= v[0];
    v[0] = ROTL(v[0], 32);
    v[2] += v[3];
    v[3] = ROTL(v[3], 16);
    v[3] ^= v[2];
    v[0] += v[3];
    v[3] = ROTL(v[3], 21);
    v[3] ^= v[0];
    v[2] += v[1];
    v[1] = ROTL(v[1], 17);
    v[1] ^= v[2];
    v[2] = ROTL(v[2], 32);
}

uint64_t siphash13(const void *data, size_t len, const uint64_t key[2])
{
    const unsigned char *p = data;
    uint64_t v[4] = {key[0] ^ 0x736f6d6570736575ULL,
                     key[1] ^ 0x646f72616e646f6dULL,
                     key[0] ^ 0x6c7967656e657261ULL,
                     key[1] ^ 0x7465646279746573ULL};
    uint64_t last = (uint64_t)len << 56;
    size_t left = len & 7;

    for (const unsigned char *end = p + (len - left); p != end; p += 8) {
        uint64_t m = read_le64(p);
        v[3] ^= m;
        sipround(v);
        v[0] ^= m;
    }
    for (size_t i = 0; i < left; i++)
        last |= (uint64_t)p[i] << (8 * i);
    v[3] ^= last;
    sipround(v);
    v[0] ^= last;
    v[2] ^= 0xff;
    sipround(v);
    sipround(v);
    sipround(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

int siphash_key_parse(const char *hex, uint64_t key[2])
{
    unsigned char b[SIPHASH_KEY_HEX / 2];

    if (strlen(hex) != SIPHASH_KEY_HEX)
        return -1;
    for (size_t i = 0; i < sizeof b; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        b[i] = (unsigned char)(hi << 4 | lo);
    }
    key[0] = read_le64(b);
    key[1] = read_le64(b + 8);
    return 0;
}

void siphash_random_key(uint64_t key[2])
{
    struct timespec ts;
    size_t got = 0;

    while (got < 16) {
        ssize_t n = getrandom((char *)key + got, 16 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got == 16)
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    key[0] = hash_mix((uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)key,
                      (uint64_t)ts.tv_sec ^ (uint64_t)getpid());
    clock_gettime(CLOCK_REALTIME, &ts);
    key[1] = hash_mix(key[0] ^ (uint64_t)ts.tv_nsec,
                      (uint64_t)(uintptr_t)&siphash_random_key);
}
