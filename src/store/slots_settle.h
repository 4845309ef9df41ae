/*
 * slots_settle.h -- one op of a settle (rl_settle) on a slots.h table, the
 * step the memory store and the shared-memory store share: the op's marker
 * first (none yet and the charge still counts, or nothing is done), then
 * the client's state changed by settle.c's maths, its life never shortened.
 * The stores differ only in how they find and write an entry in the op's
 * locked segment (the memory store may rebuild its table while writing),
 * which they hand in as two calls.
 */
#ifndef RL_SLOTS_SETTLE_H
#define RL_SLOTS_SETTLE_H

#include <stddef.h>
#include <stdint.h>

#include "settle.h"
#include "slots.h"

typedef struct slots_settle_io {
    /* fp's live entry in the op's segment, or NULL. */
    slot_entry *(*find)(void *arg, uint64_t fp, uint32_t now_s);
    /* Write fp's state, to expire at expires_ms (epoch ms) but not before
     * keep (the store's seconds, 0: no floor). */
    void (*put)(void *arg, uint64_t fp, const algo_state *st,
                int64_t expires_ms, uint32_t keep, uint32_t now_s);
    void *arg;
} slots_settle_io;

/* Settle ss->ops[i] (key hash kh) at now (now_s in the store's seconds),
 * its segment locked by the caller: 1 if settled now, 0 if it was already
 * or its charge no longer counts. */
int slots_settle_op(const slots_settle_io *io, const store_settle *ss,
                    size_t i, uint64_t kh, int64_t now, uint32_t now_s);

#endif
