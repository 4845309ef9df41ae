/*
 * redis_key.h -- the names of a (client, rule)'s state in Redis, and their
 * cluster slot.
 *
 * Plain layout: one string key per (client, rule),
 *   rl:{<client key>}:<rule id>:<shape>
 * Compact layout: many clients per small hash; the client key is hashed to
 * 64 bits, 16 of which pick a bucket (in the key's hash tag) and 31 a field:
 *   rlc:{<bucket>}:<rule id>:<shape>
 * (the script appends :<epoch>).  <shape> is the rule's (rule.h): the
 * algorithm's letter and the window in seconds, and for token bucket and
 * GCRA, whose stored numbers are in units of the rate and the size, the
 * limit and the burst ("t60:100:20"), so no state is read in another
 * shape's units.  A state under a shape the rule replaced has the same
 * name with that shape: the script finds it by replacing the shape, in the
 * same hash tag, so the same cluster slot.  Either way the hash tag gives
 * all of one client's rules one cluster slot.
 */
#ifndef RL_REDIS_KEY_H
#define RL_REDIS_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "ratelimit.h"
#include "store.h"

#define REDIS_KEY_MAX (RL_KEY_MAX + RL_RULE_ID_MAX + 40)
#define REDIS_FIELD_MAX 12

/* 1 if a state under these numbers fits the compact layout: its stored
 * numbers stay below 2^52, where Lua's doubles are exact.  Rules that do
 * not fit keep the plain layout. */
int redis_key_compact_ok(const algo_params *ap);

/* The op's key name into key[REDIS_KEY_MAX]; with compact set (and the op
 * fitting it) its field into field[REDIS_FIELD_MAX], else field is "".
 * Returns the key's length; *field_len gets the field's. */
size_t redis_key(const store_op *op, int compact, char *key, char *field,
                 size_t *field_len);

/* The op's cluster slot. */
unsigned redis_key_slot(const store_op *op, int compact);

#endif
