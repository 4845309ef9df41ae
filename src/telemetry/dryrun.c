/*
 * dryrun.c -- the per-rule dry-run counters (see dryrun.h): making them,
 * counting a denied key into the sketch, carrying them across rule-set
 * swaps, and rl_rule_dryrun_get().
 *
 * Ownership under RCU.  A block is reference-counted by the rule sets that
 * point to it: dryrun_inherit() hands the old set's block to the new set's
 * rule with one more reference, or makes a fresh one with one, and
 * dryrun_detach() (from ruleset_free()) drops each set's.  Request threads
 * hold no reference of their own: they reach a block through a set they
 * read under the RCU read lock, and a set is freed only after rcu_swap()
 * has waited out its last reader, so a block lives at least as long as any
 * thread can count into it.  Threads still reading the old set and threads
 * already reading the new one count into the same block meanwhile, which
 * is what makes the carry-over exact.  The reference count drops with
 * acq_rel and the set that lets go last frees the block; two loads may
 * overlap here (one frees the old set after its swap while the next
 * inherits from its successor), hence atomics.
 */
#include "dryrun.h"
#include "error.h"
#include "limiter.h"
#include "sized.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(RL_RULE_MODE_ENFORCE == RL_MODE_ENFORCE &&
                   RL_RULE_MODE_LOG == RL_MODE_LOG,
               "the public mode numbers are the rule model's");


static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct dryrun *block_new(int64_t now_ms)
{
    struct dryrun *d = aligned_alloc(64, sizeof *d);

    if (!d)
        return NULL;
    for (int s = 0; s < METRICS_SLOTS; s++) {
        atomic_init(&d->shard[s].passed, 0);
        atomic_init(&d->shard[s].would_deny, 0);
    }
    for (unsigned i = 0; i < HLL_M; i++)
        atomic_init(&d->reg[i], 0);
    atomic_init(&d->refs, 1);
    d->since_ms = now_ms;
    return d;
}

static struct dryrun *block_ref(struct dryrun *d)
{
    atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
    return d;
}

static void block_release(struct dryrun *d)
{
    if (d && atomic_fetch_sub_explicit(&d->refs, 1,
                                       memory_order_acq_rel) == 1)
        free(d);
}

void dryrun_seen(struct dryrun *d, const char *key, size_t len)
{
    uint64_t h = hll_hash(key, len);
    _Atomic uint8_t *reg = &d->reg[hll_index(h)];
    uint8_t rank = hll_rank(h);
    uint8_t cur = atomic_load_explicit(reg, memory_order_relaxed);

    /* An atomic max: most keys find the register already as high. */
    while (rank > cur &&
           !atomic_compare_exchange_weak_explicit(reg, &cur, rank,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

void dryrun_detach(rl_ruleset *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        block_release(rs->rules[i].dry);
        rs->rules[i].dry = NULL;
    }
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Do two rules count the same thing?  Mode, failure mode, version and
 * update time may differ: they change what is done with a decision, not
 * the decision. */
static int same_counting(const rl_rule *a, const rl_rule *b)
{
    return strcmp(a->dimension, b->dimension) == 0 &&
           same_str(a->endpoint, b->endpoint) && same_str(a->tier, b->tier) && a->ap.algo == b->ap.algo &&
           a->ap.limit == b->ap.limit && a->ap.burst == b->ap.burst &&
           a->window_s == b->window_s;
}

int dryrun_inherit(rl_ruleset *next, const rl_ruleset *old)
{
    int64_t now = wall_ms();

    for (size_t i = 0; i < next->n; i++) {
        rl_rule *r = &next->rules[i];
        const rl_rule *o = ruleset_find(old, r->id);

        if (r->dry) /* given already */
            continue;
        if (o && o->dry && same_counting(r, o))
            r->dry = block_ref(o->dry);
        else if (r->mode == RL_MODE_LOG && !(r->dry = block_new(now))) {
            dryrun_detach(next);
            return RL_ENOMEM;
        }
    }
    return RL_OK;
}

void dryrun_read(const struct dryrun *d, dryrun_counts *out)
{
    uint64_t passed = 0;

    out->would_deny = 0;
    for (int s = 0; s < METRICS_SLOTS; s++) {
        out->would_deny += atomic_load_explicit(&d->shard[s].would_deny,
                                                memory_order_relaxed);
        passed += atomic_load_explicit(&d->shard[s].passed,
                                       memory_order_relaxed);
    }
    out->checks = passed + out->would_deny;
    for (unsigned i = 0; i < HLL_M; i++)
        out->sketch.reg[i] = atomic_load_explicit(&d->reg[i],
                                                  memory_order_relaxed);
    out->since_ms = d->since_ms;
}

/* The estimate, never above the denials it estimates among. */
static uint64_t distinct_of(const dryrun_counts *c)
{
    double e = hll_estimate(&c->sketch) + 0.5;

    if (e >= (double)c->would_deny)
        return c->would_deny;
    return (uint64_t)e;
}

RL_EXPORT int rl_rule_dryrun_get(const rl_limiter *lim, const char *rule_id,
                                 rl_dryrun *out)
{
    rl_dryrun full;
    dryrun_counts c;
    const rl_ruleset *rs;
    const rl_rule *rule;
    rcu_token t;
    size_t span;

    if (!lim || !rule_id || !out)
        return rl_fail(lim, RL_EINVAL, "rl_rule_dryrun_get: NULL argument");
    if (!(span = sized_span(lim, "rl_rule_dryrun_get: out->size",
                            &sized_dryrun, out->size)))
        return RL_EINVAL;
    if (rule_id_check(rule_id)) /* not echoed: it may hold any byte */
        return rl_fail(lim, RL_ENORULE, "rl_rule_dryrun_get: not a rule id "
                       "(1..%d bytes of A-Z a-z 0-9 . _ : -)", RL_RULE_ID_MAX);
    memset(&full, 0, sizeof full);
    rs = rcu_read_lock((rcu *)&lim->rules, &t);
    if (!(rule = ruleset_find(rs, rule_id))) {
        int64_t v = rs->version;
        rcu_read_unlock((rcu *)&lim->rules, t);
        return rl_fail(lim, RL_ENORULE, "no rule \"%.64s\" in rule set "
                       "version %lld", rule_id, (long long)v);
    }
    full.mode = rule->mode;
    full.version = rule->version;
    if (rule->dry) {
        dryrun_read(rule->dry, &c);
        full.checks = c.checks;
        full.would_deny = c.would_deny;
        full.distinct = distinct_of(&c);
        full.since_ms = c.since_ms;
    }
    rcu_read_unlock((rcu *)&lim->rules, t);
    sized_fill(out, &full, span);
    return RL_OK;
}
