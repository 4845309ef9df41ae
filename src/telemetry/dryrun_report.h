/*
 * dryrun_report.h -- the fleet's dry runs in Redis: each limiter writes its
 * log-mode rules' counts (src/telemetry/dryrun.h), and a reader (rlctl, a dashboard)
 * merges what every limiter wrote.
 *
 * Per rule, the hash  rl:dryrun:{<rule_id>}  holds one field per limiter
 * (named by the limiter id the caller gives), whose value is
 *
 *     "<rule version> <checks> <would_deny> <registers>"
 *
 * three decimal integers and the HyperLogLog's 1024 registers as 2048 hex
 * digits, register 0 first (hll.h: p = 10, hash_bytes() seeded with
 * HLL_SEED, rank 1..55), separated by single spaces.  Each write sets the
 * hash to expire a day later.  To merge: keep the fields of the highest
 * rule version, sum their counts, take the registers' maximum and estimate
 * (ratelimit(3), section "Dry runs", says the same for other readers).
 */
#ifndef RL_DRYRUN_REPORT_H
#define RL_DRYRUN_REPORT_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "hll.h"
#include "ratelimit.h"

#define DRYRUN_KEY_PREFIX "rl:dryrun:"
#define DRYRUN_TTL_MS 86400000LL /* a report expires a day after its write */
#define DRYRUN_LIMITER_ID_MAX 128 /* bytes of a limiter id: 0x21..0x7e   */
/* A value: three numbers of at most 20 digits, the hex, spaces, NUL. */
#define DRYRUN_VALUE_MAX (3 * 20 + 3 + HLL_HEX_LEN + 1)

/* One limiter's field. */
typedef struct dryrun_field {
    int64_t version;
    uint64_t checks, would_deny;
    hll sketch;
} dryrun_field;

/* The merge of a rule's fields. */
typedef struct dryrun_report {
    int64_t version;     /* the highest rule version met; -1: none yet   */
    uint64_t checks;     /* summed over the fields of that version       */
    uint64_t would_deny; /*   (saturating at UINT64_MAX)                 */
    size_t limiters;     /* fields merged                                 */
    size_t stale;        /* fields of a lower version, left out           */
    size_t invalid;      /* fields that do not parse, left out            */
    hll sketch;          /* the union of the merged fields' sketches      */
} dryrun_report;

/* Write a value into buf (DRYRUN_VALUE_MAX bytes); returns its length. */
size_t dryrun_value_format(char *buf, const dryrun_field *f);

/* Read a value of len bytes (no NUL needed), strictly: the form above,
 * numbers without sign or leading zeros, version <= INT64_MAX, would_deny
 * <= checks.  0, or -1 (then *f is undefined). */
int dryrun_value_parse(const char *s, size_t len, dryrun_field *f);

void dryrun_report_init(dryrun_report *r);

/* Merge one field's value into r: 1 merged, 0 of an older version (left
 * out), -1 does not parse (left out).  A field of a newer version than r
 * holds replaces what r merged so far. */
int dryrun_merge(dryrun_report *r, const char *value, size_t len);

/* The distinct clients r's sketch estimates, rounded, never above
 * r->would_deny. */
uint64_t dryrun_report_distinct(const dryrun_report *r);

/*
 * Write this limiter's field for every rule now in mode "log" that has
 * counted something: HSET rl:dryrun:{<rule_id>} <limiter_id> <value> and
 * PEXPIRE of a day, all pipelined on c (a hiredis 0.14 blocking context
 * with its timeouts set; the caller's, used by this thread alone).  The
 * values are taken under the rule set's read lock, and the network is
 * used after it is left.  Returns the number of rules written (0 when none
 * counts), RL_EINVAL (limiter_id not 1..DRYRUN_LIMITER_ID_MAX bytes of
 * 0x21..0x7e), RL_ENOMEM, or RL_ESTORE (an error reply, or the context
 * failed: reconnect before the next call), with rl_errmsg(lim) saying why.
 */
int dryrun_publish(rl_limiter *lim, redisContext *c, const char *limiter_id);

/* The same, but the commands queued on c are sent and their `cmds`
 * replies read by replies(arg, ...) (a connection whose bytes hiredis
 * cannot carry itself: TLS): RL_OK, or RL_ESTORE with the reason in why. */
typedef int (*dryrun_replies_fn)(void *arg, int cmds, char *why, size_t len);
int dryrun_publish_via(rl_limiter *lim, redisContext *c,
                       const char *limiter_id, dryrun_replies_fn replies,
                       void *arg);

/* A limiter id for dryrun_publish(), unique to this limiter instance:
 * "<host>:<pid>-<16 random hex digits>" (a restarted process writes a
 * field of its own and leaves the old one to expire: the merge sums both)
 * into out[len], len > 32. */
void dryrun_limiter_id(char *out, size_t len);

/*
 * Read and merge every limiter's field of one rule (HGETALL): for rlctl.
 * RL_OK (r->limiters 0: nobody reported), RL_EINVAL (not a rule id), or
 * RL_ESTORE with the reason in err.
 */
int dryrun_fetch(redisContext *c, const char *rule_id, dryrun_report *r,
                 char *err, size_t errlen);

#endif
