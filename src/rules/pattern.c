/*
 * pattern.c -- see pattern.h.  A pattern is a small automaton: state i
 * means "the first i pattern bytes have matched the endpoint read so far";
 * a literal or '?' at i moves to i + 1 on a byte it matches, a star stays
 * at i (on any byte but '/' for a single one, on any byte for "**") and
 * also passes on to what follows it without reading.  The states are the
 * bits of NFA_WORDS 64-bit words (a pattern has at most RL_PATTERN_MAX
 * bytes), so each endpoint byte costs a few word operations per 64
 * pattern bytes, whatever the pattern says: a match is linear in the
 * endpoint, at most NFA_WORDS words a byte, with no backtracking and no
 * allocation.  Before reading anything, the bytes before the first star
 * and after the last must match the endpoint's ends, which turns most
 * endpoints away at once.  A pattern whose stars are all "**" and which
 * has no '?' needs no automaton: its segments are found in turn with
 * memmem(), O(pattern + endpoint).
 */
#include "pattern.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NFA_WORDS ((RL_PATTERN_MAX + 64) / 64) /* states 0..RL_PATTERN_MAX */

/* A pattern's transitions by bit: bit i stands for pattern byte i. */
typedef struct nfa {
    uint8_t row[256];                   /* byte -> its lit row, 0: none */
    uint64_t lit[RL_PATTERN_MAX + 1][NFA_WORDS]; /* literal bytes       */
    uint64_t any[NFA_WORDS];            /* '?': any byte but '/'        */
    uint64_t star[NFA_WORDS];           /* '*': stays on all but '/'    */
    uint64_t dstar[NFA_WORDS];          /* "**": stays on any byte      */
    size_t words;                       /* in use: states 0..m          */
} nfa;


int pattern_check(const char *pat, char *err, size_t errlen)
{
    size_t n = strlen(pat);

    if (n == 0)
        return snprintf(err, errlen, "match.endpoint: empty pattern"), -1;
    if (n > RL_PATTERN_MAX)
        return snprintf(err, errlen, "match.endpoint: longer than %d bytes",
                        RL_PATTERN_MAX), -1;
    /* A request's endpoint is a path: it starts with '/', which a
     * pattern starting with another byte could never match. */
    if (pat[0] != '/' && pat[0] != '*')
        return snprintf(err, errlen, "match.endpoint: must start with '/' "
                        "(or '*'): an endpoint is a path, which this "
                        "pattern could never match"), -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)pat[i];
        if (ch < 0x21 || ch == 0x7f)
            return snprintf(err, errlen,
                            "match.endpoint: control or space byte at %zu",
                            i), -1;
        if (ch == '*' && pat[i + 1] == '*' && pat[i + 2] == '*')
            return snprintf(err, errlen,
                            "match.endpoint: '***' at %zu (use * or **)",
                            i), -1;
    }
    return 0;
}

int pattern_is_exact(const char *pat)
{
    return strpbrk(pat, "*?") == NULL;
}

/* Does seg[0..len) match s[0..len) exactly ('?': any byte but '/')? */
static int seg_at(const char *seg, size_t len, const char *s)
{
    for (size_t i = 0; i < len; i++)
        if (seg[i] == '?' ? s[i] == '/' : seg[i] != s[i])
            return 0;
    return 1;
}

static void set_bit(uint64_t *w, size_t i)
{
    w[i / 64] |= (uint64_t)1 << (i % 64);
}

static void nfa_init(nfa *a, const char *pat, size_t m)
{
    size_t rows = 0;

    memset(a->row, 0, sizeof a->row);
    memset(a->lit[0], 0, sizeof a->lit[0]);
    memset(a->any, 0, sizeof a->any);
    memset(a->star, 0, sizeof a->star);
    memset(a->dstar, 0, sizeof a->dstar);
    a->words = m / 64 + 1;
    for (size_t i = 0; i < m; i++) {
        unsigned char c = (unsigned char)pat[i];
        if (c == '*' && pat[i + 1] == '*') {
            set_bit(a->dstar, i++);
        } else if (c == '*') {
            set_bit(a->star, i);
        } else if (c == '?') {
            set_bit(a->any, i);
        } else {
            if (!a->row[c]) {
                a->row[c] = (uint8_t)++rows;
                memset(a->lit[rows], 0, sizeof a->lit[rows]);
            }
            set_bit(a->lit[a->row[c]], i);
        }
    }
}

/* Stars pass on without reading: a star at i reaches i + 1, "**" at i
 * reaches i + 2.  Once is enough: what a star reaches is never a star
 * ("***" is not a pattern). */
static void closure(const nfa *a, uint64_t *r)
{
    uint64_t one[NFA_WORDS], two[NFA_WORDS];

    for (size_t w = 0; w < a->words; w++) {
        one[w] = r[w] & a->star[w];
        two[w] = r[w] & a->dstar[w];
    }
    for (size_t w = a->words; w-- > 0;)
        r[w] |= one[w] << 1 | two[w] << 2 |
                (w ? one[w - 1] >> 63 | two[w - 1] >> 62 : 0);
}

/* Read byte c: r becomes the states reached; 0 if there are none. */
static int step(const nfa *a, uint64_t *r, unsigned char c)
{
    const uint64_t *lit = a->lit[a->row[c]];
    uint64_t carry = 0, live = 0;
    int slash = c == '/';

    for (size_t w = 0; w < a->words; w++) {
        uint64_t adv = r[w] & (lit[w] | (slash ? 0 : a->any[w]));
        uint64_t stay = r[w] & (a->dstar[w] | (slash ? 0 : a->star[w]));
        r[w] = adv << 1 | carry | stay;
        carry = adv >> 63;
    }
    closure(a, r);
    for (size_t w = 0; w < a->words; w++)
        live |= r[w];
    return live != 0;
}

/* The bytes before the first star and after the last must match the
 * endpoint's ends (a quick no for most endpoints). */
static int ends_match(const char *pat, size_t m, const char *s, size_t n)
{
    size_t head = strcspn(pat, "*"), tail;

    if (head == m)
        return n == m && seg_at(pat, m, s);
    tail = m - (size_t)(strrchr(pat, '*') - pat) - 1;
    return n >= head + tail && seg_at(pat, head, s) &&
           seg_at(pat + m - tail, tail, s + n - tail);
}

/* Only "**" stars and literal bytes: each segment between stars found at
 * its leftmost place after the one before (memmem()) is right, as nothing
 * constrains the gaps; the first and last are anchored (ends_match()). */
static int only_double_stars(const char *pat)
{
    for (const char *p = pat; *p; p++) {
        if (*p == '?' || (*p == '*' && p[1] != '*'))
            return 0;
        p += *p == '*';
    }
    return 1;
}

static int match_segments(const char *pat, size_t m, const char *s, size_t n)
{
    size_t head = strcspn(pat, "*");
    size_t tail = m - (size_t)(strrchr(pat, '*') - pat) - 1;
    size_t pos = head, lim = n - tail;

    for (const char *p = pat + head; p < pat + m - tail;) {
        size_t len;
        const char *at;
        p += 2; /* "**" */
        len = strcspn(p, "*");
        if (p[len] == '\0')
            break; /* the last segment, matched at lim */
        if (len > lim - pos || !(at = memmem(s + pos, lim - pos, p, len)))
            return 0;
        pos = (size_t)(at - s) + len;
        p += len;
    }
    return 1;
}

/* One 64-bit word of states: patterns under 64 bytes, most of them. */
static int run_one_word(const nfa *a, const char *s, size_t n, size_t m)
{
    uint64_t r = 1, star = a->star[0], dstar = a->dstar[0], any = a->any[0];

    r |= (r & star) << 1 | (r & dstar) << 2;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        uint64_t open = c == '/' ? 0 : ~(uint64_t)0;
        uint64_t adv = r & (a->lit[a->row[c]][0] | (any & open));
        r = adv << 1 | (r & (dstar | (star & open)));
        r |= (r & star) << 1 | (r & dstar) << 2;
        if (!r)
            return 0;
    }
    return (int)(r >> m & 1);
}

int pattern_match(const char *pat, const char *s)
{
    return pattern_match_n(pat, s, strlen(s));
}

int pattern_match_n(const char *pat, const char *s, size_t n)
{
    size_t m = strlen(pat);
    uint64_t r[NFA_WORDS] = {1};
    nfa a;

    if (m > RL_PATTERN_MAX)
        return 0;
    if (pattern_is_exact(pat))
        return n == m && memcmp(pat, s, m) == 0;
    if (!ends_match(pat, m, s, n))
        return 0;
    if (only_double_stars(pat))
        return match_segments(pat, m, s, n);
    nfa_init(&a, pat, m);
    if (a.words == 1)
        return run_one_word(&a, s, n, m);
    closure(&a, r);
    for (size_t i = 0; i < n; i++)
        if (!step(&a, r, (unsigned char)s[i]))
            return 0;
    return (int)(r[m / 64] >> (m % 64) & 1);
}
