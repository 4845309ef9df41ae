/*
 * breaker.h -- a circuit breaker for one shard of a remote store (one Redis
 * node).  Closed: calls go through.  Open: calls are refused at once, with
 * no network call, so a sick server costs each check nothing instead of a
 * timeout.  After a while open the next call becomes the one probe
 * (half-open); its success closes the breaker.
 *
 * How long it stays open backs off: BREAKER_FIRST_OPEN_MS (or the slice,
 * if longer) after it opens, doubled each time the probe fails twice, up
 * to `cooldown_ms`; closing starts the next outage from the shortest
 * wait again.  So a stall of a few hundred ms costs at most about as much
 * again of local decisions after the server answers (the probe comes
 * within one step, and no step is longer than the time already spent
 * open), while a server that stays away is probed once per cooldown.
 *
 * What opens it is an outage, not an event.  One stall fails every call
 * waiting on the server at once (8 threads: 8 timeouts within a
 * millisecond); counted one by one they would open the breaker for a
 * whole cooldown over a 10 ms hiccup.  So failures count per time slice:
 * a failure less than `slice_ms` after the last one counted is part of the
 * same event.  The breaker opens after `threshold` such distinct failures
 * with no success in between, that is once calls have kept failing for
 * (threshold - 1) * slice_ms.  slice_ms is max(timeout_ms,
 * BREAKER_SLICE_MS): one caller calling in a loop against a hung server
 * opens it within `threshold` calls when timeout_ms >= BREAKER_SLICE_MS,
 * and a stall shorter than (threshold - 1) * slice_ms (defaults: 200 ms)
 * never opens it, however many checks it fails.  Any success ends the run.
 *
 * A probe gets a second chance: when the first probe after a cooldown
 * fails, the next call probes again at once; only if that one fails too
 * does the breaker stay open for another cooldown.  The first call after
 * an outage meets what the outage left behind (a backlog of late requests
 * on the server, a busy machine) and can miss a short timeout on a server
 * that is fine again; a sick one costs two timeouts per cooldown.
 *
 * Lock-free: a handful of atomics, read on every call.
 */
#ifndef RL_BREAKER_H
#define RL_BREAKER_H

#include <stdatomic.h>
#include <stdint.h>

enum { BREAKER_CLOSED = 0, BREAKER_OPEN = 1, BREAKER_HALF_OPEN = 2 };

/* The shortest time slice in which failures are one event (ms). */
#define BREAKER_SLICE_MS 50

/* The first wait after the breaker opens (ms), before any backoff. */
#define BREAKER_FIRST_OPEN_MS 50

/* What a breaker_done() call changed, for the caller to tell (log). */
enum { BREAKER_SAME = 0, BREAKER_OPENED, BREAKER_CLOSED_AGAIN };

typedef struct breaker {
    _Atomic int state;
    _Atomic int failures;        /* distinct ones in the current run   */
    _Atomic int64_t counted_ms;  /* the run's last counted failure, or
                                    INT64_MIN: no run                  */
    _Atomic int64_t opened_ms;   /* when it last opened                */
    _Atomic int retried;         /* this cooldown's probe failed once  */
    _Atomic int64_t opens, closes;
    int threshold;
    int64_t slice_ms;
    int64_t cooldown_ms;         /* the longest wait open              */
    _Atomic int64_t wait_ms;     /* this step's wait open (backoff)    */
    _Atomic int64_t run_ms;      /* the failing run's first failure    */
    _Atomic int64_t outage_ms;   /* when it opened from closed         */
} breaker;

/* threshold distinct failures open it; timeout_ms: a call's own timeout
 * (the slice is the longer of it and BREAKER_SLICE_MS). */
void breaker_init(breaker *b, int threshold, int64_t cooldown_ms,
                  int64_t timeout_ms);

/* May this call go to the store?  0: no; 1: yes; 2: yes, and it is the
 * probe of a cooled-down open breaker: report its result, or hand the
 * probe back with breaker_unprobe() if it could not even be sent. */
int breaker_allow(breaker *b, int64_t now_ms);

/* The probe found no connection to try: open again, still cooled down, so
 * the next call probes as soon as a connection is up (a probe that never
 * reached the server says nothing about it). */
void breaker_unprobe(breaker *b);

/* The store is somewhere new (Sentinel moved to a new primary, and a
 * connection to it is up): an open breaker's cooldown is over, so the
 * next call probes at once instead of waiting out a cooldown that was
 * about the old server.  Any thread. */
void breaker_cool_now(breaker *b, int64_t now_ms);

/* Report a call's outcome (ok: the store answered; probe: breaker_allow
 * said 2).  Call it once per store call, whatever number of checks the
 * call carried.  A failure of a call let through before the breaker
 * opened says nothing new once it is open: only the probe's counts.
 * Returns BREAKER_OPENED when this call opened a closed breaker (the
 * failing run began at run_ms), BREAKER_CLOSED_AGAIN when it closed one
 * (open since outage_ms), else BREAKER_SAME: exactly one caller hears of
 * each change. */
int breaker_done(breaker *b, int ok, int probe, int64_t now_ms);

#endif
