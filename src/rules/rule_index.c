/*
 * rule_index.c -- see rule_index.h.  One open-addressing table of slots
 * finds every bucket (a tier's name, a tier's no-endpoint list, an exact
 * endpoint, a prefix), each keyed by (kind, tier id, bytes), in one dense
 * array; a bucket's rules are a run of one postings array, in rule order.
 * Building is two passes over the rules (count, then fill), so the runs
 * need no sorting.
 *
 * A request collects the rule numbers of every bucket it hits (at most
 * two tiers, each: no-endpoint, exact, one per prefix length the set
 * uses) and of the glob trie (which may report a rule twice), then sorts
 * them and drops repeats.  Only the first `max` in rule order are wanted,
 * so the collection is bounded: when its buffer fills it keeps the
 * smallest `max` and from then on drops anything larger than the largest
 * kept.
 */
#include "rule_index.h"
#include "glob_index.h"
#include "hash.h"
#include "pattern.h"

#include <stdlib.h>
#include <string.h>

enum { IX_TIER = 1, IX_ANY, IX_EXACT, IX_PREFIX, IX_GLOB /* no bucket */ };

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
#define COLLECT_MAX (2 * RULE_INDEX_MAX) /* collected before trimming:
                                            more than any `keep`       */

typedef struct ix_bucket {
    const char *key;   /* its bytes: a tier, an endpoint, a prefix     */
    uint64_t kh;       /* the table's hash of (kind, tier, bytes)      */
    uint32_t len;      /* key bytes                                    */
    uint32_t tier;     /* tier id: 0 = rules with no tier              */
    uint32_t kind;     /* IX_*                                         */
    uint32_t off, cnt; /* postings[off..off+cnt); a tier: off = its id */
    uint32_t has;      /* a tier: bit k set if it has rules of kind k,
                          so a request skips the probes it cannot hit  */
} ix_bucket;

struct rule_index {
    ix_bucket *b;        /* the buckets, nb of them (room for cap)     */
    uint32_t nb, cap;
    uint32_t *slot;      /* by hash: bucket + 1, 0 = empty; mask + 1   */
    size_t mask;         /* slots, at least twice nb                   */
    uint32_t *post;      /* every bucket's rule numbers                */
    uint32_t *glob;      /* rules whose endpoint is any other pattern  */
    size_t nglob;
    glob_index *gx;      /* the same, by path segment (glob_index.h)   */
    uint64_t plen[(RL_PATTERN_MAX + 63) / 64]; /* prefix lengths used  */
    size_t plen_max;
    const ix_bucket *any0; /* rules of no endpoint and no tier, or NULL:
                              every request's, found once at build      */
    uint32_t kinds;      /* 1 << IX_*: the kinds of rules filed, so a set
                            of no endpoint rules hashes no endpoint
                            (1 << IX_TIER: some rule has a tier)         */
    int any_only;        /* no rule has an endpoint or a tier: any0 is
                            every request's whole answer, in rule order  */
};

/* The hash of a prefix, rolled byte by byte (FNV-1a), so a request gets
 * every prefix length of its endpoint in one pass. */
static uint64_t roll(uint64_t h, unsigned char c)
{
    return (h ^ c) * FNV_PRIME;
}

static uint64_t roll_bytes(const char *s, size_t len)
{
    uint64_t h = FNV_OFFSET;

    for (size_t i = 0; i < len; i++)
        h = roll(h, (unsigned char)s[i]);
    return h;
}

/* The table's hash of a key whose bytes hash to h. */
static uint64_t key_hash(uint64_t h, int kind, uint32_t tier, size_t len)
{
    return hash_mix(h ^ len, ((uint64_t)kind << 32) | tier);
}

/* The bytes' own hash, as each kind computes it. */
static uint64_t bytes_hash(int kind, const char *s, size_t len)
{
    if (kind == IX_ANY)
        return 0;
    return kind == IX_PREFIX ? roll_bytes(s, len) : hash_bytes(s, len, 0x1e);
}

/* The slot of (kind, tier, s): its bucket's, or the empty one where it
 * would go. */
static uint32_t *probe(const rule_index *ix, uint64_t kh, int kind,
                       uint32_t tier, const char *s, size_t len)
{
    for (size_t i = kh & ix->mask;; i = (i + 1) & ix->mask) {
        const ix_bucket *b;
        if (!ix->slot[i])
            return &ix->slot[i];
        b = &ix->b[ix->slot[i] - 1];
        if (b->kh == kh && (int)b->kind == kind && b->tier == tier &&
            b->len == len && memcmp(b->key, s, len) == 0)
            return &ix->slot[i];
    }
}

/* The bucket of (kind, tier, s), or NULL. */
static const ix_bucket *lookup(const rule_index *ix, uint64_t h, int kind,
                               uint32_t tier, const char *s, size_t len)
{
    uint32_t at = *probe(ix, key_hash(h, kind, tier, len), kind, tier, s,
                         len);

    return at ? &ix->b[at - 1] : NULL;
}

/* Room for one more bucket: the array and the slots (kept at most half
 * full) grown as needed.  0, or -1 out of memory. */
static int make_room(rule_index *ix)
{
    if (ix->nb == ix->cap) {
        ix_bucket *b = realloc(ix->b, 2 * (size_t)ix->cap * sizeof *b);
        if (!b)
            return -1;
        ix->b = b;
        ix->cap *= 2;
    }
    if (2 * ((size_t)ix->nb + 1) > ix->mask + 1) {
        size_t size = 2 * (ix->mask + 1), mask = size - 1;
        uint32_t *slot = calloc(size, sizeof *slot);
        if (!slot)
            return -1;
        for (uint32_t k = 0; k < ix->nb; k++) {
            size_t i = ix->b[k].kh & mask;
            while (slot[i])
                i = (i + 1) & mask;
            slot[i] = k + 1;
        }
        free(ix->slot);
        ix->slot = slot;
        ix->mask = mask;
    }
    return 0;
}

/* The index of the bucket of (kind, tier, s), added if new; -1 out of
 * memory. */
static int64_t find_or_add(rule_index *ix, int kind, uint32_t tier,
                           const char *s, size_t len)
{
    uint64_t kh = key_hash(bytes_hash(kind, s, len), kind, tier, len);
    uint32_t *at = probe(ix, kh, kind, tier, s, len);

    if (*at)
        return *at - 1;
    if (make_room(ix) != 0)
        return -1;
    at = probe(ix, kh, kind, tier, s, len); /* the slots may have moved */
    ix->b[ix->nb] = (ix_bucket){.key = s, .kh = kh, .len = (uint32_t)len,
                                .tier = tier, .kind = (uint32_t)kind};
    *at = ++ix->nb;
    return ix->nb - 1;
}

/* 1 if the pattern is a prefix match: it ends in "**" and has no other
 * wildcard. */
static int is_prefix(const char *pat, size_t len)
{
    return len >= 2 && pat[len - 1] == '*' && pat[len - 2] == '*' &&
           strcspn(pat, "*?") == len - 2;
}

#define TO_GLOBS (-2) /* bucket_of(): the rule goes to the glob list */
#define NOT_FILED (-3) /* a per-value rule: not here (rule_values.h) */

/* The tiers met so far while building; the last one is kept, as rules
 * of one tier tend to come together. */
typedef struct tier_memo {
    uint32_t n;
    const char *last;
    uint32_t last_id;
    int64_t last_k; /* its bucket */
} tier_memo;

/* The id of tier name t (1 up), added if new; 0 out of memory. */
static uint32_t tier_id(rule_index *ix, tier_memo *ts, const char *t)
{
    int64_t k;

    if (ts->last && strcmp(ts->last, t) == 0)
        return ts->last_id;
    if ((k = find_or_add(ix, IX_TIER, 0, t, strlen(t))) < 0)
        return 0;
    if (ix->b[k].cnt++ == 0)
        ix->b[k].off = ++ts->n;
    ts->last = t;
    ts->last_k = k;
    return ts->last_id = ix->b[k].off;
}

/* The bucket rule r is filed under, TO_GLOBS, or -1 out of memory. */
static int64_t bucket_of(rule_index *ix, const rl_rule *r, tier_memo *ts)
{
    uint32_t tier = 0;
    size_t len = r->endpoint ? strlen(r->endpoint) : 0;
    int kind = !r->endpoint                   ? IX_ANY
               : !strpbrk(r->endpoint, "*?")  ? IX_EXACT
               : is_prefix(r->endpoint, len) ? IX_PREFIX
                                              : IX_GLOB;

    if (r->tier && !(tier = tier_id(ix, ts, r->tier)))
        return -1;
    if (tier) {
        ix->b[ts->last_k].has |= 1u << kind;
        ix->kinds |= 1u << IX_TIER;
    }
    ix->kinds |= 1u << kind;
    if (kind == IX_ANY)
        return find_or_add(ix, IX_ANY, tier, "", 0);
    if (kind == IX_EXACT)
        return find_or_add(ix, IX_EXACT, tier, r->endpoint, len);
    if (kind == IX_GLOB)
        return TO_GLOBS;
    ix->plen[(len - 2) / 64] |= (uint64_t)1 << ((len - 2) % 64);
    if (len - 2 > ix->plen_max)
        ix->plen_max = len - 2;
    return find_or_add(ix, IX_PREFIX, tier, r->endpoint, len - 2);
}

/* Count each bucket's rules (and the globs), then lay the runs out. */
static int file_rules(rule_index *ix, const rl_rule *rules, size_t n,
                      int64_t *where)
{
    tier_memo ts = {0};
    uint32_t off = 0;

    for (size_t r = 0; r < n; r++) {
        if (rules[r].values) { /* per-value: rule_values.h's index */
            where[r] = NOT_FILED;
            continue;
        }
        if ((where[r] = bucket_of(ix, &rules[r], &ts)) == -1)
            return -1;
        if (where[r] >= 0)
            ix->b[where[r]].cnt++;
        else
            ix->nglob++;
    }
    for (uint32_t k = 0; k < ix->nb; k++) {
        ix_bucket *b = &ix->b[k];
        if (b->kind != IX_TIER) {
            b->off = off;
            off += b->cnt;
            b->cnt = 0; /* counted again as they are filled */
        }
    }
    if ((off && !(ix->post = malloc(off * sizeof *ix->post))) ||
        (ix->nglob && !(ix->glob = malloc(ix->nglob * sizeof *ix->glob))))
        return -1;
    ix->nglob = 0;
    for (size_t r = 0; r < n; r++) {
        if (where[r] >= 0) {
            ix_bucket *b = &ix->b[where[r]];
            ix->post[b->off + b->cnt++] = (uint32_t)r;
        } else if (where[r] == TO_GLOBS) {
            ix->glob[ix->nglob++] = (uint32_t)r;
        }
    }
    return 0;
}

/* The glob rules' trie, each rule with its tier's id. */
static int index_globs(rule_index *ix, const rl_rule *rules)
{
    uint32_t *tier = malloc((ix->nglob ? ix->nglob : 1) * sizeof *tier);

    if (!tier)
        return -1;
    for (size_t i = 0; i < ix->nglob; i++) {
        const char *t = rules[ix->glob[i]].tier;
        const ix_bucket *b = t ? lookup(ix, bytes_hash(IX_TIER, t, strlen(t)),
                                        IX_TIER, 0, t, strlen(t))
                               : NULL;
        tier[i] = b ? b->off : 0;
    }
    ix->gx = glob_index_build(rules, ix->glob, tier, ix->nglob);
    free(tier);
    return ix->gx ? 0 : -1;
}

rule_index *rule_index_build(const rl_rule *rules, size_t n)
{
    rule_index *ix = calloc(1, sizeof *ix);
    int64_t *where = n ? malloc(n * sizeof *where) : NULL;
    size_t size = 4;

    while (size < 2 * (n + 1))
        size <<= 1;
    if (!ix || (n && !where)) {
        free(where);
        free(ix);
        return NULL;
    }
    ix->cap = (uint32_t)n + 1; /* no tiers: n buckets at most */
    ix->mask = size - 1;
    if (!(ix->b = malloc(ix->cap * sizeof *ix->b)) ||
        !(ix->slot = calloc(size, sizeof *ix->slot)) ||
        file_rules(ix, rules, n, where) != 0) {
        free(where);
        rule_index_free(ix);
        return NULL;
    }
    free(where);
    ix->any0 = lookup(ix, 0, IX_ANY, 0, "", 0);
    ix->any_only = (ix->kinds & ~(1u << IX_ANY)) == 0;
    if (index_globs(ix, rules) != 0) {
        rule_index_free(ix);
        return NULL;
    }
    return ix;
}

void rule_index_free(rule_index *ix)
{
    if (!ix)
        return;
    free(ix->b);
    free(ix->slot);
    free(ix->post);
    free(ix->glob);
    glob_index_free(ix->gx);
    free(ix);
}

size_t rule_index_bytes(const rule_index *ix)
{
    size_t posts = 0;

    if (!ix)
        return 0;
    for (uint32_t k = 0; k < ix->nb; k++)
        posts += ix->b[k].kind == IX_TIER ? 0 : ix->b[k].cnt;
    return sizeof *ix + ix->cap * sizeof *ix->b +
           (ix->mask + 1) * sizeof *ix->slot + posts * sizeof *ix->post +
           ix->nglob * sizeof *ix->glob + glob_index_bytes(ix->gx);
}

/* ---- a request ---------------------------------------------------------- */

/* The smallest `keep` rule numbers of those added. */
typedef struct collect {
    uint32_t buf[COLLECT_MAX];
    size_t n, keep;
    uint32_t above; /* numbers > above are dropped (trimmed before) */
} collect;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void sort_u32(uint32_t *v, size_t n)
{
    if (n > 16) {
        qsort(v, n, sizeof *v, cmp_u32);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        uint32_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Sort v[0..n) and drop repeats (the glob index may report a rule more
 * than once); returns how many are left. */
static size_t sort_unique(uint32_t *v, size_t n)
{
    size_t k = 0;

    sort_u32(v, n);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    return k;
}

static void add(collect *c, uint32_t r)
{
    if (r > c->above)
        return;
    if (c->n == COLLECT_MAX &&
        (c->n = sort_unique(c->buf, c->n)) >= c->keep) {
        c->n = c->keep;
        c->above = c->buf[c->keep - 1];
        if (r > c->above)
            return;
    }
    c->buf[c->n++] = r;
}

/* Does rule r count by a dimension the request carries? */
static int carried(const rl_rule *r, uint64_t present)
{
    return r->dim_id == RULE_DIM_GLOBAL || (present >> r->dim_id & 1);
}

/* Add the rules of bucket b (NULL: none) that count by a carried
 * dimension. */
static void add_run(const rule_index *ix, const rl_rule *rules,
                    const ix_bucket *b, uint64_t present, collect *c)
{
    for (uint32_t i = 0; b && i < b->cnt; i++) {
        uint32_t r = ix->post[b->off + i];
        if (r > c->above)
            return; /* a run is in rule order */
        if (carried(&rules[r], present))
            add(c, r);
    }
}

/* The same for bucket (kind, tier, s), looked up. */
static void add_bucket(const rule_index *ix, const rl_rule *rules,
                       uint64_t h, int kind, uint32_t tier, const char *s,
                       size_t len, uint64_t present, collect *c)
{
    add_run(ix, rules, lookup(ix, h, kind, tier, s, len), present, c);
}

/* The request's tier ids: 0 (no tier) and its own, if any rule has it;
 * *has: the kinds of rules its own has (ix_bucket.has). */
static size_t tier_ids(const rule_index *ix, const char *tier, size_t len,
                       uint32_t *ids, uint32_t *has)
{
    const ix_bucket *b;

    ids[0] = 0;
    if (!tier || len > RL_TIER_MAX)
        return 1;
    if (!(b = lookup(ix, bytes_hash(IX_TIER, tier, len), IX_TIER, 0, tier,
                     len)))
        return 1;
    ids[1] = b->off;
    *has = b->has;
    return 2;
}

/* The exact and prefix buckets of endpoint ep in the request's tiers
 * (the no-tier ones; its own if it has rules of the kind: has). */
static void add_endpoint(const rule_index *ix, const rl_rule *rules,
                         const char *ep, size_t elen, const uint32_t *tiers,
                         size_t nt, uint32_t has, uint64_t present,
                         collect *c)
{
    uint64_t h = hash_bytes(ep, elen, 0x1e), rh = FNV_OFFSET;
    size_t top = elen < ix->plen_max ? elen : ix->plen_max;
    size_t nte = nt > 1 && (has >> IX_EXACT & 1) ? 2 : 1;
    size_t ntp = nt > 1 && (has >> IX_PREFIX & 1) ? 2 : 1;

    for (size_t t = 0; t < nte; t++)
        add_bucket(ix, rules, h, IX_EXACT, tiers[t], ep, elen, present, c);
    for (size_t len = 0; len <= top; len++) {
        if (ix->plen[len / 64] >> (len % 64) & 1)
            for (size_t t = 0; t < ntp; t++)
                add_bucket(ix, rules, rh, IX_PREFIX, tiers[t], ep, len,
                           present, c);
        if (len < elen)
            rh = roll(rh, (unsigned char)ep[len]);
    }
}

/* glob_index_match()'s report: a glob rule that matches. */
typedef struct glob_ctx {
    const rl_rule *rules;
    uint64_t present;
    collect *c;
} glob_ctx;

static void add_glob(void *ctx, uint32_t r)
{
    const glob_ctx *g = ctx;

    if (carried(&g->rules[r], g->present))
        add(g->c, r);
}

/* The glob rules that match, by the trie (glob_index.h); one by one
 * should the endpoint hold more of its nodes at once than it keeps. */
static void add_globs(const rule_index *ix, const rl_rule *rules,
                      const char *ep, size_t elen, uint32_t tier_id,
                      const char *tier, size_t tlen, uint64_t present,
                      collect *c)
{
    glob_ctx g = {.rules = rules, .present = present, .c = c};

    if (glob_index_match(ix->gx, rules, ep, elen, tier_id, add_glob, &g) == 0)
        return;
    for (size_t i = 0; i < ix->nglob && ix->glob[i] <= c->above; i++) {
        const rl_rule *r = &rules[ix->glob[i]];
        if (carried(r, present) && rule_matches_n(r, ep, elen, tier, tlen))
            add(c, ix->glob[i]);
    }
}

/* A set whose rules have neither endpoint nor tier (one catch-all rule,
 * the usual nginx or gateway set): its one run, already in rule order
 * with no repeats, filtered straight into out -- what the collection,
 * sort and copy below would give, without them (~130 instructions of a
 * one-rule check). */
static size_t any_only_match(const rule_index *ix, const rl_rule *rules,
                             uint64_t present, uint32_t *out, size_t max)
{
    const ix_bucket *b = ix->any0;
    size_t n = 0, keep = max < RULE_INDEX_MAX ? max : RULE_INDEX_MAX;

    for (uint32_t i = 0; b && i < b->cnt && n < keep; i++) {
        uint32_t r = ix->post[b->off + i];
        if (carried(&rules[r], present))
            out[n++] = r;
    }
    return n;
}

/* Every other set: the buckets the request hits, collected, sorted and
 * trimmed.  Out of line, so the one-run case pays none of its frame. */
static __attribute__((noinline)) size_t
match_buckets(const rule_index *ix, const rl_rule *rules, const char *endpoint,
              size_t elen, const char *tier, size_t tlen, uint64_t present,
              uint32_t *out, size_t max)
{
    collect c; /* buf not zeroed: an initializer cleared all of it, ~150
                * instructions of every rl_check() */
    uint32_t tiers[2], has = 0;
    size_t nt, n;

    c.n = 0;
    c.keep = max < RULE_INDEX_MAX ? max : RULE_INDEX_MAX;
    c.above = UINT32_MAX;
    nt = tier_ids(ix, tier, tlen, tiers, &has);
    add_run(ix, rules, ix->any0, present, &c); /* tiers[0] is 0 */
    if (nt > 1 && (has >> IX_ANY & 1))
        add_bucket(ix, rules, 0, IX_ANY, tiers[1], "", 0, present, &c);
    if (endpoint && elen &&
        (ix->kinds & (1u << IX_EXACT | 1u << IX_PREFIX)))
        add_endpoint(ix, rules, endpoint, elen, tiers, nt, has, present, &c);
    if (endpoint && elen && (ix->kinds >> IX_GLOB & 1))
        add_globs(ix, rules, endpoint, elen,
                  nt > 1 && (has >> IX_GLOB & 1) ? tiers[1] : 0, tier, tlen,
                  present, &c);
    c.n = sort_unique(c.buf, c.n);
    n = c.n < c.keep ? c.n : c.keep;
    memcpy(out, c.buf, n * sizeof *out);
    return n;
}

size_t rule_index_match(const rule_index *ix, const rl_rule *rules,
                        const char *endpoint, size_t elen, const char *tier,
                        size_t tlen, uint64_t present, uint32_t *out,
                        size_t max)
{
    if (!ix || max == 0)
        return 0;
    if (ix->any_only)
        return any_only_match(ix, rules, present, out, max);
    return match_buckets(ix, rules, endpoint, elen, tier, tlen, present, out,
                         max);
}

int rule_index_any_only(const rule_index *ix)
{
    return !ix || ix->any_only;
}
