/*
 * breaker.h -- a circuit breaker for one shard of a remote store (one Redis
 * node).  Closed: calls go through.  After `threshold` failures in a row it
 * opens: calls are refused at once, with no network call, so a sick server
 * costs each check nothing instead of a timeout.  After `cooldown_ms` the
 * next call becomes the one probe (half-open); its success closes the
 * breaker, its failure opens it for another cooldown.
 *
 * Lock-free: a handful of atomics, read on every call.
 */
#ifndef RL_BREAKER_H
#define RL_BREAKER_H

#include <stdatomic.h>
#include <stdint.h>

enum { BREAKER_CLOSED = 0, BREAKER_OPEN = 1, BREAKER_HALF_OPEN = 2 };

typedef struct breaker {
    _Atomic int state;
    _Atomic int failures;        /* in a row, while closed        */
    _Atomic int64_t opened_ms;   /* when it last opened           */
    _Atomic int64_t opens, closes;
    int threshold;
    int64_t cooldown_ms;
} breaker;

void breaker_init(breaker *b, int threshold, int64_t cooldown_ms);

/* May this call go to the store?  0: no; 1: yes; 2: yes, and it is the
 * probe of a cooled-down open breaker: report its result, or hand the
 * probe back with breaker_unprobe() if it could not even be sent. */
int breaker_allow(breaker *b, int64_t now_ms);

/* The probe found no connection to try: open again, still cooled down, so
 * the next call probes as soon as a connection is up (a probe that never
 * reached the server says nothing about it). */
void breaker_unprobe(breaker *b);

/* Report a call's outcome (ok: the store answered). */
void breaker_done(breaker *b, int ok, int64_t now_ms);

#endif
