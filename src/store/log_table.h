/*
 * log_table.h -- the memory store's sliding logs (RL_ALGO_SLIDING_LOG),
 * kept beside its 32-byte slots because a log does not fit in one.
 *
 * One log_table per segment of the memory store, used under that
 * segment's lock (the caller's).  Each tracked (rule, key) is one 32-byte
 * log_slot (the same fingerprint as a slot's) pointing at an array of its
 * times, oldest first, grown by doubling to what a charge needs: at most
 * the rule's limit, itself at most RL_LOG_LIMIT_MAX (8 KiB).  Arrays are
 * allocated when a client first charges (or its log must grow), never on
 * a check that charges nothing, and reused when an expired client's slot
 * is taken by a new one.  Open addressing with linear probing and
 * backward-shift deletion, as slots.c; the table doubles at 3/4 load,
 * dropping expired logs.  Every byte is counted into the store's
 * allocation, which memory_max_bytes caps: at the cap a new log first
 * drops the expired ones, then evicts, among the 16 slots from its home,
 * the log that expires soonest (that client starts afresh), as the
 * slots do.
 */
#ifndef RL_LOG_TABLE_H
#define RL_LOG_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct log_slot {
    uint64_t fp;       /* 0 = empty slot                              */
    int64_t *t;        /* times (ms), oldest first; cap of them       */
    uint32_t n, cap;
    uint32_t expires;  /* seconds since the store's epoch             */
    uint32_t pad;
} log_slot;

typedef struct log_table {
    log_slot *s;       /* NULL until the segment's first log          */
    uint32_t cap, used;
    int64_t evictions; /* live logs dropped because of the cap        */
} log_table;

/* The store's allocation count and cap, which the logs share. */
typedef struct log_budget {
    _Atomic int64_t *bytes;
    int64_t max_bytes;
} log_budget;

/* fp's live log, or NULL (none, or expired: the client is fresh). */
const log_slot *log_table_find(const log_table *lt, uint64_t fp,
                               uint32_t now_s);

/* Make sure fp has a log with room for `need` times (an expired one is
 * emptied), evicting at the cap.  Returns 0, or -1 when memory runs out
 * (nothing of fp's log changed). */
int log_table_reserve(log_table *lt, uint64_t fp, size_t need,
                      uint32_t now_s, const log_budget *b);

/* Keep a charge decided by algo_log_apply (drop, at, cost) in fp's log,
 * reserved for it; its expiry becomes `expires`.  A log evicted since
 * (the cap, by another reserve of the same request) is left out: that
 * client starts afresh, as after any eviction. */
void log_table_commit(log_table *lt, uint64_t fp, size_t drop, int64_t at,
                      int64_t cost, uint32_t expires);

/* Free every log and the table; its bytes leave the budget. */
void log_table_free(log_table *lt, const log_budget *b);

#endif
