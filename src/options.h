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
    char *rules_source;         /* "store", redis://, unix://, file:  */
    char *rules_key;            /* snapshot key and channel           */
    int64_t rules_refresh_s;    /* the timed pull                     */
    int64_t rules_push;         /* 0: no SUBSCRIBE, pull only         */
    int64_t rules_file_save;    /* 1: keep rules_file as last good    */
    rl_log_fn *log_fn;          /* messages; NULL: silent             */
    void *log_arg;
};

#define RULES_KEY_DEFAULT "rl:rules"
#define RULES_KEY_MAX 128           /* bytes in rules_key             */
#define RULES_REFRESH_DEFAULT_S 30

/* The defaults, for rl_limiter_new(NULL). */
void config_defaults(struct rl_config *cfg);

#endif
