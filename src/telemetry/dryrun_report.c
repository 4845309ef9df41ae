/*
 * dryrun_report.c -- see dryrun_report.h: the value one limiter writes for
 * a rule (format and strict parse: a reader takes it from Redis, outside
 * input, fuzzed by tests/fuzz/fuzz_dryrun.c), the merge of many, and the
 * two Redis calls: dryrun_publish() (the library's rules-source thread,
 * every few seconds) and dryrun_fetch() (rlctl).  Off the request path:
 * these may allocate and wait on the network, under the context's
 * timeouts, never while holding the rule set's read lock.
 */
#include "dryrun_report.h"
#include "dryrun.h"
#include "error.h"
#include "limiter.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

size_t dryrun_value_format(char *buf, const dryrun_field *f)
{
    int n = snprintf(buf, DRYRUN_VALUE_MAX, "%" PRId64 " %" PRIu64 " %" PRIu64
                     " ", f->version, f->checks, f->would_deny);

    hll_to_hex(&f->sketch, buf + n);
    return (size_t)n + HLL_HEX_LEN;
}

/* A decimal number at *p (up to end), then `sep` (or the end when sep is
 * 0): no sign, no leading zero, at most max.  Advances *p past it. */
static int number(const char **p, const char *end, char sep, uint64_t max,
                  uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    if (s == end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < end &&
                                             s[1] >= '0' && s[1] <= '9'))
        return -1;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (d > max || v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (s == end || *s != sep)
        return -1;
    *p = s + 1;
    *out = v;
    return 0;
}

int dryrun_value_parse(const char *s, size_t len, dryrun_field *f)
{
    const char *p = s, *end = s + len;
    uint64_t version;

    if (number(&p, end, ' ', INT64_MAX, &version) ||
        number(&p, end, ' ', UINT64_MAX, &f->checks) ||
        number(&p, end, ' ', f->checks, &f->would_deny))
        return -1;
    f->version = (int64_t)version;
    return hll_from_hex(&f->sketch, p, (size_t)(end - p));
}

void dryrun_report_init(dryrun_report *r)
{
    memset(r, 0, sizeof *r);
    r->version = -1;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

int dryrun_merge(dryrun_report *r, const char *value, size_t len)
{
    dryrun_field f;

    if (dryrun_value_parse(value, len, &f)) {
        r->invalid++;
        return -1;
    }
    if (f.version < r->version) {
        r->stale++;
        return 0;
    }
    if (f.version > r->version) { /* what was merged so far is stale */
        r->stale += r->limiters;
        r->version = f.version;
        r->checks = r->would_deny = 0;
        r->limiters = 0;
        memset(&r->sketch, 0, sizeof r->sketch);
    }
    r->checks = sat_add(r->checks, f.checks);
    r->would_deny = sat_add(r->would_deny, f.would_deny);
    hll_merge(&r->sketch, &f.sketch);
    r->limiters++;
    return 1;
}

uint64_t dryrun_report_distinct(const dryrun_report *r)
{
    double e = hll_estimate(&r->sketch) + 0.5;

    return e >= (double)r->would_deny ? r->would_deny : (uint64_t)e;
}

/* A server's words for a message: at most 100 bytes, no control bytes. */
static void said(char *buf, size_t len, const char *s)
{
    snprintf(buf, len, "%.100s", s);
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

void dryrun_limiter_id(char *out, size_t len)
{
    unsigned char rnd[8] = {0};
    char host[64] = "";
    uint64_t r = 0;

    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        r = (uint64_t)(uintptr_t)out ^ (uint64_t)time(NULL);
    for (size_t i = 0; i < sizeof rnd; i++)
        r = r << 8 | rnd[i];
    if (gethostname(host, sizeof host) != 0)
        host[0] = 0;
    host[sizeof host - 1] = 0;
    for (char *p = host; *p; p++) /* an id is printable, without blanks */
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            *p = '_';
    snprintf(out, len, "%s:%d-%016" PRIx64, host[0] ? host : "host",
             (int)getpid(), r);
}

static int limiter_id_check(const char *id)
{
    size_t n = strnlen(id, DRYRUN_LIMITER_ID_MAX + 1);

    if (n == 0 || n > DRYRUN_LIMITER_ID_MAX)
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x21 || (unsigned char)id[i] > 0x7e)
            return -1;
    return 0;
}

/* Queue the two commands of every log-mode rule with counts on c (no I/O:
 * hiredis only appends to its output buffer).  *cmds gets the commands
 * queued; returns the rules queued, or RL_ENOMEM. */
static int queue_fields(rl_limiter *lim, redisContext *c, const char *id,
                        int *cmds)
{
    const rl_ruleset *rs;
    dryrun_counts counts;
    dryrun_field f;
    char value[DRYRUN_VALUE_MAX];
    rcu_token t;
    int rules = 0, rc = 0;

    rs = rcu_read_lock(&lim->rules, &t);
    for (size_t i = 0; i < rs->n; i++) {
        const rl_rule *r = &rs->rules[i];
        size_t len;

        if (r->mode != RL_MODE_LOG || !r->dry)
            continue;
        dryrun_read(r->dry, &counts);
        if (counts.checks == 0)
            continue;
        f = (dryrun_field){.version = r->version, .checks = counts.checks,
                           .would_deny = counts.would_deny,
                           .sketch = counts.sketch};
        len = dryrun_value_format(value, &f);
        if (redisAppendCommand(c, "HSET " DRYRUN_KEY_PREFIX "{%s} %s %b",
                               r->id, id, value, len) != REDIS_OK) {
            rc = RL_ENOMEM;
            break;
        }
        ++*cmds;
        if (redisAppendCommand(c, "PEXPIRE " DRYRUN_KEY_PREFIX "{%s} %lld",
                               r->id, DRYRUN_TTL_MS) != REDIS_OK) {
            rc = RL_ENOMEM;
            break;
        }
        ++*cmds;
        rules++;
    }
    rcu_read_unlock(&lim->rules, t);
    return rc ? rc : rules;
}

/* hiredis writes with write(): to a server that went away, a write after
 * the reset raises SIGPIPE, which would end the host process.  The thread
 * blocks it while it talks to Redis and takes back the one it raised
 * (unless one was already pending), as libraries that cannot touch the
 * process's signal handling do. */
typedef struct quiet {
    sigset_t pipe, old;
    int was_pending;
} quiet;

static void quiet_begin(quiet *q)
{
    sigset_t pending;

    sigemptyset(&q->pipe);
    sigaddset(&q->pipe, SIGPIPE);
    sigpending(&pending);
    q->was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &q->pipe, &q->old);
}

static void quiet_end(quiet *q)
{
    const struct timespec now = {0, 0};
    sigset_t pending;

    sigpending(&pending);
    if (!q->was_pending && sigismember(&pending, SIGPIPE))
        sigtimedwait(&q->pipe, NULL, &now);
    pthread_sigmask(SIG_SETMASK, &q->old, NULL);
}

/* Read the replies of cmds queued commands: RL_OK, or RL_ESTORE with the
 * first error in why.  Every reply is read, errors or not, so the context
 * stays in step for the next call; a failed context stops it. */
static int read_replies(redisContext *c, int cmds, char *why, size_t len)
{
    int rc = RL_OK;
    quiet q;

    quiet_begin(&q);
    for (int i = 0; i < cmds; i++) {
        redisReply *reply = NULL;
        if (redisGetReply(c, (void **)&reply) != REDIS_OK) {
            said(why, len, c->errstr);
            rc = RL_ESTORE;
            break;
        }
        if (reply->type == REDIS_REPLY_ERROR && rc == RL_OK) {
            said(why, len, reply->str);
            rc = RL_ESTORE;
        }
        freeReplyObject(reply);
    }
    quiet_end(&q);
    return rc;
}

int dryrun_publish_via(rl_limiter *lim, redisContext *c,
                       const char *limiter_id, dryrun_replies_fn replies,
                       void *arg)
{
    char why[128] = "";
    int cmds = 0, rules, rc;

    if (!lim || !c || !limiter_id)
        return rl_fail(lim, RL_EINVAL, "dryrun_publish: NULL argument");
    if (limiter_id_check(limiter_id))
        return rl_fail(lim, RL_EINVAL, "dryrun_publish: the limiter id must "
                       "be 1..%d bytes of 0x21..0x7e", DRYRUN_LIMITER_ID_MAX);
    rules = queue_fields(lim, c, limiter_id, &cmds);
    rc = replies ? replies(arg, cmds, why, sizeof why)
                 : read_replies(c, cmds, why, sizeof why);
    if (rules < 0) /* the commands queued before are read all the same */
        return rl_fail(lim, rules, "dryrun_publish: out of memory");
    if (rc != RL_OK)
        return rl_fail(lim, rc, "dryrun_publish: %s", why);
    return rules;
}

int dryrun_publish(rl_limiter *lim, redisContext *c, const char *limiter_id)
{
    return dryrun_publish_via(lim, c, limiter_id, NULL, NULL);
}

int dryrun_fetch(redisContext *c, const char *rule_id, dryrun_report *r,
                 char *err, size_t errlen)
{
    redisReply *reply;

    dryrun_report_init(r);
    if (!c || !rule_id || rule_id_check(rule_id))
        return snprintf(err, errlen, "not a rule id"), RL_EINVAL;
    reply = redisCommand(c, "HGETALL " DRYRUN_KEY_PREFIX "{%s}", rule_id);
    if (!reply) {
        said(err, errlen, c->errstr);
        return RL_ESTORE;
    }
    if (reply->type != REDIS_REPLY_ARRAY) {
        said(err, errlen, reply->type == REDIS_REPLY_ERROR
                              ? reply->str : "HGETALL: not an array");
        freeReplyObject(reply);
        return RL_ESTORE;
    }
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *v = reply->element[i + 1];
        if (v->type == REDIS_REPLY_STRING)
            dryrun_merge(r, v->str, v->len);
        else
            r->invalid++;
    }
    freeReplyObject(reply);
    return RL_OK;
}
