/*
 * fleet.h -- how many limiters share a Redis: each keeps a heartbeat in a
 * sorted set, rl:fleet:{<name>}, scored by when it expires, and counts the
 * live members.  The fallback divides a rule's limit by that count, so
 * limit / N follows the fleet as it scales.
 */
#ifndef RL_FLEET_H
#define RL_FLEET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "redis_io.h"

#define FLEET_NAME_MAX 64

typedef struct fleet {
    rio *(*conn)(void *arg);     /* the server that holds the key  */
    void *arg;
    char key[FLEET_NAME_MAX + 16];
    char id[40];                 /* this limiter's member name     */
    _Atomic int64_t *size;       /* where the count goes           */
    int64_t interval_ms;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, started;
} fleet;

/* Start beating every interval_ms on the server conn(arg) returns at each
 * beat (a cluster's answer follows the key's slot); the count lands in
 * *size. */
int fleet_start(fleet *f, rio *(*conn)(void *arg), void *arg,
                const char *name, _Atomic int64_t *size,
                int64_t interval_ms);

/* Stop, and take this limiter out of the set at once (best effort). */
void fleet_stop(fleet *f);

#endif
