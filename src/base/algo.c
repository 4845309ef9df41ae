/*
 * algo.c -- token bucket, GCRA, fixed window, sliding window counter and
 * sliding log, and the carrying of a client's level across a rule change.
 *
 * All four share one shape: bring the state up to `now` (refill, or roll the
 * window), test whether `cost` fits, charge it if it does, and report what
 * is left, when the state is full/reset again and how long a denied cost has
 * to wait.  A clock that goes backwards never refills.  The windows and
 * the sliding log treat an earlier `now` as the latest time they have
 * already seen; the buckets take GCRA's rule: a token bucket on a clock
 * gone back refills nothing for the stepped time (its level moves back
 * with the clock: fewer tokens, never more).
 *
 * A cost larger than the rule's capacity can never pass; it is denied with
 * retry = one window, so a client that sends it backs off instead of looping.
 */
#include "algo.h"

#include <stdio.h>
#include <string.h>

static const char *const names[] = {"sliding_window", "token_bucket",
                                    "fixed_window", "gcra", "sliding_log"};

int algo_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return (int)i;
    return -1;
}

const char *algo_name(int algo)
{
    if (algo < 0 || algo >= (int)(sizeof names / sizeof names[0]))
        return "?";
    return names[algo];
}

int64_t algo_gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int64_t ceil_div(int64_t a, int64_t b) /* a >= 0, b > 0 */
{
    return a / b + (a % b != 0);
}

static int is_bucket(int algo)
{
    return algo == RL_ALGO_TOKEN_BUCKET || algo == RL_ALGO_GCRA;
}

int algo_params_init(algo_params *ap, int algo, int64_t limit, int64_t burst,
                     int64_t window_s, char *err, size_t errlen)
{
    memset(ap, 0, sizeof *ap);
    if (algo < 0 || algo > RL_ALGO_SLIDING_LOG)
        return snprintf(err, errlen, "algorithm: unknown"), -1;
    if (limit < 1 || limit > RL_LIMIT_MAX)
        return snprintf(err, errlen, "limit: must be 1..%lld, got %lld",
                        (long long)RL_LIMIT_MAX, (long long)limit), -1;
    if (algo == RL_ALGO_SLIDING_LOG && limit > RL_LOG_LIMIT_MAX)
        return snprintf(err, errlen,
                        "limit: sliding_log keeps one time per request, so "
                        "its limit is at most %lld, got %lld; use "
                        "sliding_window for higher limits",
                        (long long)RL_LOG_LIMIT_MAX, (long long)limit), -1;
    if (window_s < 1 || window_s > RL_WINDOW_MAX)
        return snprintf(err, errlen,
                        "window_seconds: must be 1..%lld, got %lld",
                        (long long)RL_WINDOW_MAX, (long long)window_s), -1;
    if (burst && !is_bucket(algo))
        return snprintf(err, errlen,
                        "burst: applies to token_bucket and gcra only, not %s",
                        algo_name(algo)), -1;
    if (burst < 0 || burst > RL_LIMIT_MAX)
        return snprintf(err, errlen, "burst: must be 1..%lld, got %lld",
                        (long long)RL_LIMIT_MAX, (long long)burst), -1;

    ap->algo = algo;
    ap->limit = limit;
    ap->window_ms = window_s * 1000;
    ap->burst = is_bucket(algo) ? (burst ? burst : limit) : 0;
    int64_t g = algo_gcd64(ap->window_ms, limit);
    ap->p = ap->window_ms / g;
    ap->q = limit / g;

    /* Keep every product exact in a double (Redis Lua) as well as in C. */
    if (is_bucket(algo) && ap->burst > RL_EXACT_MAX / ap->p)
        return snprintf(err, errlen,
                        "burst: %lld with limit %lld per %lld s needs more "
                        "than 52 bits to count exactly; use a rounder "
                        "limit/window ratio or a smaller burst",
                        (long long)ap->burst, (long long)limit,
                        (long long)window_s), -1;
    if (!is_bucket(algo) && limit > RL_EXACT_MAX / ap->window_ms)
        return snprintf(err, errlen,
                        "limit: %lld per %lld s needs more than 52 bits to "
                        "count exactly; lower the limit or the window",
                        (long long)limit, (long long)window_s), -1;
    return 0;
}

static void deny(algo_decision *d, int64_t retry_ms)
{
    d->allowed = 0;
    d->changed = 0;
    d->retry_ms = retry_ms > 0 ? retry_ms : 1;
}

int64_t algo_bucket_refill(const algo_params *ap, int64_t level, int64_t t,
                           int64_t now)
{
    int64_t cap = ap->burst * ap->p;

    /* A level saved under another limit or burst may pass this bucket's
     * size (a reloaded rule): cap it, so a reload grants at most a bucket.
     * Below -cap no state is kept (settle.c's debts stop there). */
    if (level > cap)
        level = cap;
    if (level < -cap)
        level = -cap;
    /* GCRA's rule: the level moves with the clock both ways.  Each test
     * keeps (now - t) * q from overflowing (q up to 10^9). */
    if (now >= t)
        return now - t >= ceil_div(cap - level, ap->q)
                   ? cap : level + (now - t) * ap->q;
    return t - now >= ceil_div(level + cap, ap->q)
               ? -cap : level - (t - now) * ap->q;
}

/* Token bucket: a = level in units of 1/p token at b, the time (ms) it was
 * written.  The level at any now is a + (now - b) * q, at most a bucket,
 * also for a now before b (GCRA's rule: a clock gone back refills nothing
 * for the stepped time, a debt's refill time to come reads below empty;
 * at least -cap): the state is one time, T = b + (cap - a) / q, when the
 * bucket is full again, and the level at now is cap - (T - now) * q. */
static void token_bucket(const algo_params *ap, algo_state *st, int64_t now,
                         int64_t cost, algo_decision *d)
{
    int64_t cap = ap->burst * ap->p;
    int64_t level = algo_bucket_refill(ap, st->a, st->b, now);

    if (cost > ap->burst) {
        deny(d, ap->window_ms);
    } else if (level >= cost * ap->p) {
        level -= cost * ap->p;
        d->allowed = 1;
        d->changed = cost > 0;
        d->retry_ms = 0;
        if (d->changed) {
            st->a = level;
            st->b = now;
        }
    } else {
        deny(d, ceil_div(cost * ap->p - level, ap->q));
    }
    d->remaining = level > 0 ? level / ap->p : 0;
    d->reset_ms = now + ceil_div(cap - level, ap->q);
    d->expires_ms = d->reset_ms;
}

/* GCRA: a = theoretical arrival time (ms), b = its fraction in 1/q ms. */
static void gcra(const algo_params *ap, algo_state *st, int64_t now,
                 int64_t cost, algo_decision *d)
{
    int64_t cap = ap->burst * ap->p, tat = st->a, t = now, debt;
    int64_t span = cap / ap->q + 1; /* the furthest tat can be ahead, ms */
    int64_t frac = st->b < ap->q ? st->b : ap->q - 1; /* see token_bucket */

    if (tat - t > span) /* clock went back: never count more than a burst */
        t = tat - span;
    debt = (tat > t || (tat == t && frac > 0)) ? (tat - t) * ap->q + frac
                                               : 0;
    if (cost > ap->burst) {
        deny(d, ap->window_ms);
    } else if (debt + cost * ap->p <= cap) {
        debt += cost * ap->p;
        d->allowed = 1;
        d->changed = cost > 0;
        d->retry_ms = 0;
        if (d->changed) {
            st->a = t + debt / ap->q;
            st->b = debt % ap->q;
        }
    } else {
        deny(d, ceil_div(debt + cost * ap->p - cap, ap->q));
    }
    /* After a clock step back the debt can pass the capacity by < 1 ms. */
    d->remaining = debt >= cap ? 0 : (cap - debt) / ap->p;
    d->reset_ms = t + ceil_div(debt, ap->q);
    d->expires_ms = d->reset_ms;
}

/* Fixed window: a = window index (now / W), b = count in it. */
static void fixed_window(const algo_params *ap, algo_state *st, int64_t now,
                         int64_t cost, algo_decision *d)
{
    int64_t w = ap->window_ms, idx = now / w;
    int64_t count;

    if (st->a > idx)
        idx = st->a;
    count = (st->a == idx) ? st->b : 0;
    if (cost > ap->limit) {
        deny(d, w);
    } else if (count + cost <= ap->limit) {
        count += cost;
        d->allowed = 1;
        d->changed = cost > 0;
        d->retry_ms = 0;
        if (d->changed) {
            st->a = idx;
            st->b = count;
        }
    } else {
        deny(d, (idx + 1) * w - now);
    }
    d->remaining = ap->limit - count;
    d->reset_ms = (idx + 1) * w;
    d->expires_ms = d->reset_ms;
}

/* Ms from elapsed `e` into the window until prev * (W - e') <= room * W. */
static int64_t sliding_wait(int64_t prev, int64_t room, int64_t w, int64_t e)
{
    int64_t e2 = prev ? w - (room * w) / prev : 0;
    return e2 - e;
}

/* Sliding window counter: a = window index, b = current count, c = previous
 * window's count.  Estimate = prev * (W - elapsed) / W + curr, kept scaled by
 * W so it stays an integer. */
static void sliding_window(const algo_params *ap, algo_state *st, int64_t now,
                           int64_t cost, algo_decision *d)
{
    int64_t w = ap->window_ms, idx = now / w, e = now - idx * w;
    int64_t prev = 0, curr = 0, est, cap = ap->limit * w;

    if (st->a > idx) { /* clock went back: stay in the newest window seen */
        idx = st->a;
        e = 0;
    }
    if (st->a == idx) {
        curr = st->b;
        prev = st->c;
    } else if (st->a == idx - 1) {
        prev = st->b;
    }
    est = prev * (w - e) + curr * w;
    if (cost > ap->limit) {
        deny(d, w);
    } else if (est + cost * w <= cap) {
        curr += cost;
        est += cost * w;
        d->allowed = 1;
        d->changed = cost > 0;
        d->retry_ms = 0;
        if (d->changed) {
            st->a = idx;
            st->b = curr;
            st->c = (uint32_t)prev;
        }
    } else if (curr + cost <= ap->limit) {
        deny(d, sliding_wait(prev, ap->limit - curr - cost, w, e));
    } else {
        deny(d, (w - e) + sliding_wait(curr, ap->limit - cost, w, 0));
    }
    d->remaining = est >= cap ? 0 : (cap - est) / w;
    d->reset_ms = (idx + 1) * w;
    d->expires_ms = (idx + 2) * w;
}

void algo_apply(const algo_params *ap, algo_state *st, int64_t now_ms,
                int64_t cost, algo_decision *d)
{
    switch (ap->algo) {
    case RL_ALGO_SLIDING_LOG: /* a log is no algo_state: never admit */
        memset(d, 0, sizeof *d);
        deny(d, ap->window_ms);
        break;
    case RL_ALGO_TOKEN_BUCKET: token_bucket(ap, st, now_ms, cost, d); break;
    case RL_ALGO_GCRA: gcra(ap, st, now_ms, cost, d); break;
    case RL_ALGO_FIXED_WINDOW: fixed_window(ap, st, now_ms, cost, d); break;
    default: sliding_window(ap, st, now_ms, cost, d); break;
    }
}

int algo_same_units(const algo_params *a, const algo_params *b)
{
    return a->algo == b->algo && a->window_ms == b->window_ms &&
           (!is_bucket(a->algo) ||
            (a->limit == b->limit && a->burst == b->burst));
}

int64_t algo_state_life_ms(const algo_params *ap)
{
    switch (ap->algo) {
    case RL_ALGO_TOKEN_BUCKET:
    case RL_ALGO_GCRA: return ceil_div(ap->burst * ap->p, ap->q) + 1;
    case RL_ALGO_FIXED_WINDOW:
    case RL_ALGO_SLIDING_LOG: return ap->window_ms;
    default: return 2 * ap->window_ms;
    }
}

/* A client's level under `ap` at `at`, as algo_apply() would see it: the
 * whole tokens available (buckets) or the units used (windows); *t gets
 * the time that level holds at: `at`, or the state's own time when it was
 * written later (each algorithm treats an earlier time as the latest it
 * has seen, as in algo_apply; a token bucket's own time is its earliest
 * form's, below). */
static int64_t level_at(const algo_params *ap, const algo_state *st,
                        int64_t at, int64_t *t)
{
    int64_t cap = ap->burst * ap->p, w = ap->window_ms;

    switch (ap->algo) {
    case RL_ALGO_TOKEN_BUCKET: {
        /* In its earliest form: whole ms of refill taken off the level and
         * off its time (level mod q at b - level / q), the same state at
         * any time (the level moves with the clock, algo_bucket_refill).
         * The compact layout keeps only that form (lua/compact.lua), and a
         * state whose earliest time is after `at` is taken at that time,
         * alike in every store. */
        int64_t level = st->a > cap ? cap : st->a;
        *t = st->b - level / ap->q;
        level %= ap->q;
        if (at <= *t)
            return level / ap->p;
        level = algo_bucket_refill(ap, level, *t, at);
        *t = at;
        return level / ap->p;
    }
    case RL_ALGO_GCRA: {
        int64_t tat = st->a, span = cap / ap->q + 1, debt;
        int64_t frac = st->b < ap->q ? st->b : ap->q - 1;
        *t = tat - at > span ? tat - span : at;
        debt = (tat > *t || (tat == *t && frac > 0))
                   ? (tat - *t) * ap->q + frac : 0;
        return debt >= cap ? 0 : (cap - debt) / ap->p;
    }
    case RL_ALGO_FIXED_WINDOW: {
        int64_t idx = at / w;
        *t = at;
        if (st->a > idx) {
            idx = st->a;
            *t = idx * w;
        }
        return st->a == idx ? st->b : 0;
    }
    default: {
        int64_t idx = at / w, e = at - idx * w, prev = 0, curr = 0;
        if (st->a > idx) {
            idx = st->a;
            e = 0;
        }
        if (st->a == idx) {
            curr = st->b;
            prev = st->c;
        } else if (st->a == idx - 1) {
            prev = st->b;
        }
        *t = idx * w + e;
        return ceil_div(prev * (w - e) + curr * w, w);
    }
    }
}

/* The part of a state that still counts at `now`: a sliding window last
 * written before now's window loses its previous count (st->c, the count
 * of the window two or more before now's), which no longer weighs on any
 * decision from now on and which the compact layout no longer holds: that
 * window's hash expired when now's window began (lua/compact.lua).  Every
 * store converts from what all of them still have. */
static algo_state live_at(const algo_params *ap, const algo_state *st,
                          int64_t now)
{
    algo_state live = *st;

    if (ap->algo == RL_ALGO_SLIDING_WINDOW && live.a < now / ap->window_ms)
        live.c = 0;
    return live;
}

/* A level under `from` at time t (whole tokens available for a bucket,
 * units used for a window) placed into a state under `to`, by the table
 * above algo_convert() in algo.h. */
static void place(const algo_params *from, const algo_params *to,
                  int64_t level, int64_t t, algo_state *out)
{
    int64_t used = is_bucket(from->algo) ? from->burst - level : level;

    if (is_bucket(to->algo)) {
        int64_t avail = is_bucket(from->algo) ? level : to->burst - used;
        avail = avail < 0 ? 0 : avail > to->burst ? to->burst : avail;
        if (to->algo == RL_ALGO_TOKEN_BUCKET) {
            out->a = avail * to->p;
            out->b = t;
        } else {
            int64_t debt = (to->burst - avail) * to->p;
            out->a = t + debt / to->q;
            out->b = debt % to->q;
        }
        return;
    }
    out->a = t / to->window_ms;
    out->b = used > to->limit ? to->limit : used;
}

int algo_state_fresh(const algo_params *ap, const algo_state *st,
                     int64_t now_ms)
{
    algo_state live = live_at(ap, st, now_ms);
    int64_t t;

    return level_at(ap, &live, now_ms, &t) ==
           (is_bucket(ap->algo) ? ap->burst : 0);
}

/* The decision table is in algo.h, above the declaration. */
int algo_convert(const algo_params *from, const algo_state *st,
                 const algo_params *to, int64_t since_ms, int64_t now_ms,
                 algo_state *out)
{
    int64_t at = since_ms < now_ms ? since_ms : now_ms, t, level;
    algo_state live;

    if (algo_same_units(from, to) && from->algo != RL_ALGO_SLIDING_LOG) {
        *out = *st;
        return 1;
    }
    memset(out, 0, sizeof *out);
    /* A log is no level: a change into or out of sliding_log (or of its
     * window) starts fresh, in every store (ratelimit(7)). */
    if (from->algo == RL_ALGO_SLIDING_LOG || to->algo == RL_ALGO_SLIDING_LOG)
        return 0;
    live = live_at(from, st, now_ms);
    /* Windows passed by now count nothing, under any rule.  A bucket the
     * old rule has refilled by now is a state every store may have let
     * expire: it is taken as one that did, so all of them agree. */
    if (algo_state_fresh(from, st, now_ms))
        return is_bucket(from->algo)
                   ? algo_convert_unknown(from, to, since_ms, now_ms, out)
                   : 0;
    level = level_at(from, &live, at, &t);
    place(from, to, level, t, out);
    return 1;
}

/* The rule is in algo.h, above the declaration. */
int algo_convert_unknown(const algo_params *from, const algo_params *to,
                         int64_t since_ms, int64_t now_ms, algo_state *out)
{
    int64_t at = since_ms < now_ms ? since_ms : now_ms, d = now_ms - at;
    int64_t cap = from->burst * from->p, level = 0;

    memset(out, 0, sizeof *out);
    if (!is_bucket(from->algo) || to->algo == RL_ALGO_SLIDING_LOG ||
        algo_same_units(from, to))
        return 0;
    if (d < ceil_div(cap, from->q)) /* d * q < cap + q: exact */
        level = from->burst - ceil_div(d * from->q, from->p);
    place(from, to, level < 0 ? 0 : level, at, out);
    return 1;
}

/* The index of the first of t[0..n) that still counts at `now`: the
 * first x with x + w > now (t is sorted). */
static size_t log_first_live(const int64_t *t, size_t n, int64_t now,
                             int64_t w)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid] + w > now)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The rule of the sliding log is in algo.h, above the declaration. */
void algo_log_apply(const algo_params *ap, const int64_t *t, size_t n,
                    int64_t now_ms, int64_t cost, algo_decision *d,
                    size_t *drop, int64_t *at)
{
    int64_t w = ap->window_ms, now = now_ms, live, newest;
    size_t first;

    if (n && t[n - 1] > now) /* clock went back: stay at the newest seen */
        now = t[n - 1];
    first = log_first_live(t, n, now, w);
    live = (int64_t)(n - first);
    *drop = first;
    *at = now;
    if (cost > ap->limit) {
        deny(d, w);
    } else if (live + cost <= ap->limit) {
        live += cost;
        d->allowed = 1;
        d->changed = cost > 0;
        d->retry_ms = 0;
    } else {
        /* the (live + cost - limit)-th oldest live unit must leave; with
         * a limit lowered below the log's length, it may be later ones */
        deny(d, t[first + (size_t)(live + cost - ap->limit) - 1] + w - now);
    }
    d->remaining = live >= ap->limit ? 0 : ap->limit - live;
    newest = d->changed ? now : n ? t[n - 1] : now;
    d->reset_ms = first < n ? t[first] + w : d->changed ? now + w : now;
    d->expires_ms = newest + w;
}

size_t algo_log_commit(int64_t *t, size_t n, size_t drop, int64_t at,
                       int64_t cost)
{
    size_t m = n - drop;

    if (drop)
        memmove(t, t + drop, m * sizeof *t);
    for (int64_t i = 0; i < cost; i++)
        t[m++] = at;
    return m;
}

size_t algo_log_refund(int64_t *t, size_t n, int64_t at, int64_t cost)
{
    size_t i = 0, k;

    while (i < n && t[i] < at)
        i++;
    k = n - i < (size_t)cost ? n - i : (size_t)cost;
    memmove(t + i, t + i + k, (n - i - k) * sizeof *t);
    return n - k;
}
