/*
 * options.h -- rl_config: the string options a limiter is created from, and
 * the one table that describes them.  Each option is a row of opt_table
 * (options.c): its name, its kind, its bounds, its default and a line of
 * doc.  The row drives rl_config_set() (parsing and the error text, made
 * from the bounds), the defaults, and the docs check (tests/check_options.c
 * compares the lists in docs/OPERATING.md, ratelimit(3) and rl_config_set(3) with
 * the table).  A new option is a field below and a row in the table.
 */
#ifndef RL_OPTIONS_H
#define RL_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "ratelimit.h"

struct rl_config {
    char *store;              /* "memory://"                          */
    char *rules_file;         /* loaded at create, if set             */
    char *rules;              /* JSON loaded at create, if set        */
    int64_t timeout_ms;       /* one check's wait for the store       */
    int64_t memory_max_bytes; /* cap on the memory store              */
    int64_t shm_size;         /* shm://NAME: the region's bytes        */
    int64_t connect_timeout_ms; /* a Redis (re)connect                */
    int64_t redis_connections;  /* pipelined connections per server   */
    int64_t degraded_start;     /* 1: start while Redis is away       */
    int64_t fleet_size;         /* limiters sharing a limit (fallback);
                                   0: "auto", counted by heartbeats    */
    char *fleet_name;           /* which fleet, for "auto"            */
    int64_t fleet_size_unknown; /* "auto": the divisor until counted  */
    int64_t breaker_failures;   /* failures in a row that open it     */
    int64_t breaker_cooldown_ms;/* open this long before a probe      */
    int64_t redis_compact;      /* redis_layout "compact": 1          */
    char *hash_key;             /* the compact layout's SipHash key,
                                   32 hex digits; NULL: the default    */
    char *rules_source;         /* "store", redis[s]://, unix://, file: */
    char *rules_key;            /* snapshot key and channel           */
    int64_t rules_refresh_s;    /* the timed pull                     */
    int64_t rules_push;         /* 0: no SUBSCRIBE, pull only         */
    int64_t rules_file_save;    /* 1: keep rules_file as last good    */
    char *tls_ca_file;          /* rediss://: trusted CAs (PEM)       */
    char *tls_ca_dir;           /*   or a hashed directory of them    */
    char *tls_cert_file;        /*   mutual TLS: the client's cert    */
    char *tls_key_file;         /*   and its key                      */
    int64_t tls_verify;         /*   0: the server is not verified    */
    char *sentinel_password;    /* redis-sentinel://: the sentinels'  */
    int64_t metrics;            /* 0: no counting for rl_metrics_write */
    int64_t near_limit_pct;     /* near-limit: less than this % left  */
    char *events_redis;         /* rejection events' server; NULL: off */
    char *events_stream;        /*   their stream's key               */
    int64_t events_maxlen;      /*   its cap (XADD MAXLEN ~)          */
    int64_t events_ring;        /*   the ring's cells                 */
    int64_t events_key;         /*   EV_KEY_*: plain, hashed, none    */
    int64_t events_sample;      /*   1 denial in N per thread          */
    int64_t deny_cache;         /* denials kept locally; 0: none       */
    int64_t lease_entries;      /* leases' grants kept; 0: no leases   */
    int64_t redis_functions;    /* 1: FCALL the function library      */
    int64_t redis_command;      /* RCMD_*: ratelimit.so's RL.CHECK     */
    int64_t redis_oldest_limiter; /* 1: none before 1.1.0 shares keys */
    rl_log_fn *log_fn;          /* messages; NULL: silent             */
    void *log_arg;
};

#define STORE_DEFAULT "memory://"
#define FLEET_NAME_DEFAULT "default"
#define RULES_KEY_DEFAULT "rl:rules"
#define EVENTS_STREAM_DEFAULT "rl:events"
#define RULES_KEY_MAX 128           /* bytes in rules_key             */
#define RULES_REFRESH_DEFAULT_S 30

/* What an option's value is, and so how it is parsed and stored. */
typedef enum opt_kind {
    OPT_TEXT,     /* a string, copied (char *); lo..hi bytes when hi > 0 */
    OPT_INT,      /* a decimal integer in lo..hi (int64_t)               */
    OPT_BYTES,    /* the same, with an optional K, M or G (x1024) suffix */
    OPT_BOOL,     /* 0 or 1 (int64_t)                                     */
    OPT_INT_AUTO, /* an OPT_INT, or "auto", stored as 0                   */
    OPT_ENUM      /* one of `values` ("a|b"), stored as its index         */
} opt_kind;

/* One option.  `off` is its field in struct rl_config (an int64_t, or a
 * char * for OPT_TEXT).  `def` is the default as rl_config_set() takes it
 * (NULL: not set).  `values`: for OPT_ENUM the choices, '|' between them;
 * for an OPT_TEXT without length bounds, what it takes, as the docs say
 * it.  `check`, for OPT_TEXT: further checks of a value, RL_OK or the
 * rl_fail() code. */
typedef struct opt_def {
    const char *name;
    opt_kind kind;
    size_t off;
    int64_t lo, hi;
    const char *def;
    const char *values;
    int (*check)(const struct opt_def *o, const char *value);
    const char *doc;
} opt_def;

/* The table, in the order the docs list the options; *n rows. */
const opt_def *options_table(size_t *n);

/* The row named `name`, or NULL. */
const opt_def *options_find(const char *name);

/* What the option takes, as the docs' tables say it ("1 .. 60000",
 * "0 or 1", "plain or compact", "1 .. 64 bytes", "path"), into buf
 * (cut to len - 1 bytes). */
void options_values_text(const opt_def *o, char *buf, size_t len);

/* The defaults, for rl_limiter_new(NULL): every number's default, and
 * no string (NULL stands for a string option's default).  Allocates
 * nothing. */
void config_defaults(struct rl_config *cfg);

#endif
