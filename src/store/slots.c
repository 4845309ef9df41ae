/*
 * slots.c -- the open-addressing table of rate-limit state (slots.h): look
 * up, place, remove and evict 32-byte entries in a segment's array, and
 * load a client's state (converting it from a rule's previous shape).
 * Shared by the memory store (store_memory.c, whose segments grow) and the
 * shared-memory store (store_shm.c, whose segments are fixed in a mapped
 * region); what each does when a segment runs full is its own.
 */
#include "slots.h"
#include "hash.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static uint32_t next_of(uint32_t i, uint32_t cap)
{
    return i + 1 == cap ? 0 : i + 1;
}

uint64_t slots_fingerprint(uint64_t state_seed, uint64_t key_hash)
{
    uint64_t fp = hash_mix(state_seed, key_hash);
    return fp ? fp : 1;
}

slot_entry *slots_find(slot_entry *s, uint32_t cap, uint64_t fp,
                       uint32_t now_s)
{
    for (uint32_t i = slots_home(fp, cap);; i = next_of(i, cap)) {
        slot_entry *e = &s[i];
        if (e->fp == 0)
            return NULL;
        if (e->fp == fp)
            return slots_dead(e, now_s) ? NULL : e;
    }
}

slot_entry *slots_for(slot_entry *s, uint32_t cap, uint64_t fp,
                      uint32_t now_s, int *is_new)
{
    slot_entry *reuse = NULL;

    for (uint32_t i = slots_home(fp, cap);; i = next_of(i, cap)) {
        slot_entry *e = &s[i];
        if (e->fp == fp) {
            *is_new = 0;
            return e;
        }
        if (e->fp == 0) {
            *is_new = reuse == NULL;
            return reuse ? reuse : e;
        }
        if (!reuse && slots_dead(e, now_s))
            reuse = e;
    }
}

/* Shift later entries of the same probe run back, so every remaining key
 * stays reachable from its home slot.  A move writes the state before the
 * fingerprint, and empties the old slot only after: a process killed in
 * the middle (shm://) leaves either a half-written slot still marked empty
 * or two whole copies of one entry, which store_shm.c's repair handles.
 * The fences only keep the compiler's order; they cost nothing. */
void slots_delete_at(slot_entry *s, uint32_t cap, uint32_t i)
{
    uint32_t j = i;

    for (;;) {
        atomic_signal_fence(memory_order_seq_cst);
        s[i].fp = 0;
        for (;;) {
            j = next_of(j, cap);
            if (s[j].fp == 0)
                return;
            uint32_t h = slots_home(s[j].fp, cap);
            /* Move it if its home is not cyclically within (i, j]. */
            if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
                break;
        }
        s[i].a = s[j].a;
        s[i].b = s[j].b;
        s[i].c = s[j].c;
        s[i].expires = s[j].expires;
        atomic_signal_fence(memory_order_seq_cst);
        s[i].fp = s[j].fp;
        i = j;
    }
}

int slots_drop(slot_entry *s, uint32_t cap, uint64_t fp)
{
    for (uint32_t i = slots_home(fp, cap);; i = next_of(i, cap)) {
        if (s[i].fp == 0)
            return 0;
        if (s[i].fp == fp) {
            slots_delete_at(s, cap, i);
            return 1;
        }
    }
}

int slots_evict_near(slot_entry *s, uint32_t cap, uint64_t fp)
{
    uint32_t i = slots_home(fp, cap), best = UINT32_MAX;

    for (uint32_t k = 0;
         k < cap && (k < SLOTS_EVICT_WINDOW || best == UINT32_MAX); k++) {
        if (s[i].fp && (best == UINT32_MAX || s[i].expires < s[best].expires))
            best = i;
        i = next_of(i, cap);
    }
    if (best == UINT32_MAX)
        return 0;
    slots_delete_at(s, cap, best);
    return 1;
}

/* A deletion only moves entries back onto the slot it emptied (or ones
 * after it), so re-examining slot i after each one sees every entry; each
 * step either removes an entry or moves on, so the scan ends. */
uint32_t slots_purge(slot_entry *s, uint32_t cap, uint32_t now_s)
{
    uint32_t removed = 0;

    for (uint32_t i = 0; i < cap;) {
        if (s[i].fp && slots_dead(&s[i], now_s)) {
            slots_delete_at(s, cap, i);
            removed++;
        } else {
            i++;
        }
    }
    return removed;
}

slot_entry *slots_load_state(slot_entry *s, uint32_t cap, const store_op *op,
                             uint64_t fp, uint64_t key_hash, int64_t now,
                             uint32_t now_s, algo_state *st, uint64_t *from)
{
    const rl_rule *r = op->rule;
    slot_entry *e = slots_find(s, cap, fp, now_s);

    *from = 0;
    if (e) {
        *st = (algo_state){e->a, e->b, e->c};
        return e;
    }
    *st = (algo_state){0, 0, 0};
    for (int k = 0; !e && k < r->nprev; k++) {
        const rule_shape *p = &r->prev[k];
        uint64_t pfp;
        if (p->until_ms <= now)
            continue;
        pfp = slots_fingerprint(p->state_seed, key_hash);
        if ((e = slots_find(s, cap, pfp, now_s))) {
            algo_state old = {e->a, e->b, e->c};
            algo_convert(&p->ap, &old, &r->ap, p->since_ms, now, st);
            *from = pfp;
        }
    }
    /* No state under any shape: what the newest replaced shape may have
     * held before it expired, at worst (algo.h). */
    if (!e && r->nprev && r->prev[0].until_ms > now)
        algo_convert_unknown(&r->prev[0].ap, &r->ap, r->prev[0].since_ms,
                             now, st);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

size_t slots_lock_order(const uint32_t *seg, size_t n, uint32_t *segs)
{
    size_t k = 0;

    if (n == 1) { /* the usual request: one rule */
        segs[0] = seg[0];
        return 1;
    }
    memcpy(segs, seg, n * sizeof *segs);
    qsort(segs, n, sizeof *segs, cmp_u32);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || segs[k - 1] != segs[i])
            segs[k++] = segs[i];
    return k;
}
