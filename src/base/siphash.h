/*
 * siphash.h -- SipHash-1-3, a keyed hash: without its 128-bit key nobody
 * can pick inputs that collide, however many they try.  The memory store
 * hashes client keys with it under a key drawn at start, so a client who
 * chooses its own key (a user id, an API key) cannot pile its keys into
 * one segment; the compact Redis layout uses it under the fleet's
 * configured hash_key.
 */
#ifndef RL_SIPHASH_H
#define RL_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t siphash13(const void *data, size_t len, const uint64_t key[2]);

#define SIPHASH_KEY_HEX 32 /* hex digits of a key written out */

/* The key written as 32 hex digits (its 16 bytes in order, either case)
 * into key; 0, or -1 if hex is not that. */
int siphash_key_parse(const char *hex, uint64_t key[2]);

/* 16 bytes from the kernel (getrandom()) into key; if that fails, bytes
 * from the clock and addresses, which still differ from run to run. */
void siphash_random_key(uint64_t key[2]);

#endif
