/*
 * futex.h -- the one way a thread of the library sleeps on a word and
 * another wakes it (Linux futexes, process-private): a blocking Redis
 * check waiting for its completion (redis_ticket.c), a thread waiting for
 * a memory store segment's lock (wordlock.h).  The waker changes the
 * word first and wakes after; a sleeper re-reads the word after each
 * return, so spurious and lost-race wakes are harmless.  A wake on a word
 * whose owner has returned meanwhile is harmless too (a syscall on an
 * address: at worst a spurious wake of whoever uses it next).
 */
#ifndef RL_FUTEX_H
#define RL_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/* Sleep while *w == val, at most until deadline_ns (CLOCK_MONOTONIC;
 * INT64_MAX: no limit).  Returns at once if *w != val. */
void futex_wait_until(_Atomic uint32_t *w, uint32_t val, int64_t deadline_ns);

/* Wake one thread sleeping on w; every thread sleeping on it. */
void futex_wake_one(_Atomic uint32_t *w);
void futex_wake_all(_Atomic uint32_t *w);

#endif
