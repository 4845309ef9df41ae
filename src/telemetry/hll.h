/*
 * hll.h -- a HyperLogLog sketch: about how many distinct keys were seen, in
 * a fixed 1 KiB whatever their number, and mergeable across processes (the
 * union of two sketches is their registers' maximum).
 *
 * Precision p = 10: 1024 one-byte registers, a relative standard error of
 * 1.04 / sqrt(1024) = 3.25 % (99.7 % of estimates within 3 x that, 9.75 %).
 * Chosen for the dry-run reports (src/telemetry/dryrun.c): an operator asks "about
 * how many clients would this rule reject", 1 KiB per log-mode rule in
 * memory and 2 KiB of hex per limiter in Redis every few seconds; p = 12
 * would halve the error at four times both.
 *
 * A key is hashed with hash_bytes() under the fixed HLL_SEED (every
 * process of a fleet, whatever its version, must place a key in the same
 * register for merged sketches to mean anything); the hash's top p bits
 * pick the register, and the register keeps the largest rank seen: 1 + the
 * number of leading zeros of the remaining 54 bits (55 when they are all
 * zero).
 *
 * The estimate is Ertl's improved estimator ("New cardinality estimation
 * algorithms for HyperLogLog sketches", 2017; the one Redis's PFCOUNT
 * uses): it folds the small-range correction (linear counting on the empty
 * registers) into one formula over the registers' histogram, so there is
 * no switch-over point and none of the classic estimator's bias bump
 * between 2.5 m and 5 m keys.  With a 64-bit hash no large-range
 * correction is needed.
 */
#ifndef RL_HLL_H
#define RL_HLL_H

#include <stddef.h>
#include <stdint.h>

#define HLL_P 10
#define HLL_M (1u << HLL_P)           /* registers                      */
#define HLL_RANK_MAX (64 - HLL_P + 1) /* the largest register value: 55 */
#define HLL_HEX_LEN (2 * HLL_M)       /* the registers in hex           */
#define HLL_SEED 0x52cb9d7aa01f6e3bULL /* hash_bytes() seed: fixed for
                                          ever, or sketches stop merging */

typedef struct hll {
    uint8_t reg[HLL_M];
} hll;

/* The key's hash, and the register and rank it gives. */
uint64_t hll_hash(const void *key, size_t len);

static inline unsigned hll_index(uint64_t h)
{
    return (unsigned)(h >> (64 - HLL_P));
}

static inline uint8_t hll_rank(uint64_t h)
{
    uint64_t rest = h << HLL_P;

    return rest ? (uint8_t)(__builtin_clzll(rest) + 1) : HLL_RANK_MAX;
}

/* Count one key (plain memory: one thread; src/telemetry/dryrun.c keeps its own
 * atomic registers for the request path). */
void hll_add(hll *h, const void *key, size_t len);

/* into = the union of into and from. */
void hll_merge(hll *into, const hll *from);

/* The estimated number of distinct keys: 0 for an empty sketch. */
double hll_estimate(const hll *h);

/* The registers as HLL_HEX_LEN lower-case hex digits, register 0 first,
 * and a NUL (buf: HLL_HEX_LEN + 1 bytes). */
void hll_to_hex(const hll *h, char *buf);

/* Read exactly HLL_HEX_LEN hex digits (either case); 0, or -1 when a digit
 * is not hex or a register exceeds HLL_RANK_MAX (then *h is undefined). */
int hll_from_hex(hll *h, const char *s, size_t len);

#endif
