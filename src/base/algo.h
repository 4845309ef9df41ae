/*
 * algo.h -- the rate-limiting maths, as pure functions on integers.
 *
 * Every algorithm keeps its state in an algo_state (two 64-bit words and one
 * 32-bit word; all zero means "never seen") and decides one charge with
 * algo_apply(); algo_convert() carries a state across a rule change. Nothing
 * here allocates, locks or reads a clock: the caller passes the time, so the
 * memory store and the tests drive the same code, and lua/ repeats the same
 * steps inside Redis.
 *
 * Time is in milliseconds since the Unix epoch.  Rates are exact fractions:
 * a rule of `limit` per `window_ms` emits one token every T = p/q ms with
 * p/q in lowest terms, and token levels are kept in units of 1/p token, so
 * refills never round.  Validation keeps every product below 2^52, the range
 * in which Redis's Lua (doubles) computes the same integers as this C code.
 */
#ifndef RL_ALGO_H
#define RL_ALGO_H

#include <stddef.h>
#include <stdint.h>

enum rl_algo {
    RL_ALGO_SLIDING_WINDOW = 0, /* two counters, weighted estimate: default */
    RL_ALGO_TOKEN_BUCKET,       /* level + last refill                       */
    RL_ALGO_FIXED_WINDOW,       /* one counter per aligned window            */
    RL_ALGO_GCRA,               /* theoretical arrival time                  */
    RL_ALGO_SLIDING_LOG         /* one time per admitted unit: exact         */
};

/* The largest limit a sliding_log rule may have: its state is one time
 * per admitted unit, so this bounds a client's log (8 B per time in the
 * memory store, 6 B in Redis). */
#define RL_LOG_LIMIT_MAX 1000

#define RL_LIMIT_MAX 1000000000LL     /* per window                        */
#define RL_WINDOW_MAX (31LL * 86400)  /* seconds: 31 days                  */
#define RL_EXACT_MAX (1LL << 52)      /* largest intermediate product      */

typedef struct algo_params {
    int algo;           /* enum rl_algo                                    */
    int64_t limit;      /* units per window                                */
    int64_t burst;      /* bucket capacity (token bucket, GCRA), else 0    */
    int64_t window_ms;
    int64_t p, q;       /* T = p/q ms per unit, lowest terms               */
} algo_params;

typedef struct algo_state {
    int64_t a, b;
    uint32_t c;
} algo_state;

typedef struct algo_decision {
    int allowed;
    int changed;        /* state was charged and must be written back      */
    int64_t remaining;  /* units left after this charge, >= 0              */
    int64_t reset_ms;   /* epoch ms: window end / bucket full              */
    int64_t retry_ms;   /* ms until this cost could pass; 0 when allowed   */
    int64_t expires_ms; /* epoch ms after which the state equals fresh     */
    int64_t granted;    /* a lease's charge (store_op.lease_min): the units
                           the store charged, cost or fewer; else 0       */
} algo_decision;

/* Parse an algorithm name ("sliding_window", "token_bucket", "fixed_window",
 * "gcra", "sliding_log"); returns the enum value or -1. */
int algo_from_name(const char *name);
const char *algo_name(int algo);

/* The greatest common divisor of a and b (a window in ms and a limit: p
 * and q of algo_params are their quotients by it). */
int64_t algo_gcd64(int64_t a, int64_t b);

/* Fill `ap` from a rule's numbers; burst 0 means "not given".  Returns 0, or
 * -1 with a message naming the field and the reason in err. */
int algo_params_init(algo_params *ap, int algo, int64_t limit, int64_t burst,
                     int64_t window_s, char *err, size_t errlen);

/* Decide a charge of `cost` (0..RL_COST_MAX) at `now_ms`.  Updates *st only
 * when the charge is admitted with cost > 0 (d->changed).  Not for
 * RL_ALGO_SLIDING_LOG, whose state is a log (algo_log_apply). */
void algo_apply(const algo_params *ap, algo_state *st, int64_t now_ms,
                int64_t cost, algo_decision *d);

/* 1 if a state kept under `a` means the same under `b`: the same algorithm
 * and window, and for the buckets the same limit and burst (their levels
 * and times are in units of the rate and the size).  A window's counts do
 * not depend on the limit. */
int algo_same_units(const algo_params *a, const algo_params *b);

/* The longest a state stays unlike a fresh one after its last charge, in
 * ms: a bucket refilling from empty, one window (fixed), two (sliding). */
int64_t algo_state_life_ms(const algo_params *ap);

/* A token bucket's level (1/p token) at now from `level` at t, at ap's
 * rate, capped at the bucket's size (a level saved under other numbers is
 * capped first) and at least -size.  GCRA's rule: for a now before t (a
 * clock gone back, or a debt's refill time still to come) the level is
 * that much lower, so a clock gone back refills nothing for the stepped
 * time. */
int64_t algo_bucket_refill(const algo_params *ap, int64_t level, int64_t t,
                           int64_t now);

/*
 * A rule changed: carry a client's level from a state kept under `from`
 * into one under `to`.  The level is taken as at the change, at =
 * min(since_ms, now_ms) (a state last written later is taken at its own
 * time), so a client that keeps being denied is converted the same way
 * each time, and the new numbers apply from the change on.  It is taken
 * from what of the state still counts at now_ms: a sliding window last
 * written in a window before now_ms's drops its previous count (that
 * window's weight is gone by now_ms, and so is its hash in Redis's compact
 * layout, so every store sees the same level):
 *
 *   from \ to      bucket                      window
 *   bucket         whole tokens available,     used = from's burst - whole
 *                  at most to's burst          tokens available
 *   window         available = to's burst      used = the window's estimate
 *                  - used, at least 0          (sliding: prev*(W-e)/W + curr,
 *                                              rounded up; fixed: the count)
 *
 * A bucket's fraction of a token is dropped (no free refill); a window
 * gets `used`, at most to's limit, as the count of its window holding that
 * time (sliding: curr = used, prev = 0); a bucket's level is placed at that
 * time and refills at to's rate from there.  When the units are the same
 * (algo_same_units) the state is copied as it is: a window whose limit
 * changed keeps its counts.  A window state whose windows have passed by
 * now_ms gives a fresh one.  A bucket's level is the one at the change,
 * refilled at to's rate only, never at from's: a bucket the old rule has
 * refilled by now_ms is a state any store may have let expire, so it is
 * taken as one that did (algo_convert_unknown), in every store alike.
 * Returns 1 when a level was carried over, 0 when *out is fresh.  Exact integers throughout (below 2^52, like
 * algo_apply); lua/convert.lua repeats the same steps.
 */
int algo_convert(const algo_params *from, const algo_state *st,
                 const algo_params *to, int64_t since_ms, int64_t now_ms,
                 algo_state *out);

/* Is st under ap at now_ms what a client never seen has (a full bucket,
 * windows passed)?  What every store's expiry of a state tells (not for
 * sliding_log). */
int algo_state_fresh(const algo_params *ap, const algo_state *st,
                     int64_t now_ms);

/*
 * A client of a bucket rule that changed, with no state under the new
 * shape nor under `from` (the newest shape the rule replaced, at
 * since_ms): its old state, if it had one, expired by now_ms, which it does
 * when the old rule has refilled it, so at the change it held at least
 * from's burst - the tokens from's rate gives in (now_ms - since_ms),
 * rounded up, and at least 0.  That level, the emptiest the client can
 * have been, is converted as algo_convert() converts a level at the change
 * (a brand new client cannot be told apart from it; it reaches the new
 * burst as fast as the new rule refills).  Returns 1 with *out set, or 0
 * (*out fresh) when `from` is no bucket (a window's passed windows count
 * nothing), `to` is a sliding log, or the units are the same.
 */
int algo_convert_unknown(const algo_params *from, const algo_params *to,
                         int64_t since_ms, int64_t now_ms, algo_state *out);

/*
 * The sliding log: exact.  Its state is the times of the units it
 * admitted, oldest first (t[0..n)); a unit admitted at time x counts
 * while now < x + W.  With now' = max(now, newest time) (a clock that went
 * back stays at the newest time seen) and `live` the units still counting
 * at now':
 *   allowed   iff live + cost <= limit (a cost above the limit: never,
 *             retry one window); then `cost` times now' are appended;
 *   remaining limit - live (after the charge), at least 0;
 *   retry     until the (live + cost - limit)-th oldest live unit leaves;
 *   reset     when the oldest live unit leaves (now' when there is none);
 *   expires   when the newest leaves: newest + W.
 * algo_log_apply decides without writing: *drop gets how many of t[] no
 * longer count, *at the time a charge is written at; algo_log_commit
 * then keeps the charge (when d->changed).  lua/sliding_log.lua repeats
 * the same steps.
 */
void algo_log_apply(const algo_params *ap, const int64_t *t, size_t n,
                    int64_t now_ms, int64_t cost, algo_decision *d,
                    size_t *drop, int64_t *at);

/* Drop t[0..drop) and append `cost` times `at`: the caller's array holds
 * n - drop + cost.  Returns the new count. */
size_t algo_log_commit(int64_t *t, size_t n, size_t drop, int64_t at,
                       int64_t cost);

/* Refund a charge of `cost` made at `at`: remove the `cost` oldest
 * entries at or after `at` (a charge's times are `at`, or later when the
 * clock had gone back; any later entry removed instead of one of them
 * leaves the log counting longer, never less).  Returns the new count. */
size_t algo_log_refund(int64_t *t, size_t n, int64_t at, int64_t cost);

#endif
