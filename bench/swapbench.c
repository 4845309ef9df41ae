/*
 * swapbench.c -- what do live rules cost the request path, and how soon
 * does a change reach a limiter?
 *
 * Sets are rules r0..r{n-1} in ratelimitd's canonical form with every
 * field given (a match, a burst, updated_at: about 260 bytes a rule), or
 * with --minimal the required fields only (77 bytes).
 *
 * (a) swap_checks_per_s: one thread calls rl_allow() on the memory store
 * as fast as it can, rule ids drawn uniformly from a --rules set (1000 by
 * default, limit 10^9 per 60 s: nothing is denied) and keys from 10000
 * users, while another thread replaces the whole set every --interval-ms
 * (10 by default) through rl_rules_load_string(), without a version,
 * rule r0's limit alternating between two values, as a real change does
 * (--same-text: the same text every time): parse against the set in
 * force, number, swap, wait for the old set's readers, free.  References,
 * in the same run: the same checks with no other thread ("no_swaps", the
 * one the target of >= 0.95 is for), and with the other thread parsing
 * the same texts on the same schedule, each against the set it parsed
 * last, but never swapping ("parse_only"): value / parse_only is what the
 * swap itself costs the request path, parse_only / no_swaps what the
 * parsing thread's CPU takes from it (on 2 cores shared with other work,
 * most of the difference).  The three alternate in --rounds blocks of
 * --seconds each, in a rotating order, so drift on a shared machine hits
 * them alike; each figure is the sum over its blocks.  "swaps" and
 * "swap_ms_mean" say what the swapping thread did, "busy_cores_*" how
 * busy the whole machine was during each kind of block.
 *
 * (d) parse_full_ms: ruleset_parse() of the set, beside jansson's
 * json_loadb() of the same text alone ("jansson_load"); and
 * parse_one_changed_ms: the set with r0 changed parsed against the set
 * (ruleset_parse_delta(), what rules_take_json() does), beside the whole
 * parse.  Kinds alternate in --rounds blocks of --seconds / 2.
 *
 * (b) change_push_p50_ms / _p99_ms and change_pull_p50_ms / _p99_ms: from
 * a change written to Redis to a limiter enforcing it, over --changes
 * changes (100 by default) each.  The server is a private redis-server
 * (tests/redis_harness.c).  A change is make_change(): the set (--rules
 * rules) with a new version and a new limit for rule "r0", SET into
 * rl:rules, then the version PUBLISHed on the channel rl:rules, as
 * ratelimitd does (contracts.md section 2); make_change() is the one step
 * to replace with a PUT to ratelimitd to measure the whole control path.
 * "Enforcing" is rl_allow(lim, key, "r0", cost 0) reporting the new
 * limit, polled every 50 us by the measuring thread.  Push: a limiter with
 * the default rules_push=1 and rules_refresh_s=3600 (so nothing arrives by
 * the pull); reference: the time the same PUBLISH takes to reach a bare
 * hiredis subscriber on its own connection ("publish_to_subscriber").
 * Pull: a limiter with rules_push=0 and rules_refresh_s=1, changes made
 * at random moments (a uniform 0..1 s pause before each): reference, the
 * wait a uniform phase gives, 0.5 s at p50 and 0.99 s at p99
 * ("uniform_refresh").
 *
 * (c) change_put_push_* and change_put_pull_*: the whole control path.  A
 * real ratelimitd (bench/rldchange.c over tests/rld_harness.c) publishes
 * to the same redis-server; the --rules rules are PUT once, then each
 * change is a PUT of r0 with a new limit, timed from its 200 to the
 * limiter enforcing it (0 when the push beat the 200 back), by push and
 * by the 1 s pull alone.  Reference: the PUT's own time, sent to 200
 * ("put_request"), in the same run.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "rldchange.h"
#include "ruleset.h"
#include "ruleset_delta.h"

#define RULE_LIMIT 1000000000LL
#define USERS 10000
#define POLL_US 50
#define CHANGE_DEADLINE_S 10 /* a change not enforced by then: an error */
#define TARGET_RATIO 0.95

typedef struct options {
    unsigned long long rules, changes, rounds;
    double seconds, interval_ms;
    int json, quick;
    int minimal;      /* the 77-byte rule form instead of the canonical */
    int same_text;    /* (a): the same text every time, not r0 changed  */
    const char *only; /* "swap", "parse", "push", "pull", "put_push",
                         "put_pull" or NULL: all                        */
} options;

static const text_layout layout = {26, 12, 2, 10, 22, 3};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: swapbench [--json] [--quick] [--minimal] [--same-text]\n"
            "                 [--only swap|parse|push|pull|put_push|put_pull]\n"
            "                 [--rules N] [--seconds S] [--rounds N]\n"
            "                 [--interval-ms MS] [--changes N]\n"
            "\n"
            "(a) rl_allow() checks/s on the memory store while the rule set\n"
            "(--rules, default 1000) is swapped every --interval-ms (10),\n"
            "rule r0 changed each time (--same-text: never), beside no swaps\n"
            "and beside the same parsing without the swap: --rounds (5)\n"
            "blocks of --seconds (2) each.\n"
            "(d) ms to parse the set whole, and with one rule changed.\n"
            "Sets are in ratelimitd's canonical form, every field given\n"
            "(about 230 bytes a rule; --minimal: 77 bytes, required fields).\n"
            "(b) ms from a change SET + PUBLISHed in Redis to a limiter\n"
            "enforcing it, p50/p99 over --changes (100), by push and by the\n"
            "1 s pull alone.  Starts its own redis-server.\n"
            "(c) the same from a PUT's 200 from ratelimitd (RATELIMITD or\n"
            "tools/ratelimitd/ratelimitd), beside the PUT's own time.\n"
            "  --quick  1 s blocks, 20 changes\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.rules = 1000, .changes = 100, .rounds = 5,
                   .seconds = 2, .interval_ms = 10};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--minimal")) {
            o->minimal = 1;
        } else if (!strcmp(a, "--same-text")) {
            o->same_text = 1;
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
            o->seconds = 1;
            o->changes = 20;
        } else if (!strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (v && !strcmp(a, "--only")) {
            o->only = argv[++i];
        } else if (v && !strcmp(a, "--rules")) {
            if (parse_count(argv[++i], &o->rules) || !o->rules ||
                o->rules > 100000)
                return 2;
        } else if (v && !strcmp(a, "--changes")) {
            if (parse_count(argv[++i], &o->changes) || !o->changes)
                return 2;
        } else if (v && !strcmp(a, "--rounds")) {
            if (parse_count(argv[++i], &o->rounds) || !o->rounds)
                return 2;
        } else if (v && !strcmp(a, "--seconds")) {
            if ((o->seconds = atof(argv[++i])) <= 0)
                return 2;
        } else if (v && !strcmp(a, "--interval-ms")) {
            if ((o->interval_ms = atof(argv[++i])) <= 0)
                return 2;
        } else {
            return 2;
        }
    }
    return 0;
}

static int want(const options *o, const char *what)
{
    return !o->only || !strcmp(o->only, what);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ULL),
                          (long)(ns % 1000000000ULL)};

    nanosleep(&ts, NULL);
}

/* One rule, as ratelimitd publishes it (rule_json.c's canonical form,
 * every field given: a match, a burst, updated_at), or in the minimal
 * form (the required fields only). */
static int rule_text(char *buf, size_t cap, int minimal, unsigned long long i,
                     long long limit)
{
    if (minimal)
        return snprintf(buf, cap, "{\"rule_id\":\"r%llu\",\"dimension\":"
                        "\"user\",\"limit\":%lld,\"window_seconds\":60}",
                        i, limit);
    return snprintf(buf, cap, "{\"rule_id\":\"r%llu\",\"dimension\":\"user\","
                    "\"match\":{\"endpoint\":\"/api/v1/items/*\",\"tier\":"
                    "\"pro\"},\"limit\":%lld,\"window_seconds\":60,\"burst\":"
                    "%lld,\"algorithm\":\"token_bucket\",\"mode\":\"enforce\","
                    "\"failure_mode\":\"fallback\",\"version\":3,"
                    "\"updated_at\":\"2026-11-29T10:00:00Z\"}",
                    i, limit, limit / 1000 + 1);
}

/* The set: rules r0..r{n-1}, per user; r0's limit is `limit0`.  A new
 * buffer (free() it); version < 0: none. */
static char *rule_set(unsigned long long n, int minimal, long long version,
                      long long limit0)
{
    size_t cap = 64 + n * 320, at = 0;
    char *buf = malloc(cap);

    if (!buf)
        return NULL;
    if (version >= 0)
        at += (size_t)snprintf(buf, cap, "{\"version\":%lld,\"rules\":[",
                               version);
    else
        at += (size_t)snprintf(buf, cap, "{\"rules\":[");
    for (unsigned long long i = 0; i < n; i++) {
        if (i)
            buf[at++] = ',';
        at += (size_t)rule_text(buf + at, cap - at, minimal, i,
                                i ? RULE_LIMIT : limit0);
    }
    snprintf(buf + at, cap - at, "]}");
    return buf;
}

/* ---- (a) checks while the set is swapped ----------------------------------- */

enum { NO_SWAPS, SWAPS, PARSE_ONLY, MODES };

typedef struct swapper {
    rl_limiter *lim;
    const char *text[2];       /* r0's limit differs (--same-text: not) */
    size_t len[2];
    unsigned turn[MODES];      /* loads made in each mode: the next text
                                  is text[(turn + 1) & 1]               */
    rl_ruleset *held;          /* PARSE_ONLY: the set last parsed, which
                                  the next parse takes as in force      */
    int mode;                  /* SWAPS or PARSE_ONLY                   */
    uint64_t interval_ns;
    _Atomic int stop;
    uint64_t swaps, swap_ns, failures;
} swapper;

/* What the library does with a new set's text given the set in force
 * (prev): parse it, reusing prev's unchanged rules (rules_take_json()). */
static int parse_next(const char *text, size_t len, const rl_ruleset *prev,
                      rl_ruleset **out, char *err)
{
    return ruleset_parse_delta(text, len, -1, prev, out, NULL, err, ERRLEN);
}

/* Every interval: load the next set (SWAPS), or parse it against the set
 * last parsed and keep it in place of that one, never swapping
 * (PARSE_ONLY: the same CPU on the other thread, no swap). */
static void *swapper_main(void *arg)
{
    swapper *s = arg;
    uint64_t next = now_ns();
    char err[ERRLEN];

    while (!atomic_load(&s->stop)) {
        uint64_t t0 = now_ns();
        unsigned k = ++s->turn[s->mode] & 1;
        rl_ruleset *rs = NULL;
        int rc = s->mode == SWAPS
                     ? rl_rules_load_string(s->lim, s->text[k])
                     : parse_next(s->text[k], s->len[k], s->held, &rs, err);
        if (rs) {
            ruleset_free(s->held);
            s->held = rs;
        }
        if (rc == RL_OK && s->mode == SWAPS)
            s->swaps++;
        else if (rc != RL_OK)
            s->failures++;
        s->swap_ns += now_ns() - t0;
        next += s->interval_ns;
        if (next > now_ns())
            sleep_ns(next - now_ns());
    }
    return NULL;
}

/* rl_allow() for `seconds`; the checks made.  Ids and keys are drawn
 * ahead, so the loop costs the call and little else. */
static uint64_t check_for(rl_limiter *lim, double seconds,
                          unsigned long long rules, uint64_t *denied)
{
    static char ids[4096][16], keys[4096][16];
    uint64_t rng = 42, n = 0, until = now_ns() + (uint64_t)(seconds * 1e9);
    rl_result res;

    for (int i = 0; i < 4096; i++) {
        snprintf(ids[i], sizeof ids[i], "r%llu",
                 (unsigned long long)pick(&rng, rules));
        snprintf(keys[i], sizeof keys[i], "user:%llu",
                 (unsigned long long)pick(&rng, USERS));
    }
    while (now_ns() < until) {
        for (int i = 0; i < 256; i++, n++) {
            if (rl_allow(lim, keys[n & 4095], ids[(n * 7) & 4095], 1,
                         &res) != RL_OK || !res.allowed)
                ++*denied;
        }
    }
    return n;
}

/* One block of checks with the other thread in `mode`; busy: the cores
 * the whole machine kept busy meanwhile. */
static uint64_t block(rl_limiter *lim, const options *o, swapper *sw,
                      int mode, uint64_t *denied, double *busy)
{
    double b0, b1, st;
    pthread_t th;
    uint64_t n;

    machine_cpu(&b0, &st);
    sw->mode = mode;
    atomic_store(&sw->stop, 0);
    if (mode != NO_SWAPS)
        pthread_create(&th, NULL, swapper_main, sw);
    n = check_for(lim, o->seconds, o->rules, denied);
    atomic_store(&sw->stop, 1);
    if (mode != NO_SWAPS)
        pthread_join(th, NULL);
    machine_cpu(&b1, &st);
    *busy += (b1 - b0) / o->seconds;
    return n;
}

static int bench_swap(const options *o, char *err)
{
    char *text = rule_set(o->rules, o->minimal, -1, RULE_LIMIT);
    char *text2 = rule_set(o->rules, o->minimal, -1,
                           o->same_text ? RULE_LIMIT : RULE_LIMIT - 1);
    rl_limiter *lim = NULL;
    uint64_t n[MODES] = {0}, denied = 0, swap_ns = 0;
    double busy[MODES] = {0}, secs = o->seconds * (double)o->rounds;
    swapper sw = {.interval_ns = (uint64_t)(o->interval_ms * 1e6)};
    figure f = {.name = "swap_checks_per_s", .unit = "checks/s", .nrefs = 2,
                .ref_name = {"no_swaps", "parse_only"}};
    int rc = RL_ENOMEM;

    if (!text || !text2 || (rc = rl_limiter_new(&lim, NULL)) != RL_OK ||
        (rc = rl_rules_load_string(lim, text)) != RL_OK ||
        (rc = parse_next(text, strlen(text), NULL, &sw.held, err)) != RL_OK) {
        set_err(err, "swap: limiter", rc, errtext(lim));
        rl_limiter_free(lim);
        free(text);
        free(text2);
        return -1;
    }
    sw.lim = lim;
    sw.text[0] = text;
    sw.text[1] = text2;
    sw.len[0] = strlen(text);
    sw.len[1] = strlen(text2);
    for (unsigned long long r = 0; r < o->rounds; r++)
        for (int m = 0; m < MODES; m++) { /* rotate the order by round */
            int mode = (int)((m + r) % MODES);
            uint64_t before = sw.swap_ns;
            n[mode] += block(lim, o, &sw, mode, &denied, &busy[mode]);
            if (mode == SWAPS)
                swap_ns += sw.swap_ns - before;
        }
    f.value = (double)n[SWAPS] / secs;
    f.ref[0] = (double)n[NO_SWAPS] / secs;
    f.ref[1] = (double)n[PARSE_ONLY] / secs;
    xnum(&f, "target", TARGET_RATIO);
    xnum(&f, "rules", (double)o->rules);
    xnum(&f, "text_bytes", (double)sw.len[0]);
    xstr(&f, "change", o->same_text ? "none" : "r0");
    xnum(&f, "interval_ms", o->interval_ms);
    xnum(&f, "swaps", (double)sw.swaps);
    xnum(&f, "swap_ms_mean", sw.swaps ? swap_ns / 1e6 / sw.swaps : 0);
    xnum(&f, "failures", (double)sw.failures);
    xnum(&f, "denied", (double)denied);
    xnum(&f, "busy_cores_no_swaps", busy[NO_SWAPS] / (double)o->rounds);
    xnum(&f, "busy_cores_swaps", busy[SWAPS] / (double)o->rounds);
    xnum(&f, "busy_cores_parse_only", busy[PARSE_ONLY] / (double)o->rounds);
    emit_figure(&f, o->json, &layout);
    rl_limiter_free(lim);
    ruleset_free(sw.held);
    free(text);
    free(text2);
    return 0;
}

/* ---- (d) parsing a set ------------------------------------------------ */

enum { P_JANSSON, P_FULL, P_ONE, P_KINDS };

typedef struct parse_run {
    const char *text[2];       /* the set, and the set with r0 changed  */
    size_t len[2];
    const rl_ruleset *prev;    /* the set parsed from text[0]           */
    uint64_t ns[P_KINDS], calls[P_KINDS], failures;
} parse_run;

/* Parse for `seconds` as `kind` says: jansson's DOM alone (the
 * reference), the whole set, or the changed set against the set of the
 * unchanged one (what taking a one-rule change costs).  Each result is
 * freed after the next is made, as a limiter frees the set it replaces
 * (parse, free, parse... would time the allocator giving memory back to
 * the system and faulting it in again). */
static void parse_block(parse_run *p, int kind, double seconds)
{
    uint64_t t0 = now_ns(), until = t0 + (uint64_t)(seconds * 1e9), n = 0;
    rl_ruleset *held = NULL;
    json_t *held_doc = NULL;
    char err[ERRLEN];

    do {
        rl_ruleset *rs = NULL;
        json_t *doc = NULL;
        int ok;
        if (kind == P_JANSSON)
            ok = (doc = json_loadb(p->text[0], p->len[0],
                                   JSON_REJECT_DUPLICATES, NULL)) != NULL;
        else if (kind == P_FULL)
            ok = ruleset_parse(p->text[0], p->len[0], -1, &rs, err,
                               sizeof err) == RL_OK;
        else
            ok = parse_next(p->text[1], p->len[1], p->prev, &rs, err) ==
                 RL_OK;
        json_decref(held_doc);
        ruleset_free(held);
        held_doc = doc;
        held = rs;
        p->failures += !ok;
        n++;
    } while (now_ns() < until);
    p->ns[kind] += now_ns() - t0;
    p->calls[kind] += n;
    json_decref(held_doc);
    ruleset_free(held);
}

/* What taking the change does: the rules it copies, those it parses. */
static void note_reuse(figure *f, const parse_run *p)
{
    rl_ruleset *rs = NULL;
    delta_info di;
    char err[ERRLEN];

    ruleset_parse_delta(p->text[1], p->len[1], -1, p->prev, &rs, &di, err,
                        sizeof err);
    xnum(f, "reused", (double)di.reused);
    xnum(f, "parsed", (double)(di.whole && rs ? rs->n : di.parsed));
    ruleset_free(rs);
}

static double mean_ms(const parse_run *p, int kind)
{
    return p->calls[kind] ? p->ns[kind] / 1e6 / (double)p->calls[kind] : 0;
}

static int bench_parse(const options *o, char *err)
{
    char *text = rule_set(o->rules, o->minimal, 7, RULE_LIMIT);
    char *text2 = rule_set(o->rules, o->minimal, 8, RULE_LIMIT - 1);
    rl_ruleset *prev = NULL;
    parse_run p = {.text = {text, text2}};
    figure full = {.name = "parse_full_ms", .unit = "ms", .nrefs = 1,
                   .ref_name = {"jansson_load"}};
    figure one = {.name = "parse_one_changed_ms", .unit = "ms", .nrefs = 1,
                  .ref_name = {"parse_full"}};
    int rc = RL_ENOMEM;

    if (!text || !text2 ||
        (rc = parse_next(text, strlen(text), NULL, &prev, err)) != RL_OK) {
        if (!err[0])
            set_err(err, "parse", rc, "");
        free(text);
        free(text2);
        return -1;
    }
    p.len[0] = strlen(text);
    p.len[1] = strlen(text2);
    p.prev = prev;
    note_reuse(&one, &p);
    for (unsigned long long r = 0; r < o->rounds; r++)
        for (int k = 0; k < P_KINDS; k++)
            parse_block(&p, (int)((k + r) % P_KINDS), o->seconds / 2);
    full.value = mean_ms(&p, P_FULL);
    full.ref[0] = mean_ms(&p, P_JANSSON);
    one.value = mean_ms(&p, P_ONE);
    one.ref[0] = full.value;
    xnum(&full, "rules", (double)o->rules);
    xnum(&full, "text_bytes", (double)p.len[0]);
    xnum(&full, "calls", (double)p.calls[P_FULL]);
    xnum(&one, "calls", (double)p.calls[P_ONE]);
    xnum(&one, "failures", (double)p.failures);
    emit_figure(&full, o->json, &layout);
    emit_figure(&one, o->json, &layout);
    ruleset_free(prev);
    free(text);
    free(text2);
    return p.failures ? (snprintf(err, ERRLEN, "parse: %llu failures",
                                  (unsigned long long)p.failures), -1)
                      : 0;
}

/* ---- (b) from a change to enforcement --------------------------------------- */

typedef struct change_ctx {
    int minimal;               /* the rule form (options)               */
    redisContext *c;           /* changes SET + PUBLISHed here, or     */
    rld *service;              /* PUT to this ratelimitd               */
    unsigned long long rules;  /* rules in each set                     */
} change_ctx;

/* Make change number `version`: rule r0 gets `limit`.  By hand, as
 * ratelimitd's part of the contract (SET the whole set, PUBLISH its
 * version; *from_ns is the moment before), or through ratelimitd (a PUT;
 * *from_ns is when its 200 came back).  *took_ns: how long it took. */
static int make_change(change_ctx *cc, long long version, long long limit,
                       uint64_t *from_ns, uint64_t *took_ns, char *err)
{
    uint64_t t0 = now_ns();
    char *text;
    redisReply *r;
    int ok;

    if (cc->service) {
        ok = rldchange_put(cc->service, limit, &t0, from_ns, err) == 0;
        *took_ns = *from_ns - t0;
        return ok ? 0 : -1;
    }
    *from_ns = t0;
    if (!(text = rule_set(cc->rules, cc->minimal, version, limit)))
        return snprintf(err, ERRLEN, "change: out of memory"), -1;
    r = redisCommand(cc->c, "SET rl:rules %s", text);
    free(text);
    ok = r && r->type != REDIS_REPLY_ERROR;
    freeReplyObject(r);
    r = ok ? redisCommand(cc->c, "PUBLISH rl:rules %lld", version) : NULL;
    ok = r && r->type == REDIS_REPLY_INTEGER;
    freeReplyObject(r);
    *took_ns = now_ns() - t0;
    if (!ok)
        snprintf(err, ERRLEN, "change %lld: %s", version,
                 cc->c->err ? cc->c->errstr : "error reply");
    return ok ? 0 : -1;
}

/* The reference subscriber: when each version's PUBLISH reached it. */
typedef struct subscriber {
    redisContext *c;
    uint64_t *at;              /* by version                            */
    unsigned long long max;
    _Atomic int stop;
} subscriber;

static void *subscriber_main(void *arg)
{
    subscriber *s = arg;
    redisReply *r;

    while (!atomic_load(&s->stop) &&
           redisGetReply(s->c, (void **)&r) == REDIS_OK) {
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[2]->type == REDIS_REPLY_STRING) {
            unsigned long long v = strtoull(r->element[2]->str, NULL, 10);
            if (v < s->max)
                s->at[v] = now_ns();
        }
        freeReplyObject(r);
    }
    return NULL;
}

static rl_limiter *source_limiter(const char *uri, int push, char *err)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc = RL_ENOMEM;

    if (cfg && (rc = rl_config_set_log(cfg, NULL, NULL)) == RL_OK &&
        (rc = rl_config_set(cfg, "rules_source", uri)) == RL_OK &&
        (rc = rl_config_set(cfg, "rules_push", push ? "1" : "0")) == RL_OK &&
        (rc = rl_config_set(cfg, "rules_refresh_s", push ? "3600" : "1")) ==
            RL_OK)
        rc = rl_limiter_new(&lim, cfg);
    if (rc != RL_OK)
        set_err(err, "limiter", rc, errtext(NULL));
    rl_config_free(cfg);
    return lim;
}

static int64_t enforced(rl_limiter *lim)
{
    rl_result res;

    return rl_allow(lim, "user:1", "r0", 0, &res) == RL_OK ? res.limit : -1;
}

typedef struct run {
    hist lat, ref;
    unsigned long long done;
} run;

/* Changes first..first+n-1 (limit = version), each timed from just
 * before make_change() (a PUT: from its 200) to the limiter enforcing it
 * (0 when it did before the 200). */
static int time_changes(const options *o, change_ctx *cc, rl_limiter *lim,
                        subscriber *sub, int pull, long long first, run *out,
                        char *err)
{
    uint64_t rng = 7;

    for (unsigned long long i = 0; i < o->changes; i++) {
        long long v = first + (long long)i;
        uint64_t t0, took, deadline;
        if (pull) /* a uniform phase against the 1 s pull */
            sleep_ns(pick(&rng, 1000000) * 1000);
        if (make_change(cc, v, v, &t0, &took, err) != 0)
            return -1;
        deadline = t0 + CHANGE_DEADLINE_S * 1000000000ULL;
        while (enforced(lim) != v) {
            if (now_ns() > deadline)
                return snprintf(err, ERRLEN, "change %lld not enforced in "
                                "%d s", v, CHANGE_DEADLINE_S), -1;
            sleep_ns(POLL_US * 1000);
        }
        hist_add(&out->lat, now_ns() - t0);
        if (sub && sub->at[v] > t0)
            hist_add(&out->ref, sub->at[v] - t0);
        if (cc->service)
            hist_add(&out->ref, took);
        out->done++;
    }
    return 0;
}

static void emit_pair(const options *o, const char *what, const run *r,
                      const char *ref_name, double ref50, double ref99)
{
    char n50[40], n99[40];
    figure f50 = {.name = n50, .unit = "ms", .nrefs = 1,
                  .ref_name = {ref_name}, .ref = {ref50}};
    figure f99 = f50;

    snprintf(n50, sizeof n50, "change_%s_p50_ms", what);
    snprintf(n99, sizeof n99, "change_%s_p99_ms", what);
    f99.name = n99;
    f99.ref[0] = ref99;
    f50.value = hist_pct(&r->lat, 0.50) / 1e6;
    f99.value = hist_pct(&r->lat, 0.99) / 1e6;
    xnum(&f50, "changes", (double)r->done);
    xnum(&f50, "rules", (double)o->rules);
    xnum(&f99, "changes", (double)r->done);
    xnum(&f99, "rules", (double)o->rules);
    emit_figure(&f50, o->json, &layout);
    emit_figure(&f99, o->json, &layout);
}

static int bench_change(const options *o, const rh_server *srv, char *err)
{
    char uri[512];
    change_ctx cc = {.rules = o->rules, .minimal = o->minimal};
    subscriber sub = {.max = 2 * o->changes + 3};
    rl_limiter *push = NULL, *pull = NULL;
    run *rp = calloc(2, sizeof *rp);
    pthread_t th;
    uint64_t t;
    int rc = -1;

    rh_uri(srv, uri, sizeof uri);
    sub.at = calloc(sub.max, sizeof *sub.at);
    if (!rp || !sub.at || !(cc.c = rh_connect(srv)) ||
        !(sub.c = rh_connect(srv)) || make_change(&cc, 1, 1, &t, &t, err) != 0)
        goto out;
    /* no receive timeout: the subscriber waits for as long as the run */
    redisSetTimeout(sub.c, (struct timeval){0, 0});
    freeReplyObject(redisCommand(sub.c, "SUBSCRIBE rl:rules"));
    pthread_create(&th, NULL, subscriber_main, &sub);
    if (want(o, "push") && (push = source_limiter(uri, 1, err)) &&
        time_changes(o, &cc, push, &sub, 0, 2, &rp[0], err) == 0)
        emit_pair(o, "push", &rp[0], "publish_to_subscriber",
                  hist_pct(&rp[0].ref, 0.50) / 1e6,
                  hist_pct(&rp[0].ref, 0.99) / 1e6);
    rl_limiter_free(push);
    if (want(o, "pull") && !err[0] && (pull = source_limiter(uri, 0, err)) &&
        time_changes(o, &cc, pull, NULL, 1, (long long)o->changes + 2,
                     &rp[1], err) == 0)
        emit_pair(o, "pull", &rp[1], "uniform_refresh", 500, 990);
    rl_limiter_free(pull);
    atomic_store(&sub.stop, 1);
    make_change(&cc, (long long)sub.max, 1, &t, &t, err); /* wakes sub */
    pthread_join(th, NULL);
    rc = err[0] ? -1 : 0;
out:
    if (rc && !err[0])
        snprintf(err, ERRLEN, "change: cannot set up (redis or memory)");
    if (cc.c)
        redisFree(cc.c);
    if (sub.c)
        redisFree(sub.c);
    free(sub.at);
    free(rp);
    return rc;
}

/* (c) the whole control path: a PUT to ratelimitd, which stores it and
 * publishes the set, to a limiter enforcing it; by push, and by the 1 s
 * pull alone.  Reference: the PUT's own time (sent to 200). */
static int bench_put(const options *o, const rh_server *srv, char *err)
{
    char uri[512];
    rld service;
    change_ctx cc = {.service = &service};
    rl_limiter *lim = NULL;
    run *rp = calloc(2, sizeof *rp);
    int rc = -1;

    rh_uri(srv, uri, sizeof uri);
    if (!rp || rldchange_start(&service, uri, o->rules, 1, err) != 0)
        goto out;
    for (int pull = 0; pull < 2 && !err[0]; pull++) {
        if (!want(o, pull ? "put_pull" : "put_push"))
            continue;
        if ((lim = source_limiter(uri, !pull, err)) &&
            time_changes(o, &cc, lim, NULL, pull,
                         2 + (long long)(pull * o->changes), &rp[pull],
                         err) == 0)
            emit_pair(o, pull ? "put_pull" : "put_push", &rp[pull],
                      "put_request", hist_pct(&rp[pull].ref, 0.50) / 1e6,
                      hist_pct(&rp[pull].ref, 0.99) / 1e6);
        rl_limiter_free(lim);
        lim = NULL;
    }
    rc = err[0] ? -1 : 0;
out:
    rldchange_stop(&service);
    free(rp);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    rh_server srv;
    char err[ERRLEN] = "";
    int prc = parse_args(argc, argv, &o), rc = 0;

    if (prc) {
        if (prc == 2)
            usage(stderr);
        return prc == 1 ? 0 : 2;
    }
    if (o.json)
        printf("{\"name\":\"params\",\"nproc\":%ld,\"library\":\"%s\","
               "\"rules\":%llu,\"changes\":%llu,\"seconds\":%.3g,"
               "\"rounds\":%llu,\"interval_ms\":%.3g,\"quick\":%s,"
               "\"loadavg_1m\":%.2f}\n", sysconf(_SC_NPROCESSORS_ONLN),
               rl_version_string(), o.rules, o.changes, o.seconds, o.rounds,
               o.interval_ms, o.quick ? "true" : "false", loadavg1());
    else {
        printf("swapbench: libratelimit %s, nproc=%ld, loadavg=%.2f, rules=%llu"
               "\n", rl_version_string(), sysconf(_SC_NPROCESSORS_ONLN),
               loadavg1(), o.rules);
        print_columns(&layout);
    }
    if (want(&o, "parse"))
        rc = bench_parse(&o, err);
    if (rc == 0 && want(&o, "swap"))
        rc = bench_swap(&o, err);
    if (rc == 0 && (want(&o, "push") || want(&o, "pull") ||
                    want(&o, "put_push") || want(&o, "put_pull"))) {
        if (rh_start(&srv, NULL) != 0) {
            snprintf(err, sizeof err, "cannot start redis-server");
            rc = -1;
        } else {
            if (want(&o, "push") || want(&o, "pull"))
                rc = bench_change(&o, &srv, err);
            if (rc == 0 && (want(&o, "put_push") || want(&o, "put_pull")))
                rc = bench_put(&o, &srv, err);
            rh_stop(&srv);
        }
    }
    if (rc)
        fprintf(stderr, "swapbench: %s\n", err);
    return rc ? 1 : 0;
}
