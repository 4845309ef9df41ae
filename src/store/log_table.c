/*
 * log_table.c -- the memory store's sliding logs (log_table.h): find,
 * reserve and charge a client's log in one segment's table, grow the
 * table, and keep every byte within the store's budget.  The decisions
 * themselves are algo.c's (algo_log_apply, algo_log_commit); this file
 * only keeps the times.
 */
#include "log_table.h"
#include "algo.h"
#include "slots.h"

#include <stdlib.h>
#include <string.h>

#define LOG_MIN_TABLE 8u   /* slots of a segment's first table          */
#define LOG_MIN_TIMES 4u   /* times of a log's first array              */
#define LOG_EVICT_WINDOW 16u

static uint32_t next_of(uint32_t i, uint32_t cap)
{
    return i + 1 == cap ? 0 : i + 1;
}

static int dead(const log_slot *e, uint32_t now_s)
{
    return e->expires < now_s;
}

static void charge(const log_budget *b, int64_t delta)
{
    atomic_fetch_add(b->bytes, delta);
}

const log_slot *log_table_find(const log_table *lt, uint64_t fp,
                               uint32_t now_s)
{
    if (!lt->s)
        return NULL;
    for (uint32_t i = slots_home(fp, lt->cap);; i = next_of(i, lt->cap)) {
        const log_slot *e = &lt->s[i];
        if (e->fp == 0)
            return NULL;
        if (e->fp == fp)
            return dead(e, now_s) ? NULL : e;
    }
}

static void free_log(log_slot *e, const log_budget *b)
{
    charge(b, -(int64_t)e->cap * (int64_t)sizeof *e->t);
    free(e->t);
    e->t = NULL;
    e->n = e->cap = 0;
}

/* Remove slot i, shifting its probe run back (as slots_delete_at). */
static void delete_at(log_table *lt, uint32_t i, const log_budget *b)
{
    uint32_t j = i;

    free_log(&lt->s[i], b);
    lt->used--;
    for (;;) {
        lt->s[i] = (log_slot){0};
        for (;;) {
            j = next_of(j, lt->cap);
            if (lt->s[j].fp == 0)
                return;
            uint32_t h = slots_home(lt->s[j].fp, lt->cap);
            if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
                break;
        }
        lt->s[i] = lt->s[j];
        i = j;
    }
}

static void purge(log_table *lt, uint32_t now_s, const log_budget *b)
{
    for (uint32_t i = 0; i < lt->cap;) {
        if (lt->s[i].fp && dead(&lt->s[i], now_s))
            delete_at(lt, i, b);
        else
            i++;
    }
}

static void evict_near(log_table *lt, uint64_t fp, const log_budget *b)
{
    uint32_t i = slots_home(fp, lt->cap), best = UINT32_MAX;

    for (uint32_t k = 0; k < lt->cap &&
                         (k < LOG_EVICT_WINDOW || best == UINT32_MAX); k++) {
        if (lt->s[i].fp && lt->s[i].fp != fp &&
            (best == UINT32_MAX || lt->s[i].expires < lt->s[best].expires))
            best = i;
        i = next_of(i, lt->cap);
    }
    if (best != UINT32_MAX) {
        delete_at(lt, best, b);
        lt->evictions++;
    }
}

/* Move the live logs into a table of new_cap slots (expired ones are
 * freed).  -1: out of memory, nothing changed. */
static int rebuild(log_table *lt, uint32_t new_cap, uint32_t now_s,
                   const log_budget *b)
{
    log_slot *s = calloc(new_cap, sizeof *s);
    uint32_t used = 0;

    if (!s)
        return -1;
    for (uint32_t i = 0; i < lt->cap; i++) {
        log_slot *e = &lt->s[i];
        if (e->fp == 0)
            continue;
        if (dead(e, now_s)) {
            free_log(e, b);
            continue;
        }
        uint32_t j = slots_home(e->fp, new_cap);
        while (s[j].fp)
            j = next_of(j, new_cap);
        s[j] = *e;
        used++;
    }
    charge(b, ((int64_t)new_cap - (int64_t)lt->cap) * (int64_t)sizeof *s);
    free(lt->s);
    lt->s = s;
    lt->cap = new_cap;
    lt->used = used;
    return 0;
}

/* Room for one more slot: grow at 3/4 load, within the budget; at the
 * cap drop expired logs, then evict one near fp's home. */
static int make_room(log_table *lt, uint64_t fp, uint32_t now_s,
                     const log_budget *b)
{
    uint32_t grown = lt->cap ? lt->cap * 2 : LOG_MIN_TABLE;
    int64_t extra = (int64_t)(grown - lt->cap) * (int64_t)sizeof(log_slot);

    if (lt->s && (lt->used + 1) * 4 <= lt->cap * 3)
        return 0;
    if (!lt->s || atomic_load(b->bytes) + extra <= b->max_bytes)
        return rebuild(lt, grown, now_s, b);
    purge(lt, now_s, b);
    if ((lt->used + 1) * 4 > lt->cap * 3)
        evict_near(lt, fp, b);
    return 0;
}

/* fp's slot (live or expired), else a slot for it: the first expired
 * one on its path (its array reused), else the empty one ending it. */
static log_slot *slot_for(log_table *lt, uint64_t fp, uint32_t now_s)
{
    log_slot *reuse = NULL;

    for (uint32_t i = slots_home(fp, lt->cap);; i = next_of(i, lt->cap)) {
        log_slot *e = &lt->s[i];
        if (e->fp == fp)
            return e;
        if (e->fp == 0) {
            if (reuse)
                return reuse;
            lt->used++;
            return e;
        }
        if (!reuse && dead(e, now_s))
            reuse = e;
    }
}

/* An array of at least `need` times: doubling from LOG_MIN_TIMES, never
 * past what the largest limit needs unless asked. */
static uint32_t times_for(size_t need)
{
    uint32_t cap = LOG_MIN_TIMES;

    while (cap < need)
        cap *= 2;
    if (cap > RL_LOG_LIMIT_MAX && need <= RL_LOG_LIMIT_MAX)
        cap = RL_LOG_LIMIT_MAX;
    return cap;
}

/* Bring the budget back under max_bytes before `grow` more bytes are
 * taken: drop expired logs, then evict a few near fp's home (never fp's
 * own).  What still passes the cap is at most one log's array. */
static void within_budget(log_table *lt, uint64_t fp, int64_t grow,
                          uint32_t now_s, const log_budget *b)
{
    if (!lt->s || atomic_load(b->bytes) + grow <= b->max_bytes)
        return;
    purge(lt, now_s, b);
    for (int k = 0; k < 4 && lt->used > 1 &&
                    atomic_load(b->bytes) + grow > b->max_bytes; k++)
        evict_near(lt, fp, b);
}

int log_table_reserve(log_table *lt, uint64_t fp, size_t need,
                      uint32_t now_s, const log_budget *b)
{
    const log_slot *have = log_table_find(lt, fp, now_s);
    uint32_t cur = have ? have->cap : 0, cap;
    log_slot *e;

    if (have && cur >= need) /* the common case: room already */
        return 0;
    cap = times_for(need);
    if (need > cur)
        within_budget(lt, fp, ((int64_t)cap - cur) * (int64_t)sizeof(int64_t),
                      now_s, b);
    if (!log_table_find(lt, fp, now_s) && make_room(lt, fp, now_s, b) != 0)
        return -1;
    e = slot_for(lt, fp, now_s);
    if (e->fp != fp || dead(e, now_s)) { /* new, or a dead one reused */
        e->fp = fp;
        e->n = 0;
        e->expires = now_s; /* live until the commit sets its expiry */
    }
    if (e->cap < need) {
        int64_t *t = realloc(e->t, cap * sizeof *t);
        if (!t)
            return -1;
        charge(b, ((int64_t)cap - (int64_t)e->cap) * (int64_t)sizeof *t);
        e->t = t;
        e->cap = cap;
    }
    return 0;
}

void log_table_commit(log_table *lt, uint64_t fp, size_t drop, int64_t at,
                      int64_t cost, uint32_t expires)
{
    log_slot *e = NULL;

    for (uint32_t i = lt->s ? slots_home(fp, lt->cap) : 0; lt->s;
         i = next_of(i, lt->cap)) {
        if (lt->s[i].fp == 0)
            break;
        if (lt->s[i].fp == fp) {
            e = &lt->s[i];
            break;
        }
    }
    if (!e || e->n < drop || e->cap < e->n - drop + (size_t)cost)
        return; /* evicted since its reserve */
    e->n = (uint32_t)algo_log_commit(e->t, e->n, drop, at, cost);
    e->expires = expires;
}

void log_table_free(log_table *lt, const log_budget *b)
{
    for (uint32_t i = 0; lt->s && i < lt->cap; i++)
        if (lt->s[i].fp)
            free_log(&lt->s[i], b);
    charge(b, -(int64_t)lt->cap * (int64_t)sizeof(log_slot));
    free(lt->s);
    *lt = (log_table){0};
}
