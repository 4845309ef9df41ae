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

/* An 8-byte little-endian word: one load (and a swap on a big-endian
 * machine) rather than a byte loop. */
static uint64_t read_le64(const unsigned char *p)
{
    uint64_t w;

    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* One SipRound on four locals, so they stay in registers (a function on
 * an array of them was not inlined: its 5 calls a hash were a sixth of
 * the memory store's work per check). */
#define SIPROUND(v0, v1, v2, v3)                                             \
    do {                                                                     \
        v0 += v1;                                                            \
        v1 = ROTL(v1, 13);                                                   \
        v1 ^= v0;                                                            \
        v0 = ROTL(v0, 32);                                                   \
        v2 += v3;                                                            \
        v3 = ROTL(v3, 16);                                                   \
        v3 ^= v2;                                                            \
        v0 += v3;                                                            \
        v3 = ROTL(v3, 21);                                                   \
        v3 ^= v0;                                                            \
        v2 += v1;                                                            \
        v1 = ROTL(v1, 17);                                                   \
        v1 ^= v2;                                                            \
        v2 = ROTL(v2, 32);                                                   \
    } while (0)

/* The last left (0..7) bytes of a len-byte message, p at them, as the low
 * bytes of a word: past 8 bytes, the message's last word shifted down
 * (no byte loop: that loop was a third of the hash's instructions on a
 * "user:123456" key); a message shorter than a word, byte by byte. */
static uint64_t read_tail(const unsigned char *p, size_t left, size_t len)
{
    uint64_t w = 0;

    if (left == 0)
        return 0;
    if (len >= 8)
        return read_le64(p + left - 8) >> (8 * (8 - left));
    for (size_t i = 0; i < left; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
}

uint64_t siphash13(const void *data, size_t len, const uint64_t key[2])
{
    const unsigned char *p = data;
    uint64_t v0 = key[0] ^ 0x736f6d6570736575ULL;
    uint64_t v1 = key[1] ^ 0x646f72616e646f6dULL;
    uint64_t v2 = key[0] ^ 0x6c7967656e657261ULL;
    uint64_t v3 = key[1] ^ 0x7465646279746573ULL;
    size_t left = len & 7;
    uint64_t last;

    for (const unsigned char *end = p + (len - left); p != end; p += 8) {
        uint64_t m = read_le64(p);
        v3 ^= m;
        SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    last = (uint64_t)len << 56 | read_tail(p, left, len);
    v3 ^= last;
    SIPROUND(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
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
