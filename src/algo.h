/*
 * algo.h -- the rate-limiting maths, as pure functions on integers.
 *
 * Every algorithm keeps its state in an algo_state (two 64-bit words and one
 * 32-bit word; all zero means "never seen") and decides one charge with
 * algo_apply().  Nothing here allocates, locks or reads a clock: the caller
 * passes the time, so the memory store and the tests drive the same code,
 * and lua/ repeats the same steps inside Redis.
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
    RL_ALGO_GCRA                /* theoretical arrival time                  */
};

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
} algo_decision;

/* Parse an algorithm name ("sliding_window", "token_bucket", "fixed_window",
 * "gcra"); returns the enum value or -1. */
int algo_from_name(const char *name);
const char *algo_name(int algo);

/* Fill `ap` from a rule's numbers; burst 0 means "not given".  Returns 0, or
 * -1 with a message naming the field and the reason in err. */
int algo_params_init(algo_params *ap, int algo, int64_t limit, int64_t burst,
                     int64_t window_s, char *err, size_t errlen);

/* Decide a charge of `cost` (0..RL_COST_MAX) at `now_ms`.  Updates *st only
 * when the charge is admitted with cost > 0 (d->changed). */
void algo_apply(const algo_params *ap, algo_state *st, int64_t now_ms,
                int64_t cost, algo_decision *d);

#endif
