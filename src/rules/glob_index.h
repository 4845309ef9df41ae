/*
 * glob_index.h -- the rules whose endpoint pattern is a glob (anything but
 * an exact endpoint or a plain "/prefix/STARSTAR"), found without walking
 * them: a trie over path segments, as HTTP routers keep one.
 *
 * A pattern is cut at its '/' into segments, and so is a request's
 * endpoint; a pattern segment is an edge of the trie:
 *   "users"        a literal, looked up by hash (parent node, bytes)
 *   STAR           any one segment (STAR matches no '/')
 *   STARSTAR       one or more whole segments ("/a/STARSTAR/b" is
 *                  "/a/" + any bytes + "/b"): its node keeps taking
 *                  segments
 *   "v?", "STAR.json"  (a segment with '?' or STAR among other bytes) the
 *                  second stage: a short list per node of such segments,
 *                  each matched against the request's segment
 *   "aSTARSTARb"   (STARSTAR inside a segment: it crosses '/') the rule is
 *                  filed at the node before it with the rest of its pattern,
 *                  which pattern_match() checks against the rest of the
 *                  endpoint there
 * (STAR stands for the asterisk, as in pattern.h.)  A request walks the
 * trie segment by segment with the set of nodes it has reached, so its
 * cost follows its endpoint's segments and the edges they meet, not how
 * many globs the set has.  Built at load, read-only after: matching
 * allocates nothing and takes no lock.
 */
#ifndef RL_GLOB_INDEX_H
#define RL_GLOB_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "rule.h"

typedef struct glob_index glob_index;

/* Index the rules rules[which[i]], i < n, each of tier id tier[i] (0: the
 * rule has no tier; the ids are the caller's).  Their endpoint patterns
 * must be valid (pattern_check()) and stay put: the index points into
 * them.  Returns the index, or NULL out of memory. */
glob_index *glob_index_build(const rl_rule *rules, const uint32_t *which,
                             const uint32_t *tier, size_t n);

void glob_index_free(glob_index *gx);

/* Bytes the index holds (its arrays, not the patterns it points into). */
size_t glob_index_bytes(const glob_index *gx);

/* Called with each rule number (an entry of `which`) whose pattern
 * matches; a rule may be reported more than once. */
typedef void glob_emit(void *ctx, uint32_t rule);

/*
 * The indexed rules whose pattern matches the endpoint (elen > 0 bytes,
 * no NUL read) and whose tier id is 0 or `tier`: each to emit(), in no
 * particular order.  Returns 0, or -1 if the endpoint reached more trie
 * nodes at once than the walk keeps (GLOB_INDEX_STATES): then what was
 * reported is incomplete, and the caller matches the rules one by one.
 * Allocates nothing.  gx NULL: no rules.
 */
int glob_index_match(const glob_index *gx, const rl_rule *rules,
                     const char *endpoint, size_t elen, uint32_t tier,
                     glob_emit *emit, void *ctx);

#define GLOB_INDEX_STATES 64 /* trie nodes a request holds at once */

#endif
