/*
 * hash.h -- the 64-bit hash used for rule lookup, fingerprints and the
 * compact layout's default.  A wyhash-style multiply-mix: fast on short
 * keys, well distributed in every bit.  It is unkeyed, so anyone can
 * compute it: what clients choose (their keys) is hashed with SipHash
 * under a secret instead (siphash.h), and hash_mix() only combines that
 * with a rule's seed into the memory store's fingerprint.
 */
#ifndef RL_HASH_H
#define RL_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t hash_bytes(const void *data, size_t len, uint64_t seed);

/* Mix two hashes into one (order matters). */
static inline uint64_t hash_mix(uint64_t a, uint64_t b)
{
    __uint128_t m = (__uint128_t)(a ^ 0xa0761d6478bd642fULL) *
                    (b ^ 0xe7037ed1a0b428dbULL);
    return (uint64_t)(m >> 64) ^ (uint64_t)m;
}

#endif
