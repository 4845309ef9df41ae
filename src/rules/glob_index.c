/*
 * glob_index.c -- see glob_index.h.  The trie is two arrays: nodes (node
 * 0 the root) and edges.  Every literal and second-stage edge is in one
 * open-addressing table keyed by (parent node, kind, segment bytes), so a
 * request's segment costs one hash and one probe per node it stands on;
 * building finds an edge that is already there the same way, so patterns
 * sharing segments share nodes.  A node's STAR and STARSTAR children are
 * fields of the node; its second-stage edges a chain through the edges.
 * The rules ending at a node (and those filed there with the rest of their
 * pattern) are one run of a postings array, laid out by counting, each
 * part sorted by (tier id, rule): a request reads its two tiers' runs
 * (no tier, its own) found by binary search, so rules of other tiers on
 * the same pattern cost it nothing.
 *
 * Sizes are known before building: a pattern of k segments adds at most k
 * nodes and k edges, so the arrays are allocated once and shrunk to what
 * was used.
 */
#include "glob_index.h"
#include "hash.h"
#include "pattern.h"

#include <stdlib.h>
#include <string.h>

#define SEG_SEED 0x61 /* hash_bytes() seed of a segment's bytes */
#define NO_TAIL UINT32_MAX

enum { EDGE_LIT = 1, EDGE_PART = 2 };
enum { SEG_LIT, SEG_STAR, SEG_DSTAR, SEG_PART, SEG_TAIL };

typedef struct gnode {
    uint32_t star, dstar; /* children by STAR and by STARSTAR, 0: none     */
    uint32_t part;        /* first second-stage edge + 1, 0: none          */
    uint32_t off;         /* post[off..off+nterm): rules ending here; then */
    uint32_t nterm, ntail; /* ntail filed here with their pattern's rest   */
    uint8_t lit;          /* has literal children                          */
    uint8_t loop;         /* reached by STARSTAR: takes more segments too  */
} gnode;

typedef struct gedge {
    const char *key;      /* the segment's bytes (in the rule's pattern)  */
    uint64_t kh;          /* hash of (parent, kind, bytes)                */
    uint32_t len, parent, child;
    uint32_t kind;        /* EDGE_*                                       */
    uint32_t next;        /* a second-stage edge: its parent's next + 1   */
} gedge;

typedef struct gpost {
    uint32_t rule, tier;
    uint32_t at;          /* a tail: where its pattern's rest starts      */
} gpost;

struct glob_index {
    gnode *node;
    gedge *edge;
    gpost *post;
    uint32_t *slot;       /* edge + 1 by hash, 0: empty; mask + 1 of them */
    size_t mask, nn, ne, np;
};

/* ---- segments ---------------------------------------------------------- */

/* The end of the segment starting at pos: the next '/' or len. */
static size_t seg_end(const char *s, size_t pos, size_t len)
{
    const char *slash = memchr(s + pos, '/', len - pos);

    return slash ? (size_t)(slash - s) : len;
}

static int seg_kind(const char *s, size_t len)
{
    int wild = 0;

    if (len == 1 && s[0] == '*')
        return SEG_STAR;
    if (len == 2 && s[0] == '*' && s[1] == '*')
        return SEG_DSTAR;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '*' && i + 1 < len && s[i + 1] == '*')
            return SEG_TAIL;
        wild |= s[i] == '*' || s[i] == '?';
    }
    return wild ? SEG_PART : SEG_LIT;
}

/* Does p[0..len) ('?': any byte) match s[0..len)? */
static int fixed_at(const char *p, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != '?' && p[i] != s[i])
            return 0;
    return 1;
}

/* Does segment pattern p[0..m) (STAR and '?', no STARSTAR, no '/') match
 * segment s[0..n) (no '/')?  The bytes before the first STAR and after
 * the last must match the segment's ends (a quick no for most segments);
 * between them, greedy, going back to the last STAR on a mismatch: right
 * for a single kind of star, O(n) times the longest run between stars at
 * worst. */
static int seg_glob(const char *p, size_t m, const char *s, size_t n)
{
    size_t head = 0, tail = 0, i, j, star = SIZE_MAX, mark = 0;

    while (head < m && p[head] != '*')
        head++;
    if (head == m)
        return m == n && fixed_at(p, s, n);
    while (p[m - 1 - tail] != '*')
        tail++;
    if (n < head + tail || !fixed_at(p, s, head) ||
        !fixed_at(p + m - tail, s + n - tail, tail))
        return 0;
    p += head, s += head;
    m -= head + tail, n -= head + tail;
    i = j = 0;

    while (j < n) {
        if (i < m && p[i] == '*') {
            star = i++;
            mark = j;
        } else if (i < m && (p[i] == '?' || p[i] == s[j])) {
            i++;
            j++;
        } else if (star != SIZE_MAX) {
            i = star + 1;
            j = ++mark;
        } else {
            return 0;
        }
    }
    while (i < m && p[i] == '*')
        i++;
    return i == m;
}

static uint64_t seg_hash(const char *s, size_t len)
{
    return hash_bytes(s, len, SEG_SEED) ^ len;
}

static uint64_t edge_hash(uint64_t sh, uint32_t parent, uint32_t kind)
{
    return hash_mix(sh, (uint64_t)parent << 2 | kind);
}

/* The slot of edge (parent, kind, s): its own, or the empty one where it
 * would go. */
static uint32_t *probe(const glob_index *gx, uint64_t kh, uint32_t parent,
                       uint32_t kind, const char *s, size_t len)
{
    for (size_t i = kh & gx->mask;; i = (i + 1) & gx->mask) {
        const gedge *e;
        if (!gx->slot[i])
            return &gx->slot[i];
        e = &gx->edge[gx->slot[i] - 1];
        if (e->kh == kh && e->parent == parent && e->kind == kind &&
            e->len == len && memcmp(e->key, s, len) == 0)
            return &gx->slot[i];
    }
}

/* ---- building ---------------------------------------------------------- */

static uint32_t new_node(glob_index *gx)
{
    gx->node[gx->nn] = (gnode){0};
    return (uint32_t)gx->nn++;
}

/* The child of `at` by a literal or second-stage segment, added if new. */
static uint32_t edge_child(glob_index *gx, uint32_t at, uint32_t kind,
                           const char *s, size_t len)
{
    uint64_t kh = edge_hash(seg_hash(s, len), at, kind);
    uint32_t *slot = probe(gx, kh, at, kind, s, len);
    gedge *e;

    if (*slot)
        return gx->edge[*slot - 1].child;
    e = &gx->edge[gx->ne];
    *e = (gedge){.key = s, .kh = kh, .len = (uint32_t)len, .parent = at,
                 .child = new_node(gx), .kind = kind};
    if (kind == EDGE_PART) {
        e->next = gx->node[at].part;
        gx->node[at].part = (uint32_t)gx->ne + 1;
    } else {
        gx->node[at].lit = 1;
    }
    *slot = (uint32_t)++gx->ne;
    return e->child;
}

/* File pattern p: the node it ends at, and in *at where its rest starts
 * if it is filed as a tail there (else NO_TAIL). */
static uint32_t insert(glob_index *gx, const char *p, uint32_t *at)
{
    size_t len = strlen(p);
    uint32_t n = 0;

    *at = NO_TAIL;
    for (size_t pos = 0;; pos = seg_end(p, pos, len) + 1) {
        size_t e = seg_end(p, pos, len);
        switch (seg_kind(p + pos, e - pos)) {
        case SEG_TAIL:
            *at = (uint32_t)pos;
            return n;
        case SEG_STAR:
            if (!gx->node[n].star)
                gx->node[n].star = new_node(gx);
            n = gx->node[n].star;
            break;
        case SEG_DSTAR:
            if (!gx->node[n].dstar) {
                uint32_t d = new_node(gx);
                gx->node[n].dstar = d;
                gx->node[d].loop = 1;
            }
            n = gx->node[n].dstar;
            break;
        default:
            n = edge_child(gx, n,
                           seg_kind(p + pos, e - pos) == SEG_PART ? EDGE_PART
                                                                  : EDGE_LIT,
                           p + pos, e - pos);
        }
        if (e == len)
            return n;
    }
}

static int by_tier(const void *a, const void *b)
{
    const gpost *x = a, *y = b;

    if (x->tier != y->tier)
        return x->tier < y->tier ? -1 : 1;
    return (x->rule > y->rule) - (x->rule < y->rule);
}

/* Count each node's rules, lay the runs out, fill them in given order. */
static int post_rules(glob_index *gx, const uint32_t *which,
                      const uint32_t *tier, size_t n, const uint32_t *end,
                      const uint32_t *at)
{
    uint32_t off = 0;

    for (size_t i = 0; i < n; i++) {
        if (at[i] == NO_TAIL)
            gx->node[end[i]].nterm++;
        else
            gx->node[end[i]].ntail++;
    }
    for (size_t k = 0; k < gx->nn; k++) {
        gnode *g = &gx->node[k];
        g->off = off;
        off += g->nterm + g->ntail;
        g->ntail = g->nterm; /* the fill's cursors: terms, then tails */
        g->nterm = 0;
    }
    if (off && !(gx->post = malloc(off * sizeof *gx->post)))
        return -1;
    gx->np = off;
    for (size_t pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            gnode *g = &gx->node[end[i]];
            if ((at[i] == NO_TAIL) != (pass == 0))
                continue;
            gx->post[g->off + (pass ? g->ntail++ : g->nterm++)] =
                (gpost){.rule = which[i], .tier = tier[i], .at = at[i]};
        }
    for (size_t k = 0; k < gx->nn; k++) {
        gnode *g = &gx->node[k];
        g->ntail -= g->nterm;
        if (!gx->post) /* no rule at all: qsort takes no NULL, even for 0 */
            continue;
        qsort(gx->post + g->off, g->nterm, sizeof *gx->post, by_tier);
        qsort(gx->post + g->off + g->nterm, g->ntail, sizeof *gx->post,
              by_tier);
    }
    return 0;
}

/* Give back what the sizes known in advance left unused. */
static void shrink(glob_index *gx)
{
    gnode *nd = realloc(gx->node, gx->nn * sizeof *nd);
    gedge *ed = gx->ne ? realloc(gx->edge, gx->ne * sizeof *ed) : NULL;

    if (nd)
        gx->node = nd;
    if (ed)
        gx->edge = ed;
}

static size_t segments(const char *p)
{
    size_t k = 1;

    for (; *p; p++)
        k += *p == '/';
    return k;
}

glob_index *glob_index_build(const rl_rule *rules, const uint32_t *which,
                             const uint32_t *tier, size_t n)
{
    glob_index *gx = calloc(1, sizeof *gx);
    uint32_t *end = malloc((n ? n : 1) * sizeof *end);
    uint32_t *at = malloc((n ? n : 1) * sizeof *at);
    size_t segs = 0, size = 4;
    int ok = gx && end && at;

    for (size_t i = 0; ok && i < n; i++)
        segs += segments(rules[which[i]].endpoint);
    while (size < 2 * (segs + 1))
        size <<= 1;
    ok = ok && (gx->node = malloc((segs + 1) * sizeof *gx->node)) &&
         (gx->edge = malloc((segs ? segs : 1) * sizeof *gx->edge)) &&
         (gx->slot = calloc(size, sizeof *gx->slot));
    if (ok) {
        gx->mask = size - 1;
        new_node(gx); /* the root */
        for (size_t i = 0; i < n; i++)
            end[i] = insert(gx, rules[which[i]].endpoint, &at[i]);
        ok = post_rules(gx, which, tier, n, end, at) == 0;
        shrink(gx);
    }
    free(end);
    free(at);
    if (!ok) {
        glob_index_free(gx);
        return NULL;
    }
    return gx;
}

void glob_index_free(glob_index *gx)
{
    if (!gx)
        return;
    free(gx->node);
    free(gx->edge);
    free(gx->post);
    free(gx->slot);
    free(gx);
}

size_t glob_index_bytes(const glob_index *gx)
{
    if (!gx)
        return 0;
    return sizeof *gx + gx->nn * sizeof *gx->node +
           gx->ne * sizeof *gx->edge + gx->np * sizeof *gx->post +
           (gx->mask + 1) * sizeof *gx->slot;
}

/* ---- a request ----------------------------------------------------------- */

typedef struct nodeset {
    size_t n;
    uint32_t id[GLOB_INDEX_STATES];
} nodeset;

/* Add node id once; -1 if the set is full. */
static int put(nodeset *s, uint32_t id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->id[i] == id)
            return 0;
    if (s->n == GLOB_INDEX_STATES)
        return -1;
    s->id[s->n++] = id;
    return 0;
}

/* One endpoint segment, what each node of `cur` reaches by it. */
typedef struct segment {
    const char *s;
    size_t len;
    uint64_t h; /* seg_hash(), once a literal edge asks for it */
    int hashed;
} segment;

/* The literal child of node at by segment sg, or 0. */
static uint32_t lit_child(const glob_index *gx, uint32_t at, segment *sg)
{
    uint32_t slot;

    if (!sg->hashed) {
        sg->h = seg_hash(sg->s, sg->len);
        sg->hashed = 1;
    }
    slot = *probe(gx, edge_hash(sg->h, at, EDGE_LIT), at, EDGE_LIT, sg->s,
                  sg->len);
    return slot ? gx->edge[slot - 1].child : 0;
}

/* The nodes node `at` reaches by segment sg, into next; -1 if full. */
static int step(const glob_index *gx, uint32_t at, segment *sg,
                nodeset *next)
{
    const gnode *g = &gx->node[at];
    uint32_t c;

    if ((g->loop && put(next, at)) || (g->star && put(next, g->star)) ||
        (g->dstar && put(next, g->dstar)) ||
        (g->lit && (c = lit_child(gx, at, sg)) && put(next, c)))
        return -1;
    for (uint32_t k = g->part; k; k = gx->edge[k - 1].next) {
        const gedge *e = &gx->edge[k - 1];
        if (seg_glob(e->key, e->len, sg->s, sg->len) && put(next, e->child))
            return -1;
    }
    return 0;
}

/* The first of p[0..n) (sorted by tier) of tier id `tier`, or n. */
static uint32_t tier_start(const gpost *p, uint32_t n, uint32_t tier)
{
    uint32_t lo = 0, hi = n;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (p[mid].tier < tier)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The rules of p[0..n) of no tier and of the request's (tier; 0: none):
 * each to emit(), a tail (rest not NULL) only if the rest of its pattern
 * matches the rest of the endpoint (rlen bytes). */
static void report(const gpost *p, uint32_t n, const rl_rule *rules,
                   const char *rest, size_t rlen, uint32_t tier,
                   glob_emit *emit, void *ctx)
{
    for (int pass = 0; pass < 1 + (tier != 0); pass++) {
        uint32_t t = pass ? tier : 0;
        for (uint32_t i = pass ? tier_start(p, n, t) : 0;
             i < n && p[i].tier == t; i++)
            if (!rest || pattern_match_n(rules[p[i].rule].endpoint +
                                         p[i].at, rest, rlen))
                emit(ctx, p[i].rule);
    }
}

int glob_index_match(const glob_index *gx, const rl_rule *rules,
                     const char *endpoint, size_t elen, uint32_t tier,
                     glob_emit *emit, void *ctx)
{
    nodeset a, b, *cur = &a, *next = &b; /* not zeroed: 64 ids a call */

    if (!gx || !elen)
        return 0;
    a.n = 1;
    a.id[0] = 0; /* the root */
    for (size_t pos = 0, end;; pos = end + 1) {
        segment sg = {.s = endpoint + pos,
                      .len = (end = seg_end(endpoint, pos, elen)) - pos};
        nodeset *t;
        next->n = 0;
        for (size_t i = 0; i < cur->n; i++) {
            const gnode *g = &gx->node[cur->id[i]];
            if (g->ntail)
                report(gx->post + g->off + g->nterm, g->ntail, rules,
                       endpoint + pos, elen - pos, tier, emit, ctx);
            if (step(gx, cur->id[i], &sg, next) != 0)
                return -1;
        }
        if (end == elen || next->n == 0)
            break;
        t = cur, cur = next, next = t;
    }
    for (size_t i = 0; i < next->n; i++) {
        const gnode *g = &gx->node[next->id[i]];
        report(gx->post + g->off, g->nterm, rules, NULL, 0, tier, emit,
               ctx);
    }
    return 0;
}
