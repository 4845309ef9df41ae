/*
 * store_shm.h -- shm://NAME: rate-limit state in POSIX shared memory, one
 * limit for the processes of one host (nginx workers, prefork servers)
 * without Redis.  The region's format and lifecycle are described at the
 * top of store_shm.c.
 */
#ifndef RL_STORE_SHM_H
#define RL_STORE_SHM_H

#include "store.h"

#define STORE_SHM_SCHEME "shm://"
#define STORE_SHM_NAME_MAX 64       /* bytes of NAME                     */
#define STORE_SHM_SIZE_MIN (1LL << 20)  /* option shm_size, bytes        */
#define STORE_SHM_SIZE_MAX (1LL << 34)
#define STORE_SHM_SIZE_DEFAULT 16777216 /* 16 MiB: 523008 slots, 444416 live */

/* Open (or create) the region shm://NAME names.  RL_OK; RL_EOPTION for a
 * bad name, size or a region that does not match; RL_ESTORE when the
 * system refuses (with the reason in err). */
int store_shm_new(const char *uri, const store_options *opt, rl_store **out,
                  char *err, size_t errlen);

/* 0 if NAME (the part after shm://) is 1..STORE_SHM_NAME_MAX bytes of
 * [A-Za-z0-9._-] starting with a letter or digit; else -1 with the reason
 * in err. */
int store_shm_name_check(const char *name, char *err, size_t errlen);

typedef struct store_shm_stats {
    int64_t slots;       /* occupied slots, live or expired              */
    int64_t capacity;    /* slots in the region                          */
    int64_t bytes;       /* the region's size                            */
    int64_t evictions;   /* live entries dropped because a segment was full */
    int64_t recoveries;  /* segment locks taken over from a dead holder  */
} store_shm_stats;

/* Tests and benchmarks: the region's counts, summed over its segments. */
void store_shm_stats_get(rl_store *s, store_shm_stats *st);

/* Tests only: the segment `key` hashes to; take segment `seg`'s lock and
 * return holding it (the test then kills the process, leaving the lock to
 * a dead holder), with torn != 0 as if killed halfway through writing the
 * segment's first entry (the repair drops that entry). */
unsigned store_shm_segment_of(rl_store *s, const char *key, size_t key_len);
void store_shm_test_hold(rl_store *s, unsigned seg, int torn);

#endif
