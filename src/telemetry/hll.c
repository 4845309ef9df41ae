/*
 * hll.c -- see hll.h: adding, merging, the estimate, and the hex form the
 * dry-run reports carry.  The estimator follows Ertl (2017), section 3.3
 * ("improved raw estimator"): the register histogram C[0..q+1], q = 64 - p,
 * gives  E = m^2 / (2 ln 2 * z),  z = m sigma(C[0]/m) + sum_{k=1..q} C[k]
 * 2^-k + m tau(1 - C[q+1]/m) 2^-q,  with sigma and tau computed as
 * converging series.  sigma carries the empty registers (what linear
 * counting would say), tau the registers at the largest rank.
 */
#include "hll.h"
#include "hash.h"

#include <math.h>
#include <string.h>

#define HLL_Q (64 - HLL_P) /* bits left for the rank */
#define LN2 0.693147180559945309417

uint64_t hll_hash(const void *key, size_t len)
{
    return hash_bytes(key, len, HLL_SEED);
}

void hll_add(hll *h, const void *key, size_t len)
{
    uint64_t x = hll_hash(key, len);
    unsigned i = hll_index(x);
    uint8_t r = hll_rank(x);

    if (r > h->reg[i])
        h->reg[i] = r;
}

void hll_merge(hll *into, const hll *from)
{
    for (unsigned i = 0; i < HLL_M; i++)
        if (from->reg[i] > into->reg[i])
            into->reg[i] = from->reg[i];
}

/* sigma(x) = x + sum_{k>=1} x^(2^k) 2^(k-1); infinite at x = 1 (every
 * register empty: the estimate is 0). */
static double sigma(double x)
{
    double y = 1, z = x, prev;

    if (x == 1.0)
        return INFINITY;
    do {
        x *= x;
        prev = z;
        z += x * y;
        y += y;
    } while (z != prev);
    return z;
}

/* tau(x) = (1 - x - sum_{k>=1} (1 - x^(2^-k))^2 2^-k) / 3. */
static double tau(double x)
{
    double y = 1, z, prev;

    if (x == 0.0 || x == 1.0)
        return 0;
    z = 1 - x;
    do {
        x = sqrt(x);
        prev = z;
        y *= 0.5;
        z -= (1 - x) * (1 - x) * y;
    } while (z != prev);
    return z / 3;
}

double hll_estimate(const hll *h)
{
    unsigned hist[HLL_Q + 2] = {0};
    const double m = HLL_M;
    double z;

    for (unsigned i = 0; i < HLL_M; i++)
        hist[h->reg[i]]++;
    if (hist[0] == HLL_M)
        return 0;
    z = m * tau((m - hist[HLL_Q + 1]) / m);
    for (int k = HLL_Q; k >= 1; k--)
        z = (z + hist[k]) * 0.5;
    z += m * sigma(hist[0] / m);
    return m * m / (2 * LN2 * z);
}

void hll_to_hex(const hll *h, char *buf)
{
    static const char digits[] = "0123456789abcdef";

    for (unsigned i = 0; i < HLL_M; i++) {
        buf[2 * i] = digits[h->reg[i] >> 4];
        buf[2 * i + 1] = digits[h->reg[i] & 15];
    }
    buf[HLL_HEX_LEN] = '\0';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int hll_from_hex(hll *h, const char *s, size_t len)
{
    if (len != HLL_HEX_LEN)
        return -1;
    for (unsigned i = 0; i < HLL_M; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0 || hi * 16 + lo > HLL_RANK_MAX)
            return -1;
        h->reg[i] = (uint8_t)(hi * 16 + lo);
    }
    return 0;
}
