/*
 * rule_values.c -- per-value rules, "replaces" and "unlimited" (see
 * rule_values.h): the value patterns, the checks a set must pass, the
 * index of value patterns and the precedence a request's rules follow.
 *
 * The index is one array of patterns (exact values and "prefix*" globs)
 * sorted by a hash of (kind, dimension id, bytes), found through an
 * open-addressing table of the hashes; a request rolls one FNV-1a hash
 * over each of its values, probing at each prefix length the set uses and
 * at the end, so a check costs one pass over the value whatever the
 * number of overrides.  The other globs are a list, matched one by one.
 */
#include "rule_values.h"
#include "hash.h"
#include "rule_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
#define SPEC_EXACT 0x10000u /* above any glob's (<= RL_KEY_MAX + 1)     */
#define PLEN_WORDS ((RL_KEY_MAX + 64) / 64)

enum { VX_EXACT = 1, VX_PREFIX };

typedef struct vx_pat {
    uint64_t kh;       /* key_hash() of (kind, dim, bytes)               */
    const char *s;     /* the bytes (a prefix: the glob's, before `*`)   */
    uint32_t len, dim, kind, rule;
} vx_pat;

typedef struct vx_glob {
    const char *pat;
    uint32_t dim, rule, spec;
} vx_glob;

struct rule_values {
    vx_pat *pat;          /* sorted by kh                               */
    size_t npat;
    uint32_t *slot;       /* by kh: index of the first of its run + 1    */
    size_t mask;
    vx_glob *glob;
    size_t nglob;
    uint64_t plen[PLEN_WORDS]; /* prefix lengths the set uses            */
    uint64_t dims;        /* dimension ids some per-value rule counts by */
    uint32_t *rep;        /* the rules' "replaces" as rule numbers       */
    uint32_t *rep_off;    /* rule r's: rep[rep_off[r]..+nreplaces)       */
};

/* ---- patterns ---------------------------------------------------------- */

int rule_value_check(const char *s, char *err, size_t errlen)
{
    size_t n = strlen(s);

    if (n == 0 || n > RL_KEY_MAX)
        return snprintf(err, errlen, "must be 1..%d bytes", RL_KEY_MAX), -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return snprintf(err, errlen, "control byte at %zu", i), -1;
    if (strspn(s, "*") == n)
        return snprintf(err, errlen, "\"%s\" matches every value: leave "
                        "match.value out", s), -1;
    return 0;
}

int rule_value_match(const char *pat, const char *v, size_t vlen)
{
    const char *star = NULL;
    size_t i = 0, back = 0;

    while (i < vlen) {
        if (*pat == '*') {
            star = ++pat;
            back = i;
        } else if (*pat && *pat == v[i]) {
            pat++;
            i++;
        } else if (star) {
            pat = star;
            i = ++back;
        } else {
            return 0;
        }
    }
    while (*pat == '*')
        pat++;
    return *pat == '\0';
}

/* A pattern's specificity (rule_values.h): exact above any glob, a glob
 * by the bytes it fixes; a rule without match.value has 0. */
static uint32_t spec_of(const char *pat)
{
    size_t n = strlen(pat), stars = 0;

    for (size_t i = 0; i < n; i++)
        stars += pat[i] == '*';
    return stars ? (uint32_t)(1 + n - stars) : SPEC_EXACT + (uint32_t)n;
}

int rule_values_rule_check(const rl_rule *r, char *err, size_t errlen)
{
    if (r->unlimited && !r->values && !r->has_replaces)
        return snprintf(err, errlen, "unlimited: needs match.value or "
                        "replaces (else it lifts no limit)"), -1;
    if (r->unlimited && r->has_replaces && !r->nreplaces)
        return snprintf(err, errlen, "unlimited: replaces lists no rule "
                        "(it would lift no limit)"), -1;
    if (r->has_replaces && r->mode == RL_MODE_LOG)
        return snprintf(err, errlen, "replaces: not with mode \"log\" (a "
                        "dry run replaces nothing)"), -1;
    const char *id = r->replaces;

    for (uint32_t i = 0; i < r->nreplaces; i++, id += strlen(id) + 1)
        if (strcmp(id, r->id) == 0)
            return snprintf(err, errlen, "replaces: \"%s\" is the rule "
                            "itself", r->id), -1;
    return 0;
}

/* ---- the index --------------------------------------------------------- */

static uint64_t roll(uint64_t h, unsigned char c)
{
    return (h ^ c) * FNV_PRIME;
}

static uint64_t key_hash(uint64_t h, uint32_t kind, uint32_t dim,
                         size_t len)
{
    return hash_mix(h ^ len, ((uint64_t)kind << 32) | dim);
}

static uint64_t pat_hash(uint32_t kind, uint32_t dim, const char *s,
                         size_t len)
{
    uint64_t h = FNV_OFFSET;

    for (size_t i = 0; i < len; i++)
        h = roll(h, (unsigned char)s[i]);
    return key_hash(h, kind, dim, len);
}

static int cmp_pat(const void *a, const void *b)
{
    const vx_pat *x = a, *y = b;

    if (x->kh != y->kh)
        return x->kh < y->kh ? -1 : 1;
    return (x->rule > y->rule) - (x->rule < y->rule);
}

/* Count (fill NULL) or file (fill set) rule r's patterns. */
static void file_rule(rule_values *vx, const rl_rule *r, uint32_t num,
                      int fill)
{
    const char *p = r->values;

    for (uint32_t i = 0; i < r->nvalues; i++, p += strlen(p) + 1) {
        size_t len = strlen(p), star = strcspn(p, "*");
        uint32_t kind = star == len ? VX_EXACT
                        : star == len - 1 ? VX_PREFIX : 0;
        if (!kind) {
            if (fill)
                vx->glob[vx->nglob] = (vx_glob){.pat = p, .spec = spec_of(p),
                    .dim = (uint32_t)r->dim_id, .rule = num};
            vx->nglob++;
            continue;
        }
        if (fill) {
            size_t n = kind == VX_EXACT ? len : star;
            vx->pat[vx->npat] = (vx_pat){.s = p, .len = (uint32_t)n,
                .dim = (uint32_t)r->dim_id, .kind = kind, .rule = num,
                .kh = pat_hash(kind, (uint32_t)r->dim_id, p, n)};
            if (kind == VX_PREFIX)
                vx->plen[n / 64] |= (uint64_t)1 << (n % 64);
        }
        vx->npat++;
    }
}

static int file_patterns(rule_values *vx, const rl_rule *rules, size_t n)
{
    size_t size = 4;

    for (size_t r = 0; r < n; r++)
        file_rule(vx, &rules[r], (uint32_t)r, 0);
    if ((vx->npat && !(vx->pat = malloc(vx->npat * sizeof *vx->pat))) ||
        (vx->nglob && !(vx->glob = malloc(vx->nglob * sizeof *vx->glob))))
        return -1;
    vx->npat = vx->nglob = 0;
    for (size_t r = 0; r < n; r++) {
        file_rule(vx, &rules[r], (uint32_t)r, 1);
        if (rules[r].values)
            vx->dims |= (uint64_t)1 << rules[r].dim_id;
    }
    if (vx->npat)
        qsort(vx->pat, vx->npat, sizeof *vx->pat, cmp_pat);
    while (size < 2 * (vx->npat + 1))
        size <<= 1;
    if (!(vx->slot = calloc(size, sizeof *vx->slot)))
        return -1;
    vx->mask = size - 1;
    for (size_t i = 0; i < vx->npat; i++) {
        size_t at = vx->pat[i].kh & vx->mask;
        if (i && vx->pat[i - 1].kh == vx->pat[i].kh)
            continue; /* the run's first is in the table */
        while (vx->slot[at])
            at = (at + 1) & vx->mask;
        vx->slot[at] = (uint32_t)i + 1;
    }
    return 0;
}

/* The rules being indexed, and how an id finds its rule. */
typedef struct rule_set {
    const rl_rule *rules;
    size_t n;
    rule_find_fn find;
    const void *ctx;
} rule_set;

/* Resolve each rule's "replaces" to rule numbers; RL_ERULE naming the
 * first id that is no rule of the set. */
static int resolve(rule_values *vx, const rule_set *rs, char *err,
                   size_t errlen)
{
    size_t total = 0;

    for (size_t r = 0; r < rs->n; r++)
        total += rs->rules[r].nreplaces;
    if (!(vx->rep_off = malloc(rs->n * sizeof *vx->rep_off)) ||
        (total && !(vx->rep = malloc(total * sizeof *vx->rep))))
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    total = 0;
    for (size_t r = 0; r < rs->n; r++) {
        const char *id = rs->rules[r].replaces;
        vx->rep_off[r] = (uint32_t)total;
        for (uint32_t i = 0; i < rs->rules[r].nreplaces; i++) {
            const rl_rule *x = rs->find(rs->ctx, id);
            if (!x)
                return snprintf(err, errlen, "rules[%zu]: replaces: rule "
                                "\"%s\" replaces \"%s\", which is not in "
                                "the set", r, rs->rules[r].id, id), RL_ERULE;
            vx->rep[total++] = (uint32_t)(x - rs->rules);
            id += strlen(id) + 1;
        }
    }
    return RL_OK;
}

/* A chain of "replaces" that comes back: RL_ERULE naming it.  Iterative
 * depth-first search (the set may hold RL_RULES_MAX rules). */
static int find_cycle(const rule_values *vx, const rule_set *rs,
                      char *err, size_t errlen)
{
    uint8_t *color = calloc(rs->n, 1); /* 0 new, 1 on the path, 2 done */
    uint32_t *stack = malloc(rs->n * sizeof *stack);
    uint32_t *edge = malloc(rs->n * sizeof *edge);
    int rc = RL_OK;

    if (!color || !stack || !edge) {
        rc = RL_ENOMEM;
        snprintf(err, errlen, "out of memory");
    }
    for (size_t s = 0; rc == RL_OK && s < rs->n; s++) {
        size_t depth = 0;
        if (color[s] || !rs->rules[s].nreplaces)
            continue;
        stack[depth] = (uint32_t)s;
        edge[depth++] = 0;
        color[s] = 1;
        while (depth && rc == RL_OK) {
            uint32_t r = stack[depth - 1], e = edge[depth - 1]++;
            uint32_t x;
            if (e == rs->rules[r].nreplaces) {
                color[r] = 2;
                depth--;
                continue;
            }
            x = vx->rep[vx->rep_off[r] + e];
            if (color[x] == 1) {
                rc = RL_ERULE;
                snprintf(err, errlen, "rules[%u]: replaces: \"%s\" leads "
                         "back to \"%s\" (a cycle)", r, rs->rules[x].id,
                         rs->rules[r].id);
            } else if (!color[x]) {
                color[x] = 1;
                stack[depth] = x;
                edge[depth++] = 0;
            }
        }
    }
    free(color);
    free(stack);
    free(edge);
    return rc;
}

int rule_values_build(const rl_rule *rules, size_t n, rule_find_fn find,
                      const void *ctx, rule_values **out, char *err,
                      size_t errlen)
{
    const rule_set set = {.rules = rules, .n = n, .find = find, .ctx = ctx};
    const rule_set *rs = &set;
    rule_values *vx;
    int used = 0, rc;

    *out = NULL;
    for (size_t r = 0; r < rs->n && !used; r++)
        used = rs->rules[r].values || rs->rules[r].has_replaces ||
               rs->rules[r].unlimited;
    if (!used)
        return RL_OK;
    if (!(vx = calloc(1, sizeof *vx)))
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    if (file_patterns(vx, rs->rules, rs->n)) {
        rule_values_free(vx);
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    }
    if ((rc = resolve(vx, rs, err, errlen)) != RL_OK ||
        (rc = find_cycle(vx, rs, err, errlen)) != RL_OK) {
        rule_values_free(vx);
        return rc;
    }
    *out = vx;
    return RL_OK;
}

void rule_values_free(rule_values *vx)
{
    if (!vx)
        return;
    free(vx->pat);
    free(vx->slot);
    free(vx->glob);
    free(vx->rep);
    free(vx->rep_off);
    free(vx);
}

/* ---- a request --------------------------------------------------------- */

/* The rules a request matches, with the specificity each matched at. */
typedef struct cand {
    uint32_t rule[RULE_INDEX_MAX], spec[RULE_INDEX_MAX];
    size_t n;
    int over; /* more than RULE_INDEX_MAX */
} cand;

static void cand_add(cand *c, uint32_t rule, uint32_t spec)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->rule[i] == rule) {
            if (spec > c->spec[i])
                c->spec[i] = spec;
            return;
        }
    if (c->n == RULE_INDEX_MAX) {
        c->over = 1;
        return;
    }
    c->rule[c->n] = rule;
    c->spec[c->n++] = spec;
}

/* The request's endpoint and tier, counted (rule_matches_n()). */
typedef struct req_where {
    const char *ep, *tier;
    size_t elen, tlen;
} req_where;

static int where_matches(const rl_rule *r, const req_where *w)
{
    return rule_matches_n(r, w->ep, w->elen, w->tier, w->tlen);
}

/* The rules of the run of (kind, dim, v[0..len)) whose hash is kh and
 * whose endpoint and tier match. */
static void probe(const rule_values *vx, const rl_rule *rules, uint64_t kh,
                  uint32_t kind, uint32_t dim, const char *v, size_t len,
                  const req_where *w, cand *c)
{
    size_t at = kh & vx->mask;

    for (; vx->slot[at]; at = (at + 1) & vx->mask) {
        size_t i = vx->slot[at] - 1;
        if (vx->pat[i].kh != kh)
            continue;
        for (; i < vx->npat && vx->pat[i].kh == kh; i++) {
            const vx_pat *p = &vx->pat[i];
            if (p->kind == kind && p->dim == dim && p->len == len &&
                memcmp(p->s, v, len) == 0 &&
                where_matches(&rules[p->rule], w))
                cand_add(c, p->rule, kind == VX_EXACT
                                         ? SPEC_EXACT + (uint32_t)len
                                         : 1 + (uint32_t)len);
        }
        return;
    }
}

/* Every per-value rule of dimension dim matching value v (vlen bytes,
 * 0: up to its NUL). */
static void match_value(const rule_values *vx, const rl_rule *rules,
                        uint32_t dim, const char *v, size_t vlen,
                        const req_where *w, cand *c)
{
    uint64_t h = FNV_OFFSET;

    if (vlen == 0)
        vlen = strnlen(v, RL_KEY_MAX + 1);
    if (vlen > RL_KEY_MAX)
        return; /* no pattern is longer; the key's own check refuses it */
    for (size_t len = 0; len <= vlen; len++) {
        if (vx->plen[len / 64] >> (len % 64) & 1)
            probe(vx, rules, key_hash(h, VX_PREFIX, dim, len), VX_PREFIX,
                  dim, v, len, w, c);
        if (len < vlen)
            h = roll(h, (unsigned char)v[len]);
    }
    probe(vx, rules, key_hash(h, VX_EXACT, dim, vlen), VX_EXACT, dim, v,
          vlen, w, c);
    for (size_t i = 0; i < vx->nglob; i++) {
        const vx_glob *g = &vx->glob[i];
        if (g->dim == dim && rule_value_match(g->pat, v, vlen) &&
            where_matches(&rules[g->rule], w))
            cand_add(c, g->rule, g->spec);
    }
}

static int same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Is x of y's slot: the same dimension, endpoint pattern and tier? */
static int same_slot(const rl_rule *x, const rl_rule *y)
{
    return x->dim_id == y->dim_id && same_str(x->endpoint, y->endpoint) &&
           same_str(x->tier, y->tier);
}

/* Mark in out[] the candidates candidate y takes out. */
static void take_out(const rule_values *vx, const rl_rule *rules,
                     const cand *c, size_t y, uint8_t *out)
{
    const rl_rule *ry = &rules[c->rule[y]];

    if (ry->mode != RL_MODE_ENFORCE)
        return;
    if (ry->has_replaces) {
        const uint32_t *rep = vx->rep + vx->rep_off[c->rule[y]];
        for (uint32_t k = 0; k < ry->nreplaces; k++)
            for (size_t x = 0; x < c->n; x++)
                out[x] |= c->rule[x] == rep[k];
        return;
    }
    if (!ry->values)
        return;
    for (size_t x = 0; x < c->n; x++)
        out[x] |= c->spec[x] < c->spec[y] &&
                  same_slot(&rules[c->rule[x]], ry);
}

size_t rule_values_apply(const rule_values *vx, const rl_rule *rules,
                         const char *endpoint, size_t elen, const char *tier,
                         size_t tlen, uint64_t present,
                         const char *const *val, const size_t *len,
                         uint32_t *hit, size_t nhit)
{
    const req_where w = {.ep = endpoint, .elen = elen, .tier = tier,
                         .tlen = tlen};
    uint8_t out[RULE_INDEX_MAX] = {0};
    uint64_t dims;
    size_t n = 0;
    cand c;

    if (!vx)
        return nhit;
    c.n = 0;
    c.over = nhit == RULE_INDEX_MAX;
    for (size_t i = 0; i < nhit; i++) {
        c.rule[c.n] = hit[i];
        c.spec[c.n++] = 0;
    }
    for (dims = vx->dims & present; dims; dims &= dims - 1) {
        uint32_t d = (uint32_t)__builtin_ctzll(dims);
        match_value(vx, rules, d, val[d], len[d], &w, &c);
    }
    if (c.over)
        return RULE_INDEX_MAX;
    for (size_t y = 0; y < c.n; y++)
        take_out(vx, rules, &c, y, out);
    for (size_t i = 0; i < c.n; i++) {
        uint32_t r = c.rule[i];
        size_t j = n;
        if (out[i] || rules[r].unlimited)
            continue;
        for (; j > 0 && hit[j - 1] > r; j--) /* into rule order */
            hit[j] = hit[j - 1];
        hit[j] = r;
        n++;
    }
    return n;
}
