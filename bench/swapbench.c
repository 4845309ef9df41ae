
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
 *
 * (a) lives in swapbench_swap.c, (b) and (c) in swapbench_change.c, (d)
 * in swapbench_parse.c, over swapbench.h; this file reads the command
 * line, builds the rule sets and runs the measurements.
 */
#include "swapbench.h"

#include <stddef.h>

const text_layout layout = {26, 12, 2, 10, 22, 3};

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

#define OPT_AT(field) offsetof(options, field)

static const char *const groups[] = {"swap", "parse", "push", "pull",
                                     "put_push", "put_pull", NULL};

static const bench_opt opts[] = {
    {"--json", BENCH_OPT_FLAG, OPT_AT(json), 0, 0, -1, -1, NULL},
    {"--quick", BENCH_OPT_QUICK, OPT_AT(quick), 0, 0, -1, -1, NULL},
    {"--minimal", BENCH_OPT_FLAG, OPT_AT(minimal), 0, 0, -1, -1, NULL},
    {"--same-text", BENCH_OPT_FLAG, OPT_AT(same_text), 0, 0, -1, -1, NULL},
    {"--only", BENCH_OPT_NAME, OPT_AT(only), 0, 0, -1, -1, groups},
    {"--rules", BENCH_OPT_COUNT, OPT_AT(rules), 1, 100000, 1000, 1000, NULL},
    {"--changes", BENCH_OPT_COUNT, OPT_AT(changes), 1, 1e9, 100, 20, NULL},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, 1e9, 5, 5, NULL},
    {"--seconds", BENCH_OPT_REAL, OPT_AT(seconds), 1e-3, 3600, 2, 1, NULL},
    {"--interval-ms", BENCH_OPT_REAL, OPT_AT(interval_ms), 1e-3, 1e6, 10, 10,
     NULL},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "swapbench",
    .usage = usage};

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    return bench_opt_args(argc, argv, &table, o);
}

int want(const options *o, const char *what)
{
    return !o->only || !strcmp(o->only, what);
}

void sleep_ns(uint64_t ns)
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
char *rule_set(unsigned long long n, int minimal, long long version,
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


int main(int argc, char **argv)
{
    options o;
    rh_server srv;
    char err[ERRLEN] = "";
    int prc = parse_args(argc, argv, &o), rc = 0;

    if (prc)
        return prc == 1 ? 0 : 2;
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
