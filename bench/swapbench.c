
/*
 * swapbench.c -- what do live rules cost the request path, and how soon
 * does a change reach a limiter?  How it measures: docs/BENCHMARKS.md, "How
 * each bench measures".  (a) lives in swapbench_swap.c, (b) and (c) in
 * swapbench_change.c, (d) in swapbench_parse.c, over swapbench.h; this
 * file reads the command line, builds the rule sets and runs them.
 */
#include "swapbench.h"

const text_layout layout = {26, 12, 2, 10, 22, 3};

static const char *const groups[] = {"swap", "parse", "push", "pull",
                                     "put_push", "put_pull", NULL};

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--minimal", BENCH_OPT_FLAG, OPT_AT(minimal), 0, 0, -1, -1, NULL,
     "rules with the required fields only"},
    {"--same-text", BENCH_OPT_FLAG, OPT_AT(same_text), 0, 0, -1, -1, NULL,
     "swap the same text every time"},
    {"--only", BENCH_OPT_NAME, OPT_AT(only), 0, 0, -1, -1, groups,
     "one measurement"},
    {"--rules", BENCH_OPT_COUNT, OPT_AT(rules), 1, 100000, 1000, 1000, NULL,
     "rules in the set"},
    {"--changes", BENCH_OPT_COUNT, OPT_AT(changes), 1, 1e9, 100, 20, NULL,
     "changes timed, push and pull"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, 1e9, 5, 5, NULL,
     "blocks of each kind"},
    {"--seconds", BENCH_OPT_REAL, OPT_AT(seconds), 1e-3, 3600, 2, 1, NULL,
     "a block's length"},
    {"--interval-ms", BENCH_OPT_REAL, OPT_AT(interval_ms), 1e-3, 1e6, 10, 10,
     NULL, "between swaps"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "swapbench",
    .about = "Live rules: checks/s while the set is swapped, parse times, and "
             "a change's time\nto enforcement by push and pull (own "
             "redis-server; ratelimitd: RATELIMITD)."};

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
    options o = {0};
    rh_server srv;
    char err[ERRLEN] = "";
    int prc = bench_opt_args(argc, argv, &table, &o), rc = 0;

    if (prc)
        return prc == 1 ? 0 : 2;
    bench_params(&table, &o, o.json);
    if (!o.json)
        print_columns(&layout);
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
