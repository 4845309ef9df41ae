/*
 * ratelimit.h -- the public API of libratelimit, and the whole of it.
 *
 * libratelimit decides in-process whether a request may pass: rl_allow()
 * charges one key against one rule, rl_check() charges every rule that
 * matches a request and returns the most restrictive answer.  State lives in
 * a store named by a URI: "memory://" (in-process, the default; limits hold
 * across its threads), "shm://NAME" (POSIX shared memory; across the
 * processes of one host), or Redis, where the limits hold across every
 * process of a fleet: one server ("redis://...", "unix://..."), a Redis
 * Cluster ("redis-cluster://...") or the primary a Redis Sentinel
 * deployment names ("redis-sentinel://.../MASTER"), each also over TLS
 * ("rediss://...", "rediss-cluster://...", "rediss-sentinel://...").
 * Rules can follow a set an operator changes at run time
 * (the rules_source option; ratelimitd and rlctl are its tools).
 *
 * Conventions (the same for every function):
 *   - Functions that can fail return an int: RL_OK (0) or a negative RL_E*
 *     code.  rl_strerror() names a code; rl_errmsg() gives the detailed
 *     message of the calling thread's last failed call on a handle: one
 *     line, safe to log (control bytes shown as '?', no password: a URI
 *     is shown with its credentials as "***").
 *   - A denial is a result (rl_result.allowed == 0), never an error.
 *   - Handles are opaque.  Whoever creates a handle frees it; *_free(NULL)
 *     is a no-op.  Strings passed in are copied; nothing keeps a pointer to
 *     the caller's memory after the call returns.
 *   - Structs the caller allocates (rl_result, rl_request, rl_stats,
 *     rl_dryrun, rl_rules_status) can grow without breaking compiled
 *     callers: each starts with `size_t size`, which the caller sets to
 *     sizeof the struct it was compiled with (RL_RESULT_INIT,
 *     RL_REQUEST_INIT, RL_STATS_INIT, RL_DRYRUN_INIT and
 *     RL_RULES_STATUS_INIT do it), and members are only ever
 *     added at the end, each marked with the version that added it.  The
 *     library reads (an input) or fills (an output) only the bytes `size`
 *     covers and never writes `size`: a member past an older caller's
 *     size reads as 0 and is not filled; a newer caller's bigger struct
 *     is accepted, its tail ignored on input and left alone on output.
 *     A size below the struct's first 1.0 layout (RL_*_SIZE_MIN) is
 *     RL_EINVAL, with a message naming the struct.  Arrays of them
 *     (rl_check_many()) are strided by their elements' size.
 *   - Threads: an rl_config belongs to one thread at a time.  One
 *     rl_limiter serves any number of threads at once: rl_allow(),
 *     rl_check(), rl_check_many() and the rl_rules_*() calls may run
 *     concurrently; rl_limiter_free() must not race with any other call
 *     on that handle.
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#ifndef RATELIMIT_H
#define RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RL_BUILDING_LIBRARY) && defined(__GNUC__)
#define RL_EXPORT __attribute__((visibility("default")))
#else
#define RL_EXPORT
#endif

/* Version of this header; rl_version() gives the library's at run time. */
#define RL_VERSION_MAJOR 1
#define RL_VERSION_MINOR 1
#define RL_VERSION_PATCH 0
#define RL_VERSION_NUMBER                                                      \
    (RL_VERSION_MAJOR * 10000 + RL_VERSION_MINOR * 100 + RL_VERSION_PATCH)

/* Bounds on input.  Anything outside them is RL_EINVAL, with a message. */
#define RL_KEY_MAX 256           /* bytes in a key, excluding the NUL      */
#define RL_RULE_ID_MAX 63        /* bytes in a rule id: [A-Za-z0-9._:-]    */
#define RL_COST_MAX 1000000000LL /* largest cost one call may charge       */
#define RL_DIM_NAME_MAX 64       /* bytes in a dimension's name            */
#define RL_DIMS_MAX 16           /* rl_request.ndims: named dimensions     */
#define RL_ENDPOINT_MAX 2048     /* bytes in rl_request.endpoint: a longer
                                    one is refused, whatever the rules   */

/* Error codes: always negative, RL_OK is 0. */
enum {
    RL_OK = 0,
    RL_EINVAL = -1,    /* an argument is NULL, empty, too long or out of range */
    RL_ENOMEM = -2,    /* out of memory                                        */
    RL_ENORULE = -3,   /* no rule has this id                                  */
    RL_ERULE = -4,     /* a rule or rule set fails validation                  */
    RL_EPARSE = -5,    /* the rule JSON does not parse                         */
    RL_EIO = -6,       /* a file could not be read                             */
    RL_EOPTION = -7,   /* unknown configuration option or bad value            */
    RL_ESTORE = -8,    /* the store URI is not supported or the store failed   */
    RL_ERANGE = -9,    /* an output buffer is too small                        */
    RL_EBUSY = -10,    /* rl_check_start(): the loop context's checks in
                          flight are at its maximum                           */
    RL_ESETTLED = -11  /* rl_settle(): this reservation was settled already
                          (by this struct, a copy of it, or another process),
                          or it has expired: nothing changed                  */
};

/* rl_result.flags */
#define RL_FLAG_SOFT 0x01      /* a rule in mode "log" would have rejected   */
#define RL_FLAG_FAIL_OPEN 0x02 /* allowed because the store failed (open)    */
#define RL_FLAG_FALLBACK 0x04  /* decided by the local fallback limiter      */
#define RL_FLAG_CACHED 0x08    /* a denial Redis gave, answered locally until
                                  it ends (option deny_cache)                */
#define RL_FLAG_NO_RULE 0x10   /* rl_check(): no rule matched the request    */
#define RL_FLAG_FAIL_CLOSED 0x20 /* denied because the store failed (closed) */
#define RL_FLAG_LEASED 0x40    /* allowed from units this limiter leased
                                  from Redis (a rule's "lease"): no call  */

/*
 * The answer to one check.  Filled by rl_allow(), rl_check() and
 * rl_check_many(); owned by the caller (usually on the stack), who sets
 * size first: `rl_result res = RL_RESULT_INIT;`.  Every member size
 * covers is set on success; on failure they are zero, whatever failed (a
 * NULL limiter or argument included), as long as size is at least
 * RL_RESULT_SIZE_MIN (below it nothing is written).
 */
typedef struct rl_result {
    size_t size;          /* in: sizeof(rl_result) (RL_RESULT_INIT)        */
    int allowed;          /* 1: let the request through; 0: answer 429      */
    unsigned flags;       /* RL_FLAG_*                                       */
    int64_t limit;        /* the deciding rule's limit per window           */
    int64_t remaining;    /* what is left in the window / bucket, >= 0      */
    int64_t reset_at;     /* epoch seconds: window end / bucket full        */
    int64_t retry_after;  /* seconds to wait, >= 1 when denied, else 0      */
    int64_t window;       /* the deciding rule's window, seconds            */
    char rule_id[RL_RULE_ID_MAX + 1]; /* the deciding rule, "" if none      */
    /* ---- since 1.0.0, past RL_RESULT_SIZE_MIN ---- */
    int64_t retry_after_ms; /* milliseconds to wait, unrounded (retry_after
                               is this rounded up to whole seconds, >= 1);
                               0 when allowed                              */
    int64_t reset_at_ms;  /* epoch ms: window end / bucket full (reset_at
                             is this rounded up); 0 when no rule decided  */
} rl_result;

/* The first 1.0 layout of rl_result ends with rule_id. */
#define RL_RESULT_SIZE_MIN offsetof(rl_result, retry_after_ms)
#define RL_RESULT_INIT { .size = sizeof(rl_result) }

/*
 * One named dimension of a request: a rule with "dimension": name counts
 * the request under the key "<name>:<value>".  A name is 1..RL_DIM_NAME_MAX
 * bytes of a-z 0-9 _ . : -, starting with a letter ("tenant", "org",
 * "header:x-api-version"); "global" is reserved (rules counting everyone).
 * A NULL or "" value means the request does not carry it.
 */
typedef struct rl_dim {
    const char *name;
    const char *value;
} rl_dim;

/*
 * A request for rl_check(): the endpoint, the client's tier, and the values
 * of the dimensions rules may count by: user, api_key and ip as shortcuts,
 * any other (e.g. "custom", "tenant") in dims[0..ndims).  NULL or "" means
 * "not known"; a rule whose dimension the request does not carry does not
 * apply to it.  An endpoint longer than RL_ENDPOINT_MAX bytes is RL_EINVAL
 * (so no input makes matching cost more than that bound allows).  A name given twice (a dims entry named as a non-NULL
 * shortcut, or two entries of one name) is RL_EINVAL, as are more than
 * RL_DIMS_MAX entries and a name outside the grammar (rl_dim).  Set size
 * first: `rl_request req = RL_REQUEST_INIT;`, or in one initializer
 * `{.size = sizeof(rl_request), .user = "u", .cost = 1}`.
 */
typedef struct rl_request {
    size_t size;          /* in: sizeof(rl_request) (RL_REQUEST_INIT) */
    const char *endpoint; /* e.g. "/search"                  */
    const char *tier;     /* e.g. "free", "pro"              */
    const char *user;     /* dimension "user"                */
    const char *api_key;  /* dimension "api_key"             */
    const char *ip;       /* dimension "ip"                  */
    const rl_dim *dims;   /* any other dimensions, by name   */
    size_t ndims;         /* entries in dims, 0..RL_DIMS_MAX */
    int64_t cost;         /* units to charge, 0..RL_COST_MAX */
    /* ---- since 1.1.0, past RL_REQUEST_SIZE_MIN ---- */
    /* The byte lengths of endpoint, tier, user, api_key and ip, for a
     * caller whose strings are counted, not NUL-terminated (a server's own
     * buffers, passed without a copy): a string whose length is set (> 0)
     * is exactly that many bytes, none read past them, and must hold no
     * NUL; 0 (RL_REQUEST_INIT) reads the string up to its NUL. */
    size_t endpoint_len, tier_len, user_len, api_key_len, ip_len;
} rl_request;

/* The first 1.0 layout of rl_request: up to cost. */
#define RL_REQUEST_SIZE_MIN (offsetof(rl_request, cost) + sizeof(int64_t))
#define RL_REQUEST_INIT { .size = sizeof(rl_request) }

typedef struct rl_config rl_config;
typedef struct rl_limiter rl_limiter;

/* ---- library ---------------------------------------------------------- */
RL_EXPORT int rl_version(void);                  /* RL_VERSION_NUMBER     */
RL_EXPORT const char *rl_version_string(void);   /* "1.1.0"               */
RL_EXPORT const char *rl_strerror(int code);     /* static string         */
RL_EXPORT const char *rl_errmsg(const rl_limiter *lim);

/* ---- configuration ---------------------------------------------------- */
RL_EXPORT rl_config *rl_config_new(void);
RL_EXPORT int rl_config_set(rl_config *cfg, const char *name,
                            const char *value);
RL_EXPORT void rl_config_free(rl_config *cfg);

/* ---- limiter lifecycle ------------------------------------------------ */
RL_EXPORT int rl_limiter_new(rl_limiter **out, const rl_config *cfg);
RL_EXPORT void rl_limiter_free(rl_limiter *lim);

/* ---- the request path ------------------------------------------------- */
/*
 * Charge `cost` (0..RL_COST_MAX; 0 only looks) to `key` (1..RL_KEY_MAX
 * bytes, e.g. "user:42") under the rule rule_id, and say whether the
 * request may pass in *result (result->size set by the caller).  Returns
 * RL_OK (a denial included), RL_ENORULE, RL_EINVAL (a NULL argument, a
 * bad key or cost, result->size below RL_RESULT_SIZE_MIN) or, when the
 * store failed and the rule's failure mode cannot decide, RL_ESTORE.  Any
 * thread; blocks at most the store's timeout; allocates nothing.
 */
RL_EXPORT int rl_allow(rl_limiter *lim, const char *key, const char *rule_id,
                       int64_t cost, rl_result *result);
/*
 * Charge every rule that matches *req (endpoint, tier) and whose dimension
 * req carries, all or nothing, and answer with the most restrictive
 * decision in *result; a request no rule applies to passes
 * (RL_FLAG_NO_RULE).  req->size and result->size are set by the caller.
 * Returns RL_OK, RL_EINVAL (a NULL argument, a size below its struct's
 * RL_*_SIZE_MIN, a bad cost, a dimension name outside the grammar or
 * given twice, more than RL_DIMS_MAX dims, a key over RL_KEY_MAX, an
 * endpoint over RL_ENDPOINT_MAX),
 * RL_ERULE (more than 32 rules match) or RL_ESTORE.  Any thread; blocks at
 * most the store's timeout; allocates nothing; req's strings are read
 * during the call only.
 */
RL_EXPORT int rl_check(rl_limiter *lim, const rl_request *req,
                       rl_result *result);
/*
 * Decide n requests in one call, each exactly as rl_check() would (each
 * all-or-nothing on its own; one request's denial touches no other).  On
 * a Redis server (or each master of a cluster) they go out together, up
 * to 64 per script call, so a thread that has many requests at hand (an
 * event loop's turn) pays one round trip for all of them.  codes[i] receives
 * request i's return code and results[i] its answer (valid when codes[i]
 * is RL_OK).  Returns RL_OK when every request was decided, else the first
 * non-RL_OK code; rl_errmsg() describes the last failure.  reqs, results
 * and codes are the caller's (n elements each); any n, 0 included.  The
 * arrays are strided by their elements' size: element i of reqs is at
 * (char *)reqs + i * reqs[0].size, of results likewise, so every element
 * must carry its array's first size (a caller sets each one, e.g.
 * `results[i] = (rl_result)RL_RESULT_INIT`); an element whose size
 * differs gets codes[i] = RL_EINVAL and is neither read nor written.  A
 * first size below RL_*_SIZE_MIN or not a multiple of the struct's
 * alignment fails the whole call with RL_EINVAL before anything is read.
 */
RL_EXPORT int rl_check_many(rl_limiter *lim, const rl_request *reqs,
                            rl_result *results, int *codes, size_t n);

/* ---- reserve, then settle ---------------------------------------------- */
/*
 * For a cost known only after the work is done (the tokens an LLM
 * produced, the bytes sent): rl_reserve() charges an estimate and returns
 * a reservation; rl_settle() with the real cost refunds the difference or
 * charges it, atomically in the store, at most once.
 *
 * The reservation is the caller's, sized as every growable struct (size
 * first: `rl_reservation rsv = RL_RESERVATION_INIT;`).  Its contents are
 * the library's (do not read or change them); it holds no pointer, so it
 * may be kept as long as the caller likes, across rule reloads, copied,
 * or handed to another process of the fleet (same store) to settle: the
 * charged rules' identities (rule id, shape and client key, hashed), the
 * charge's time by the store's clock, the estimate, a random 64-bit id.
 */
#define RL_RESERVATION_WORDS 40
typedef struct rl_reservation {
    size_t size;                           /* in: sizeof(rl_reservation) */
    uint64_t opaque[RL_RESERVATION_WORDS]; /* the library's              */
} rl_reservation;

/* The first layout of rl_reservation is the whole of it. */
#define RL_RESERVATION_SIZE_MIN sizeof(rl_reservation)
#define RL_RESERVATION_INIT { .size = sizeof(rl_reservation) }

/*
 * Decide *req exactly as rl_check() would, with req->cost as the
 * estimate, and fill *rsv when the request is admitted (allowed 1);
 * otherwise *rsv is cleared (nothing to settle).  The same rules, deny
 * cache, failure modes, statistics and metrics as rl_check() (a reserve
 * counts as one check).  A reservation admitted by a failure mode (the
 * store failed: open, fallback) or that matched no rule charged nothing
 * the store keeps: settling it does nothing.  Rules in mode "log" are
 * charged as by rl_check() and are never settled.  Returns what rl_check()
 * returns, plus RL_EINVAL for a NULL rsv or rsv->size below
 * RL_RESERVATION_SIZE_MIN, and RL_ERULE when a matching rule's algorithm
 * cannot give back part of a charge (nothing is charged then).  Any
 * thread; blocks at most the store's timeout; allocates nothing.
 */
RL_EXPORT int rl_reserve(rl_limiter *lim, const rl_request *req,
                         rl_reservation *rsv, rl_result *result);

/*
 * Settle the reservation *rsv of request *req (the same request rl_reserve()
 * was given: equal strings, any memory; req->cost is not read) at its real
 * cost `actual` (0..RL_COST_MAX), for every rule the reservation charged
 * that still matches req with the same shape (a rule removed or reshaped
 * since is skipped: its state is gone or converted):
 *   actual < estimate: estimate - actual is refunded as of the charge's
 *     time: a window gives it back only while the window it was charged
 *     in still counts (fixed: the same window; sliding: it or the next,
 *     as the previous window), never below zero; a bucket gets the tokens
 *     back, never above its burst (a token bucket on its level at the
 *     settle's time, also on a clock gone back; GCRA: its arrival time
 *     moves back);
 *   actual > estimate: actual - estimate is charged now, unconditionally
 *     (the work is done): the client goes into debt and later checks are
 *     denied until it is paid back.  A bucket (token_bucket, gcra) holds
 *     at most one burst of debt past empty; a window counts it up to its
 *     limit (it denies until the window moves on; more is not carried);
 *   actual == estimate: nothing to change, no store call (only this
 *     struct is marked settled; a copy could still settle once).
 * Each charged rule is settled at most once, atomically with a marker in
 * the store (Redis: a key beside the client's state, same hash slot;
 * memory://, shm://: an entry of the store's table), so a second settle of
 * the same reservation -- this struct, a copy, another process -- is
 * refused with RL_ESETTLED and changes nothing.  A reservation can be
 * settled while its charge still counts: until the charge's time plus its
 * rule's state life (a fixed window's length, two for a sliding window, a
 * bucket's time to refill from empty); after that it has expired, its
 * charge stands, and rl_settle() returns RL_ESETTLED.  A reservation never
 * settled simply expires, charged.
 * Returns RL_OK (settled; also when nothing was left to settle),
 * RL_ESETTLED, RL_EINVAL (a NULL argument, a size below its struct's
 * RL_*_SIZE_MIN, rsv not filled by an admitting rl_reserve(), a bad
 * actual or request), RL_ESTORE (the store could not be reached: nothing
 * is known to have changed; call again, a settle already applied is not
 * applied twice).  On a Redis Cluster each rule is settled in its own
 * slot; a settle that fails midway may have settled some rules, and
 * calling again settles the rest.  With memory_max_bytes reached (or a
 * full shm:// region) a marker can be evicted like any entry, and a
 * second settle then applies again.  The deny cache keeps a denial it
 * holds until it ends.  A settle is not a check (not counted in the
 * statistics or metrics).  Any thread (one struct not settled by two at
 * once); blocks at most the store's timeout; allocates nothing.  There
 * is no asynchronous form.
 */
RL_EXPORT int rl_settle(rl_limiter *lim, const rl_request *req,
                        rl_reservation *rsv, int64_t actual);

/* ---- rules ------------------------------------------------------------ */
/* The most bytes of rule-set JSON the library reads: a file, a string, a
 * snapshot from a rules source.  Larger ones are refused before they are
 * read (rl_rules_load_file: RL_EIO; rl_rules_load_string: RL_EINVAL). */
#define RL_RULES_TEXT_MAX (16 << 20)

/*
 * Replace lim's whole rule set with the one in the file `path` / the text
 * `json`, all or nothing: a set that cannot be read, does not parse or has
 * one bad rule leaves the set in force, and the call fails (RL_EIO,
 * RL_EPARSE, RL_ERULE, RL_EINVAL for a text over RL_RULES_TEXT_MAX,
 * RL_ENOMEM; rl_errmsg() names the file, the rule and the field).  The
 * set's version is its "version", else the current one + 1 (refused at
 * INT64_MAX).  The file must be a regular file; it is opened without
 * blocking.  Any thread; loads are serialised, and each waits for the
 * checks still using the old set before freeing it.  Strings are read
 * during the call only.
 */
RL_EXPORT int rl_rules_load_file(rl_limiter *lim, const char *path);
RL_EXPORT int rl_rules_load_string(rl_limiter *lim, const char *json);

/* The version of the rule set in force (0: none loaded yet), or RL_EINVAL
 * for a NULL lim.  Lock-free; any thread. */
RL_EXPORT int64_t rl_rules_version(const rl_limiter *lim);

/* ---- dry runs --------------------------------------------------------- */
/* rl_dryrun.mode: the rule's mode in the set in force. */
#define RL_RULE_MODE_ENFORCE 0 /* "enforce": its denials reject          */
#define RL_RULE_MODE_LOG 1     /* "log": counted and flagged, never rejects */

/*
 * What a rule in mode "log" would have rejected.  The caller owns it and
 * sets size = sizeof(rl_dryrun) before the call (RL_DRYRUN_INIT); sized
 * as every growable struct (see the conventions at the top).
 */
typedef struct rl_dryrun {
    size_t size;         /* in: sizeof(rl_dryrun)                           */
    int mode;            /* RL_RULE_MODE_*: the rule's mode now             */
    int64_t version;     /* the rule's version in the set in force          */
    uint64_t checks;     /* charges it decided while in mode "log"          */
    uint64_t would_deny; /*   ... of which it would have rejected           */
    uint64_t distinct;   /* distinct client keys among those, estimated
                            (HyperLogLog: 3.25 % standard error), never
                            above would_deny                                */
    int64_t since_ms;    /* epoch ms when this definition began counting;
                            0: it has never been in mode "log"             */
} rl_dryrun;

/* The first layout of rl_dryrun ends with since_ms. */
#define RL_DRYRUN_SIZE_MIN (offsetof(rl_dryrun, since_ms) + sizeof(int64_t))
#define RL_DRYRUN_INIT { .size = sizeof(rl_dryrun) }

/*
 * Fill *out with the dry-run counts of the rule rule_id in the set in
 * force.  Counting happens while the rule is in mode "log"; the counts
 * live as long as the rule keeps counting the same thing across rule-set
 * loads (dimension, match, algorithm, limit, burst and window unchanged):
 * a flip to "enforce" freezes them, a flip back goes on from them, any
 * other change starts from zero.  A rule that has never been in mode
 * "log" gets zeros (since_ms 0) with RL_OK.  The counts are this
 * limiter's own; see ratelimit(3) for the fleet's, in Redis.  Returns
 * RL_OK, RL_ENORULE (no such rule), or RL_EINVAL (a NULL argument,
 * out->size below RL_DRYRUN_SIZE_MIN).  Any thread, any time.
 */
RL_EXPORT int rl_rule_dryrun_get(const rl_limiter *lim, const char *rule_id,
                                 rl_dryrun *out);
/* rl_rules_status.origin: where the rule set in force came from. */
#define RL_RULES_FROM_NONE 0      /* the empty set a limiter starts with   */
#define RL_RULES_FROM_STRING 1    /* rl_rules_load_string(), option rules  */
#define RL_RULES_FROM_FILE 2      /* rl_rules_load_file(), option
                                     rules_file without a rules_source     */
#define RL_RULES_FROM_SOURCE 3    /* the rules_source (Redis or file:)     */
#define RL_RULES_FROM_LAST_GOOD 4 /* rules_file as the last good copy: the
                                     source could not be read at start     */

/* rl_rules_status.source: the rules source's health. */
#define RL_SOURCE_NONE 0 /* no rules_source configured                     */
#define RL_SOURCE_UP 1   /* its last read (or check) succeeded             */
#define RL_SOURCE_DOWN 2 /* it cannot be read now: the last set stays      */

#define RL_RULES_REFUSAL_MAX 256 /* bytes of rl_rules_status.last_refusal */

/*
 * Where a limiter's rules stand.  Filled by rl_rules_status_get().  The
 * caller sets `size` to sizeof(rl_rules_status) before the call
 * (RL_RULES_STATUS_INIT); sized as every growable struct (see the
 * conventions at the top).  Counters only grow.
 */
typedef struct rl_rules_status {
    size_t size;            /* set by the caller: sizeof(rl_rules_status)  */
    int64_t version;        /* version of the set in force                 */
    int origin;             /* RL_RULES_FROM_*                             */
    int source;             /* RL_SOURCE_*                                 */
    uint64_t loads;         /* sets taken, by every path                   */
    uint64_t refused_bad;   /* sets refused: JSON that does not parse, an
                               invalid rule, too large, no usable version  */
    uint64_t refused_stale; /* sets from the source refused because their
                               version is not greater than the one in force */
    uint64_t source_errors; /* reads of the source that failed (connect,
                               timeout, I/O, file missing)                 */
    int64_t last_read_ms;   /* epoch ms of the source's last successful
                               read or check; 0: never                    */
    int64_t last_load_ms;   /* epoch ms of the last set taken; 0: never    */
    char last_refusal[RL_RULES_REFUSAL_MAX]; /* why the last refused set was
                               refused, "" if none; printable text only    */
} rl_rules_status;

/* The first layout of rl_rules_status ends with last_refusal. */
#define RL_RULES_STATUS_SIZE_MIN                                            \
    (offsetof(rl_rules_status, last_refusal) + RL_RULES_REFUSAL_MAX)
#define RL_RULES_STATUS_INIT { .size = sizeof(rl_rules_status) }

/*
 * Fill *out with where lim's rules stand.  out->size must be set (see
 * above): RL_EINVAL if it is below RL_RULES_STATUS_SIZE_MIN.  Any
 * thread, any time before rl_limiter_free(); takes a short lock the
 * rules source also takes, never one of the request path.
 */
RL_EXPORT int rl_rules_status_get(const rl_limiter *lim,
                                  rl_rules_status *out);

/* ---- log messages ------------------------------------------------------- */
/* Levels, numbered as syslog's priorities so they map one to one. */
#define RL_LOG_ERROR 3 /* something is wrong and stays wrong until fixed  */
#define RL_LOG_WARN 4  /* a refusal, the source away: the library copes    */
#define RL_LOG_INFO 6  /* a new rule set taken, the source back            */

/*
 * Where a limiter reports what it does on its own (the rules source's
 * takes and refusals, starting from the last good file, the source going
 * away and coming back; a Redis store started with degraded_start that
 * cannot connect yet, and why).  Calls the program makes report through their
 * return value and rl_errmsg() instead.  `msg` is one line of printable
 * text with no secrets (no password from a URI) and no trailing newline,
 * valid during the call only.  Called from the limiter's background
 * threads and from rl_limiter_new(), possibly at the same time as the
 * program's other threads run: the function must be thread-safe, quick,
 * and must not call back into the library on the same limiter.
 */
typedef void rl_log_fn(void *arg, int level, const char *msg);

/*
 * Send the messages of limiters made from cfg to fn(arg, level, msg).
 * Without this call they go to stderr, one line each, prefixed
 * "libratelimit: ".  fn NULL silences them.  RL_EINVAL if cfg is NULL.
 */
RL_EXPORT int rl_config_set_log(rl_config *cfg, rl_log_fn *fn, void *arg);

/* ---- statistics ----------------------------------------------------------- */
/* rl_stats.breaker_state */
#define RL_BREAKER_NONE (-1)  /* the store has no breaker (memory://)        */
#define RL_BREAKER_CLOSED 0   /* calls go to the store                        */
#define RL_BREAKER_OPEN 1     /* calls skip the store: failure modes decide   */
#define RL_BREAKER_HALF_OPEN 2 /* one probe call decides whether to close     */

/* How a limiter's checks were decided since it was created.  Filled by
 * rl_stats_get(); the caller sets size first (RL_STATS_INIT).  Counters
 * only grow. */
typedef struct rl_stats {
    size_t size;             /* in: sizeof(rl_stats) (RL_STATS_INIT)        */
    uint64_t checks;         /* rl_allow()/rl_check() calls that returned RL_OK */
    uint64_t allowed;        /*   ... with allowed == 1                       */
    uint64_t denied;         /*   ... with allowed == 0                       */
    uint64_t soft;           /*   ... flagged RL_FLAG_SOFT                    */
    uint64_t fail_open;      /*   ... decided by failure_mode "open"          */
    uint64_t fallback;       /*   ... decided by the local fallback           */
    uint64_t fail_closed;    /*   ... denied by failure_mode "closed"         */
    uint64_t store_errors;   /* store calls that failed, timed out or were
                                refused by an open breaker                    */
    uint64_t breaker_opens;  /* times the breaker opened                      */
    uint64_t breaker_closes; /* times it closed again after a probe           */
    uint64_t fleet_size;     /* the fallback's divisor: the configured
                                fleet_size, or with "auto" the live
                                limiters counted by heartbeats               */
    int breaker_state;       /* RL_BREAKER_*                                  */
} rl_stats;

/* The first 1.0 layout of rl_stats ends with breaker_state. */
#define RL_STATS_SIZE_MIN (offsetof(rl_stats, breaker_state) + sizeof(int))
#define RL_STATS_INIT { .size = sizeof(rl_stats) }

/* Fill *out (out->size set by the caller) with lim's counts.  Returns
 * RL_OK, or RL_EINVAL (a NULL argument, out->size below
 * RL_STATS_SIZE_MIN).  Any thread, any time; lock-free. */
RL_EXPORT int rl_stats_get(const rl_limiter *lim, rl_stats *out);

/* ---- metrics (Prometheus) -------------------------------------------------- */
/*
 * A writer of metrics text: called with the next n bytes (not
 * NUL-terminated, at most a few KiB, valid during the call only).  Return
 * 0 to go on; anything else stops the writing.
 */
typedef int rl_metrics_write_fn(void *arg, const char *p, size_t n);

/*
 * Write lim's metrics in the Prometheus text exposition format 0.0.4
 * (Content-Type: text/plain; version=0.0.4), for any HTTP server's
 * /metrics: per rule (label rule), its charges checked, allowed, denied,
 * would-deny (mode log), near-limit (passed with less than option
 * near_limit_pct % of the limit left), decided by failure mode open,
 * fallback or closed, and its limit and window as gauges; per store shard
 * (label shard: a Redis server or each master of a cluster, "host:port"),
 * the breaker's state, opens and closes, store errors, timeouts,
 * redirects and connections replaced; a histogram of checks' latency
 * (label store: memory, redis, redis-cluster; 10 us to 100 ms); the rule
 * set's version, loads and load failures (label reason); the fleet size.
 * Every name starts with ratelimit_; rl_metrics_write(3) lists them.
 * Their number is bounded by rules and shards, never by client keys.
 * With the option metrics=0 the per-rule and latency counts stay empty.
 *
 * rl_metrics_write_cb() hands the text to fn(arg, p, n) piece by piece,
 * from the calling thread, before it returns.  RL_OK, RL_EINVAL (NULL
 * lim or fn), RL_ENOMEM, or RL_EIO when fn returned non-zero (nothing
 * more is written).
 *
 * rl_metrics_write() writes it into buf (cap bytes, NUL-terminated) and
 * sets *len to its length.  RL_ERANGE when it does not fit: *len is then
 * the size buf needs (NUL included) and buf holds a truncated text;
 * rules or shards added before the next call may need more, so leave
 * room.  RL_EINVAL for a NULL lim or len, or a NULL buf with cap > 0.
 *
 * Both: any thread, any time, beside checks and rule loads, which they
 * never block (the counters are read lock-free and the rule set is
 * copied out before any byte is written).  They allocate, read every
 * rule's counters and may take a few milliseconds with thousands of
 * rules: a scrape's call, not the request path's.
 */
RL_EXPORT int rl_metrics_write_cb(const rl_limiter *lim,
                                  rl_metrics_write_fn *fn, void *arg);
RL_EXPORT int rl_metrics_write(const rl_limiter *lim, char *buf, size_t cap,
                               size_t *len);

/* ---- asynchronous checks ---------------------------------------------- */
/*
 * Start a check without blocking and learn its result in your own event
 * loop.  The shape is libuv's: a request object you own (rl_async_check)
 * with a completion callback, one pollable descriptor per loop context
 * (rl_async_fd) and a "process completions" call (rl_async_process).  Not
 * hiredis-style event hooks, because the library keeps its own sockets (a
 * few per Redis server, many for a cluster, TLS later) and batches the
 * requests of every thread on them in its own I/O thread: one descriptor
 * per loop serves any store, and an adapter for a loop is ~30 lines
 * (<ratelimit/libevent.h>, <ratelimit/libuv.h>).
 *
 * A started check is decided exactly as rl_check() would decide it: the
 * same rules, deadline (timeout_ms), failure modes, breaker and
 * all-or-nothing across the rules it matches.  Its callback runs exactly
 * once, inside rl_async_process(), in the thread that calls it: never
 * inside rl_check_start() (a check the store decides at once, the memory
 * store's or one no rule matches, is queued and the descriptor made
 * readable) -- unless the caller sets RL_ASYNC_NOW in chk->flags: then
 * such a check is answered by rl_check_start() itself (RL_ASYNC_DONE),
 * with no callback, no slot and no system call.
 *
 * Threads: one rl_async per thread (event loop); its functions are called
 * from that thread only.  Many rl_async may share one limiter, with
 * blocking callers too.  The rule set a check matched stays in force for
 * it until it completes (at the latest at its deadline): a rule load waits
 * for the checks in flight, so at most timeout_ms.
 *
 * Memory: rl_async_new() allocates room for max_in_flight checks; a check
 * allocates nothing (its slot is recycled).
 */
typedef struct rl_async rl_async;
typedef struct rl_async_check rl_async_check;

/* rc: RL_OK with *chk->result filled (as far as its size says), or what
 * rl_check() would return (RL_ESTORE when the store failed and no failure
 * mode decided). */
typedef void rl_async_cb(rl_async_check *chk, int rc);

struct rl_async_check {
    size_t size;          /* sizeof(rl_async_check): RL_ASYNC_CHECK_INIT */
    rl_async_cb *cb;      /* called once, from rl_async_process()        */
    void *data;           /* yours; the library never touches it         */
    rl_result *result;    /* yours: filled before cb runs                */
    void *internal;       /* the library's while the check is in flight  */
    /* ---- since 1.1.0, past RL_ASYNC_CHECK_SIZE_MIN ---- */
    unsigned flags;       /* in: RL_ASYNC_NOW, or 0                      */
};

/* rl_async_check.flags: a check decided inside rl_check_start() (the
 * memory and shm:// stores, no rule matched, the deny cache) is answered
 * there: rl_check_start() returns RL_ASYNC_DONE with *chk->result filled,
 * the callback never runs and the context's descriptor is not touched.
 * A check that must wait for its store is started as without the flag. */
#define RL_ASYNC_NOW 0x01u

/* rl_check_start()'s answer, with RL_ASYNC_NOW only: decided at once
 * (positive: no error code is). */
#define RL_ASYNC_DONE 1

#define RL_ASYNC_CHECK_INIT { .size = sizeof(rl_async_check) }
#define RL_ASYNC_CHECK_SIZE_MIN                                             \
    (offsetof(rl_async_check, internal) + sizeof(void *))

/* A loop context on lim for at most max_in_flight (1..65536) checks at
 * once.  The limiter must outlive it.  RL_EINVAL, RL_ENOMEM. */
RL_EXPORT int rl_async_new(rl_limiter *lim, size_t max_in_flight,
                           rl_async **out);

/* Free a loop context, from its thread but not from inside one of its
 * callbacks.  Checks still in flight are waited for (each completes by its
 * deadline, so at most timeout_ms) and their callbacks are NOT called.
 * Free every rl_async of a limiter before the limiter. */
RL_EXPORT void rl_async_free(rl_async *a);

/* The descriptor to poll for reading: readable while completions wait
 * for rl_async_process().  Owned by the context; do not read or close
 * it. */
RL_EXPORT int rl_async_fd(const rl_async *a);

/*
 * Start deciding req (the caller's; it may be freed once this returns)
 * for chk (the caller's, chk->size, cb and result set; it and *result
 * must stay valid until the callback ran).  RL_OK: the callback will run.
 * RL_ASYNC_DONE (only when chk->flags has RL_ASYNC_NOW): decided at once,
 * *chk->result filled, no callback will run.  Otherwise nothing was
 * started and no callback runs: RL_EINVAL (a NULL
 * argument, chk->size, req->size or chk->result->size below the struct's
 * RL_*_SIZE_MIN, a bad cost or dimension), RL_ERULE (more
 * than 32 rules match), RL_EBUSY (max_in_flight checks in flight), with
 * rl_errmsg(lim), and *chk->result zeroed (as rl_result says), or, with
 * RL_ASYNC_NOW, the error of a check decided at once (what rl_check()
 * would return: RL_ESTORE when the store failed and no failure mode
 * decided).  A check that completes with an error also finds its result
 * zeroed.
 */
RL_EXPORT int rl_check_start(rl_async *a, const rl_request *req,
                             rl_async_check *chk);

/* Run the callbacks of the checks completed so far, in this thread; never
 * blocks.  Returns how many ran (0 included), or RL_EINVAL. */
RL_EXPORT int rl_async_process(rl_async *a);

/* Checks started and not yet called back. */
RL_EXPORT size_t rl_async_in_flight(const rl_async *a);

/* ---- response headers and body ---------------------------------------- */
/* Options for the header calls (rl_headers(3)). */
#define RL_HEADERS_IETF 0x01 /* add RateLimit-Policy and RateLimit as
                                draft-ietf-httpapi-ratelimit-headers-11
                                reads them: t the effective window        */
#define RL_HEADERS_DRAFT10 0x02 /* with RL_HEADERS_IETF: the draft-10 form
                                   1.0 wrote (t the seconds to reset_at)  */

/* Output sizes that always suffice: headers rl_headers() may write, bytes
 * (with the NUL) of rl_headers_format() and of rl_body_format(). */
#define RL_HEADERS_MAX 6
#define RL_HEADERS_FORMAT_MAX 396
#define RL_BODY_FORMAT_MAX 58

typedef struct rl_header {
    char name[24];
    char value[104];
} rl_header;

RL_EXPORT int rl_headers(const rl_result *result, unsigned options,
                         rl_header *out, size_t max);
RL_EXPORT int rl_headers_format(const rl_result *result, unsigned options,
                                char *buf, size_t len);
RL_EXPORT int rl_body_format(const rl_result *result, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RATELIMIT_H */
