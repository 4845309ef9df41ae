/*
 * store_shm.c -- shm://NAME: rate-limit state in POSIX shared memory
 * (shm_open("/NAME") + mmap), so the processes of one host -- nginx
 * workers, a prefork server's children -- share one limit without Redis.
 *
 * The state is the memory store's: 32-byte entries keyed by a fingerprint
 * of (rule shape, SipHash of the client key), in 256 segments, each its own
 * open-addressing table (slots.c), and the algorithms of algo.c decide;
 * this file only holds the state and locks it.  Unlike the memory store's,
 * the segments cannot grow: the region is sized once, by option shm_size
 * (STORE_SHM_SIZE_MIN..MAX bytes), into a header, 256 segment headers and
 * 256 equal arrays of slots.  A segment holds at most 85 % of its slots.
 * When a new key finds its segment at that mark, the segment is scanned
 * for expired entries (at most once a second per segment); if it is still
 * full, the entry that expires soonest among the 16 slots from the new
 * key's home is evicted (that client starts afresh) and counted
 * (store_shm_stats.evictions, ratelimit(3)).  Nothing ever grows.
 *
 * Each segment is guarded by a process-shared, robust mutex.  A process
 * that dies holding one (kill -9, a crash) leaves it to the next locker,
 * which gets EOWNERDEAD, repairs the segment and marks the mutex
 * consistent.  What the dead holder may have left half done is bounded to
 * one entry: the slot it was writing (marked in the segment beforehand)
 * is dropped, so that client starts afresh under that rule; an entry it
 * was moving (a removal shifts its run back) is either whole in two slots
 * or whole in one with a half-written copy still marked empty
 * (slots_delete_at writes in that order), and the repair keeps one
 * reachable copy of each entry and recounts the segment.  Every other
 * entry keeps its state exactly.
 *
 * Creation and attaching: the first opener creates the object with
 * O_EXCL, reserves its memory (posix_fallocate, so a full /dev/shm fails
 * here and not with SIGBUS later), writes the header and every segment,
 * and last sets the header's `ready` word.  Later openers wait for that
 * word (at most SHM_WAIT_MS) and refuse a region whose magic, version,
 * layout (segment count, struct sizes) or size differs from theirs, with
 * the reason.  The client keys' SipHash key is the region's: the option
 * hash_key at creation, else random; a later opener whose hash_key option
 * differs is refused, one without it uses the region's.  The object is
 * made mode 0600: the processes sharing it run as one user, and its
 * header holds the hash key.
 *
 * Lifecycle: rl_limiter_free() unmaps the region and never removes it; it
 * persists (in /dev/shm) until someone removes it -- shm_unlink("/NAME"),
 * or rm /dev/shm/NAME -- which also resets every limit in it.  Removing it
 * while processes use it leaves them on the old region and the next
 * opener on a new one; stop them first.
 *
 * Clock: CLOCK_REALTIME, which every process of the host reads alike, in
 * ms; expiries count seconds from an epoch kept in the header.  Read under
 * the segment locks, so the charges to one entry are decided in order.
 */
#include "store_shm.h"
#include "clock.h"
#include "siphash.h"
#include "slots.h"
#include "slots_settle.h"
#include "wordlock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEG_BITS 8
#define NSEG (1u << SEG_BITS)
#define SEG_MIN_CAP 16u
#define LOAD_NUM 85           /* max load, percent (as the memory store) */
#define SHM_MAGIC 0x314d48534c52ULL /* "RLSHM1", little-endian            */
#define SHM_VERSION 1u
#define SHM_READY 0x52454459u /* the header's ready word once initialised */
#define SHM_WAIT_MS 2000      /* a later opener waits this long for it    */
#define SHM_MODE 0600
#define SHM_LOCK_SPINS 100    /* tries of a held segment lock, then sleep */

typedef struct shm_header {
    uint64_t magic;
    uint32_t version;
    _Atomic uint32_t ready;    /* SHM_READY: the creator is done        */
    uint64_t size;             /* bytes of the region                   */
    uint32_t nseg, seg_cap;    /* segments, slots in each               */
    uint32_t header_size, seg_size, entry_size, mutex_size;
    uint64_t hash_key[2];      /* the client keys' SipHash key          */
    int64_t epoch_s;           /* expiries count seconds from here      */
} __attribute__((aligned(64))) shm_header;

typedef struct shm_segment {
    pthread_mutex_t lock;      /* process-shared, robust                */
    uint32_t used, max_used;
    uint32_t full_until;       /* full: don't rescan before this second */
    uint32_t dirty_slot;       /* 1 + the slot being written; 0: none   */
    int64_t evictions;
    int64_t recoveries;        /* locks taken over from a dead holder   */
} __attribute__((aligned(64))) shm_segment;

typedef struct shm_store {
    rl_store base;
    rl_clock_fn clock_fn;      /* tests; NULL: CLOCK_REALTIME           */
    void *clock_arg;
    shm_header *hdr;           /* the mapping                           */
    shm_segment *seg;
    slot_entry *slots;
    size_t size;
    uint32_t cap;              /* slots per segment                     */
} shm_store;

static int64_t now_ms(const shm_store *m)
{
    return m->clock_fn ? m->clock_fn(m->clock_arg) : clock_wall_ms();
}

static slot_entry *seg_slots(const shm_store *m, uint32_t i)
{
    return m->slots + (size_t)i * m->cap;
}

static uint32_t seg_of(uint64_t key_hash)
{
    return (uint32_t)(key_hash >> (64 - SEG_BITS));
}

static uint32_t cap_for(int64_t size)
{
    int64_t room = size - (int64_t)sizeof(shm_header) -
                   (int64_t)NSEG * (int64_t)sizeof(shm_segment);
    return (uint32_t)(room / ((int64_t)NSEG * (int64_t)sizeof(slot_entry)));
}

_Static_assert(sizeof(slot_entry) == 32, "the region's entry is 32 bytes");
_Static_assert(STORE_SHM_SIZE_MAX / (NSEG * 32) < UINT32_MAX,
               "a segment's slots fit a uint32_t");

int store_shm_name_check(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);

    if (n < 1 || n > STORE_SHM_NAME_MAX)
        return snprintf(err, errlen, "shm://NAME: NAME must be 1..%d bytes",
                        STORE_SHM_NAME_MAX), -1;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || !strchr("._-", c)))
            return snprintf(err, errlen, "shm://NAME: NAME takes letters, "
                            "digits, '.', '_' and '-', and starts with a "
                            "letter or digit"), -1;
    }
    return 0;
}

/* ---- locking and repair ------------------------------------------------ */

/* The first slot holding fp on its probe path, or UINT32_MAX when an
 * empty slot (or a whole lap) comes first. */
static uint32_t probe_first(const slot_entry *s, uint32_t cap, uint64_t fp)
{
    uint32_t i = slots_home(fp, cap);

    for (uint32_t k = 0; k < cap; k++, i = i + 1 == cap ? 0 : i + 1) {
        if (s[i].fp == 0)
            return UINT32_MAX;
        if (s[i].fp == fp)
            return i;
    }
    return UINT32_MAX;
}

/* After a holder died: drop the slot it was writing, keep one reachable
 * copy of every other entry (re-placing one a half-done move left behind
 * an empty slot), recount.  Each step removes an entry or moves on; the
 * scan is bounded anyway, and past the bound the segment starts empty. */
static void repair(shm_store *m, shm_segment *g, slot_entry *s)
{
    uint32_t cap = m->cap, used = 0;
    uint64_t steps = 0;

    if (g->dirty_slot && g->dirty_slot <= cap) {
        if (s[g->dirty_slot - 1].fp)
            slots_delete_at(s, cap, g->dirty_slot - 1);
        else
            memset(&s[g->dirty_slot - 1], 0, sizeof *s);
    }
    g->dirty_slot = 0;
    for (uint32_t i = 0; i < cap; steps++) {
        uint32_t at;
        slot_entry e;
        int is_new;
        if (steps > 4 * (uint64_t)cap) {
            memset(s, 0, (size_t)cap * sizeof *s);
            break;
        }
        if (!s[i].fp || (at = probe_first(s, cap, s[i].fp)) == i) {
            i++;
            continue;
        }
        e = s[i];
        slots_delete_at(s, cap, i);
        if (at == UINT32_MAX) /* not reachable: place it again */
            *slots_for(s, cap, e.fp, 0, &is_new) = e;
    }
    for (uint32_t i = 0; i < cap; i++)
        used += s[i].fp != 0;
    g->used = used;
    g->full_until = 0;
    g->recoveries++;
}

/* Lock segment i; a lock whose holder died is repaired and taken over.
 * 0, or the error of a lock that cannot be made consistent.  A held lock
 * is tried again SHM_LOCK_SPINS times before sleeping on it: a robust
 * mutex sleeps at once (futex wait, and the holder's unlock a futex
 * wake), while a segment is held for a few hundred ns. */
static int seg_lock(shm_store *m, uint32_t i)
{
    shm_segment *g = &m->seg[i];
    int rc = pthread_mutex_trylock(&g->lock);

    for (int k = 0; rc == EBUSY && k < SHM_LOCK_SPINS; k++) {
        wordlock_relax();
        rc = pthread_mutex_trylock(&g->lock);
    }
    if (rc == EBUSY)
        rc = pthread_mutex_lock(&g->lock);

    if (rc == EOWNERDEAD) {
        repair(m, g, seg_slots(m, i));
        rc = pthread_mutex_consistent(&g->lock);
    }
    return rc;
}

/* Lock the distinct segments of seg[0..n) in ascending order into segs;
 * their count, or -1 (none left locked) if one cannot be taken. */
static int lock_all(shm_store *m, const uint32_t *seg, size_t n,
                    uint32_t *segs)
{
    size_t k = slots_lock_order(seg, n, segs);

    for (size_t i = 0; i < k; i++) {
        if (seg_lock(m, segs[i]) != 0) {
            while (i-- > 0)
                pthread_mutex_unlock(&m->seg[segs[i]].lock);
            return -1;
        }
    }
    return (int)k;
}

/* ---- the check -------------------------------------------------------- */

/* Write fp's state into segment g, making room as the file's top says. */
static void store_entry(shm_store *m, shm_segment *g, slot_entry *s,
                        uint64_t fp, const algo_state *st, uint32_t expires,
                        uint32_t now_s)
{
    int is_new;
    slot_entry *e = slots_for(s, m->cap, fp, now_s, &is_new);

    if (is_new && g->used + 1 > g->max_used) {
        if (now_s >= g->full_until) {
            g->full_until = now_s + 1;
            g->used -= slots_purge(s, m->cap, now_s);
        }
        if (g->used + 1 > g->max_used && slots_evict_near(s, m->cap, fp)) {
            g->used--;
            g->evictions++;
        }
        e = slots_for(s, m->cap, fp, now_s, &is_new);
    }
    g->dirty_slot = (uint32_t)(e - s) + 1;
    atomic_signal_fence(memory_order_seq_cst);
    g->used += (uint32_t)is_new;
    e->fp = fp;
    e->a = st->a;
    e->b = st->b;
    e->c = st->c;
    e->expires = expires;
    atomic_signal_fence(memory_order_seq_cst);
    g->dirty_slot = 0;
}

static uint32_t expiry_of(const shm_store *m, int64_t expires_ms)
{
    int64_t s = (expires_ms + 999) / 1000 - m->hdr->epoch_s;

    if (s < 1)
        return 1;
    return s > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

static uint32_t seconds_of(const shm_store *m, int64_t now)
{
    int64_t rel = now / 1000 - m->hdr->epoch_s;

    return rel < 0 ? 0 : rel > UINT32_MAX ? UINT32_MAX : (uint32_t)rel;
}

/* Decide ops[0..n) under their segments' locks.  Inlined twice into
 * shm_check(): once for one charge (n constant: its arrays scalars, its
 * loops gone; the usual request), once for many. */
static inline __attribute__((always_inline)) int
check_n(shm_store *m, const store_op *ops, size_t n, algo_decision *out,
        int64_t *now_out)
{
    uint64_t fps[RL_OPS_MAX], kh[RL_OPS_MAX], from[RL_OPS_MAX];
    uint32_t seg[RL_OPS_MAX], segs[RL_OPS_MAX], now_s;
    algo_state st[RL_OPS_MAX];
    int64_t now;
    int nseg, all = 1;
    size_t i;

    for (i = 0; i < n; i++) {
        kh[i] = siphash13(ops[i].key, ops[i].key_len, m->hdr->hash_key);
        fps[i] = slots_fingerprint(ops[i].rule->shape.state_seed, kh[i]);
        seg[i] = seg_of(kh[i]);
    }
    if ((nseg = lock_all(m, seg, n, segs)) < 0)
        return RL_ESTORE;
    now = now_ms(m);
    now_s = seconds_of(m, now);
    for (i = 0; i < n; i++) {
        slots_load_state(seg_slots(m, seg[i]), m->cap, &ops[i], fps[i], kh[i],
                         now, now_s, &st[i], &from[i]);
        algo_apply(&ops[i].rule->ap, &st[i], now, ops[i].cost, &out[i]);
        all &= out[i].allowed || ops[i].soft;
    }
    for (i = 0; all && i < n; i++) {
        shm_segment *g = &m->seg[seg[i]];
        slot_entry *sl = seg_slots(m, seg[i]);
        if (!out[i].allowed || !out[i].changed)
            continue;
        if (from[i])
            g->used -= (uint32_t)slots_drop(sl, m->cap, from[i]);
        store_entry(m, g, sl, fps[i], &st[i], expiry_of(m, out[i].expires_ms),
                    now_s);
    }
    while (nseg-- > 0)
        pthread_mutex_unlock(&m->seg[segs[nseg]].lock);
    *now_out = now;
    return RL_OK;
}

/* As the memory store's check (store.h): decide every charge on a copy of
 * the state, keep them only if all pass. */
static int shm_check(rl_store *s, const store_op *ops, size_t n,
                     algo_decision *out, int64_t *now_out)
{
    shm_store *m = (shm_store *)s;

    if (n == 1)
        return check_n(m, ops, 1, out, now_out);
    if (n == 0 || n > RL_OPS_MAX)
        return RL_EINVAL;
    return check_n(m, ops, n, out, now_out);
}

static void shm_free(rl_store *s)
{
    shm_store *m = (shm_store *)s;

    if (m->hdr)
        munmap(m->hdr, m->size);
    free(m);
}

static void shm_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    shm_store *m = (shm_store *)s;

    m->clock_fn = fn;
    m->clock_arg = arg;
}

/* ---- settling a reservation (settle.h) ---------------------------------- */

/* Settle op i of ss in segment si (locked), as the memory store does:
 * its marker written if absent, its state changed.  1 if settled now. */
/* The op's segment, as slots_settle_op finds and writes in it. */
typedef struct shm_seg_ref {
    shm_store *m;
    uint32_t si;
} shm_seg_ref;

static slot_entry *shm_settle_find(void *arg, uint64_t fp, uint32_t now_s)
{
    const shm_seg_ref *r = arg;

    return slots_find(seg_slots(r->m, r->si), r->m->cap, fp, now_s);
}

static void shm_settle_put(void *arg, uint64_t fp, const algo_state *st,
                           int64_t expires_ms, uint32_t keep, uint32_t now_s)
{
    const shm_seg_ref *r = arg;
    uint32_t x = expiry_of(r->m, expires_ms);

    store_entry(r->m, &r->m->seg[r->si], seg_slots(r->m, r->si), fp, st,
                x > keep ? x : keep, now_s);
}

static int shm_settle(rl_store *s, const store_settle *ss, size_t *settled)
{
    shm_store *m = (shm_store *)s;
    uint64_t kh[RL_OPS_MAX];
    uint32_t seg[RL_OPS_MAX], segs[RL_OPS_MAX], now_s;
    int64_t now;
    int nseg;

    *settled = 0;
    if (ss->n == 0 || ss->n > RL_OPS_MAX)
        return RL_EINVAL;
    for (size_t i = 0; i < ss->n; i++) {
        kh[i] = siphash13(ss->ops[i].key, ss->ops[i].key_len,
                          m->hdr->hash_key);
        seg[i] = seg_of(kh[i]);
    }
    if ((nseg = lock_all(m, seg, ss->n, segs)) < 0)
        return RL_ESTORE;
    now = now_ms(m);
    now_s = seconds_of(m, now);
    for (size_t i = 0; i < ss->n; i++) {
        shm_seg_ref r = {.m = m, .si = seg[i]};
        slots_settle_io io = {.find = shm_settle_find, .put = shm_settle_put,
                              .arg = &r};

        *settled += (size_t)slots_settle_op(&io, ss, i, kh[i], now, now_s);
    }
    while (nseg-- > 0)
        pthread_mutex_unlock(&m->seg[segs[nseg]].lock);
    return RL_OK;
}

/* No breaker, no check_many, no start: like the memory store's, a check
 * never waits on I/O (only on a segment lock, held for a few slots). */
static const store_vtable shm_vtable = {
    .name = "shm",
    .local = 1,
    .check = shm_check,
    .free = shm_free,
    .set_clock = shm_set_clock,
    .settle = shm_settle,
};

/* ---- creating and attaching ------------------------------------------- */

static int init_mutex(pthread_mutex_t *mu)
{
    pthread_mutexattr_t at;
    int rc = pthread_mutexattr_init(&at);

    if (rc != 0)
        return rc;
    rc = pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init(mu, &at);
    pthread_mutexattr_destroy(&at);
    return rc;
}

/* The layout words of a region of `size` bytes made by this build. */
static void layout_of(shm_header *h, int64_t size)
{
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->size = (uint64_t)size;
    h->nseg = NSEG;
    h->seg_cap = cap_for(size);
    h->header_size = sizeof(shm_header);
    h->seg_size = sizeof(shm_segment);
    h->entry_size = sizeof(slot_entry);
    h->mutex_size = sizeof(pthread_mutex_t);
}

static void set_view(shm_store *m, void *map, size_t size)
{
    m->hdr = map;
    m->size = size;
    m->seg = (shm_segment *)((char *)map + sizeof(shm_header));
    m->slots = (slot_entry *)(m->seg + NSEG);
    m->cap = m->hdr->seg_cap;
}

/* The creator: reserve, map, write every segment, then the ready word. */
static int create(shm_store *m, int fd, const char *name, int64_t size,
                  const uint64_t *key, char *err, size_t errlen)
{
    int rc = posix_fallocate(fd, 0, size);
    void *map;

    if (rc == EOPNOTSUPP || rc == EINVAL)
        rc = ftruncate(fd, size) != 0 ? errno : 0;
    if (rc != 0)
        return snprintf(err, errlen, "shm://%s: cannot reserve %lld bytes: "
                        "%s", name, (long long)size, strerror(rc)), RL_ESTORE;
    map = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return snprintf(err, errlen, "shm://%s: mmap: %s", name,
                        strerror(errno)), RL_ESTORE;
    set_view(m, map, (size_t)size);
    layout_of(m->hdr, size);
    m->cap = m->hdr->seg_cap;
    if (key)
        memcpy(m->hdr->hash_key, key, sizeof m->hdr->hash_key);
    else
        siphash_random_key(m->hdr->hash_key);
    m->hdr->epoch_s = clock_wall_ms() / 1000 - 1;
    for (uint32_t i = 0; i < NSEG; i++) {
        m->seg[i].max_used = (uint32_t)((uint64_t)m->cap * LOAD_NUM / 100);
        if ((rc = init_mutex(&m->seg[i].lock)) != 0)
            return snprintf(err, errlen, "shm://%s: a process-shared robust "
                            "mutex: %s", name, strerror(rc)), RL_ESTORE;
    }
    atomic_store_explicit(&m->hdr->ready, SHM_READY, memory_order_release);
    return RL_OK;
}

/* Wait (at most SHM_WAIT_MS) until pred(fd or the mapping) holds. */
static int wait_until(int (*pred)(int fd, const shm_store *m), int fd,
                      const shm_store *m)
{
    int64_t deadline = clock_mono_ms() + SHM_WAIT_MS;
    struct timespec ms = {.tv_nsec = 1000000};

    while (!pred(fd, m)) {
        if (clock_mono_ms() > deadline)
            return -1;
        nanosleep(&ms, NULL);
    }
    return 0;
}

/* posix_fallocate sets the size once every page is reserved. */
static int sized(int fd, const shm_store *m)
{
    struct stat sb;

    (void)m;
    return fstat(fd, &sb) == 0 && sb.st_size >= (off_t)sizeof(shm_header);
}

static int ready(int fd, const shm_store *m)
{
    (void)fd;
    return atomic_load_explicit(&m->hdr->ready, memory_order_acquire) ==
           SHM_READY;
}

/* A region someone else made: the same format, size and hash key, or a
 * refusal saying which differs. */
static int verify(const shm_store *m, const char *name, int64_t size,
                  const uint64_t *key, char *err, size_t errlen)
{
    shm_header want;
    const shm_header *h = m->hdr;

    if (h->magic != SHM_MAGIC || h->version != SHM_VERSION)
        return snprintf(err, errlen, "shm://%s: /dev/shm/%s is not a "
                        "version %u libratelimit region", name, name,
                        SHM_VERSION), RL_ESTORE;
    layout_of(&want, (int64_t)h->size);
    if (h->size != m->size || h->nseg != want.nseg ||
        h->seg_cap != want.seg_cap || h->header_size != want.header_size ||
        h->seg_size != want.seg_size || h->entry_size != want.entry_size ||
        h->mutex_size != want.mutex_size)
        return snprintf(err, errlen, "shm://%s: the region's layout differs "
                        "from this build's (remove /dev/shm/%s)", name, name),
               RL_ESTORE;
    if ((int64_t)h->size != size)
        return snprintf(err, errlen, "shm://%s: the region is %llu bytes, "
                        "shm_size is %lld (set it to match, or remove "
                        "/dev/shm/%s)", name, (unsigned long long)h->size,
                        (long long)size, name), RL_ESTORE;
    if (key && memcmp(key, h->hash_key, sizeof h->hash_key) != 0)
        return snprintf(err, errlen, "shm://%s: the region was made with "
                        "another hash_key", name), RL_ESTORE;
    return RL_OK;
}

/* A later opener: wait for the creator, map, verify. */
static int join(shm_store *m, int fd, const char *name, int64_t size,
                const uint64_t *key, char *err, size_t errlen)
{
    struct stat sb;
    void *map;

    if (wait_until(sized, fd, m) != 0 || fstat(fd, &sb) != 0)
        return snprintf(err, errlen, "shm://%s: the region was not sized "
                        "within %d ms (its creator died? remove /dev/shm/%s)",
                        name, SHM_WAIT_MS, name), RL_ESTORE;
    map = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
               fd, 0);
    if (map == MAP_FAILED)
        return snprintf(err, errlen, "shm://%s: mmap: %s", name,
                        strerror(errno)), RL_ESTORE;
    m->hdr = map;
    m->size = (size_t)sb.st_size;
    if (wait_until(ready, fd, m) != 0)
        return snprintf(err, errlen, "shm://%s: the region was not "
                        "initialised within %d ms (its creator died? remove "
                        "/dev/shm/%s)", name, SHM_WAIT_MS, name), RL_ESTORE;
    if (m->size < sizeof(shm_header) + NSEG * sizeof(shm_segment))
        return snprintf(err, errlen, "shm://%s: the region is too small",
                        name), RL_ESTORE;
    set_view(m, map, m->size);
    return verify(m, name, size, key, err, errlen);
}

/* Create the object, or open the one that is there (a few tries, should
 * it be removed between the two). */
static int open_region(shm_store *m, const char *name, int64_t size,
                       const uint64_t *key, char *err, size_t errlen)
{
    char path[STORE_SHM_NAME_MAX + 2];
    int rc = RL_ESTORE;

    snprintf(path, sizeof path, "/%s", name);
    for (int tries = 0; tries < 3; tries++) {
        int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
                          SHM_MODE);
        if (fd >= 0) {
            if ((rc = create(m, fd, name, size, key, err, errlen)) != RL_OK)
                shm_unlink(path);
            close(fd);
            return rc;
        }
        if (errno == EEXIST)
            fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0 && errno == ENOENT)
            continue;
        if (fd < 0)
            return snprintf(err, errlen, "shm://%s: %s", name,
                            strerror(errno)), RL_ESTORE;
        rc = join(m, fd, name, size, key, err, errlen);
        close(fd);
        return rc;
    }
    return snprintf(err, errlen, "shm://%s: removed while being opened",
                    name), RL_ESTORE;
}

int store_shm_new(const char *uri, const store_options *opt, rl_store **out,
                  char *err, size_t errlen)
{
    const char *name = uri + strlen(STORE_SHM_SCHEME);
    int64_t size = opt->shm_size ? opt->shm_size : STORE_SHM_SIZE_DEFAULT;
    shm_store *m;
    int rc;

    if (store_shm_name_check(name, err, errlen) != 0)
        return RL_EOPTION;
    if (size < STORE_SHM_SIZE_MIN || size > STORE_SHM_SIZE_MAX)
        return snprintf(err, errlen, "shm_size: must be %lld..%lld",
                        STORE_SHM_SIZE_MIN, STORE_SHM_SIZE_MAX), RL_EOPTION;
    if (!(m = calloc(1, sizeof *m)))
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    m->base.vt = &shm_vtable;
    if ((rc = open_region(m, name, size, opt->hash_key, err, errlen)) != RL_OK) {
        shm_free(&m->base);
        return rc;
    }
    *out = &m->base;
    return RL_OK;
}

/* ---- tests and benchmarks --------------------------------------------- */

void store_shm_stats_get(rl_store *s, store_shm_stats *st)
{
    shm_store *m = (shm_store *)s;

    memset(st, 0, sizeof *st);
    for (uint32_t i = 0; i < NSEG; i++) {
        shm_segment *g = &m->seg[i];
        if (seg_lock(m, i) != 0)
            continue;
        st->slots += g->used;
        st->evictions += g->evictions;
        st->recoveries += g->recoveries;
        pthread_mutex_unlock(&g->lock);
    }
    st->capacity = (int64_t)m->cap * NSEG;
    st->bytes = (int64_t)m->size;
}

unsigned store_shm_segment_of(rl_store *s, const char *key, size_t key_len)
{
    shm_store *m = (shm_store *)s;

    return seg_of(siphash13(key, key_len, m->hdr->hash_key));
}

void store_shm_test_hold(rl_store *s, unsigned seg, int torn)
{
    shm_store *m = (shm_store *)s;
    slot_entry *sl = seg_slots(m, seg);

    (void)seg_lock(m, seg);
    for (uint32_t i = 0; torn && i < m->cap; i++) {
        if (sl[i].fp) { /* as if killed with one word written */
            m->seg[seg].dirty_slot = i + 1;
            sl[i].b += 500;
            break;
        }
    }
}
