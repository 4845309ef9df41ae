/*
 * options.h -- rl_config: the string options a limiter is created from.
 */
#ifndef RL_OPTIONS_H
#define RL_OPTIONS_H

#include <stdint.h>

#include "ratelimit.h"

struct rl_config {
    char *store;              /* "memory://"                          */
    char *rules_file;         /* loaded at create, if set             */
    char *rules;              /* JSON loaded at create, if set        */
    int64_t timeout_ms;       /* one check's wait for the store       */
    int64_t memory_max_bytes; /* cap on the memory store              */
    int64_t connect_timeout_ms; /* a Redis (re)connect                */
    int64_t redis_connections;  /* pipelined connections per server   */
    int64_t degraded_start;     /* 1: start while Redis is away       */
    int64_t fleet_size;         /* limiters sharing a limit (fallback);
                                   0: "auto", counted by heartbeats    */
    char *fleet_name;           /* which fleet, for "auto"            */
    int64_t breaker_failures;   /* failures in a row that open it     */
    int64_t breaker_cooldown_ms;/* open this long before a probe      */
    int64_t redis_compact;      /* redis_layout "compact": 1          */
};

/* The defaults, for rl_limiter_new(NULL). */
void config_defaults(struct rl_config *cfg);

#endif
