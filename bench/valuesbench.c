/*
 * valuesbench.c -- what per-value rules cost a check (issue 25 section
 * 3): thousands of per-customer overrides must cost no more than a
 * handful.  Method and figures: docs/BENCHMARKS.md, "How each bench
 * measures".
 */

#include "benchmodes.h"
#include "benchutil.h"

#define MAX_ROUNDS 64
#define NSETS 3
#define KEYS 10000     /* keys no override names: other-0..        */
#define CUSTOMERS 5000 /* keys with an override: cust-0.., in every
                          set but the first, spread over its rules  */

static const text_layout layout = {20, 13, 1, 3, 14, 3};
static const unsigned sizes[NSETS] = {0, 10, 5000};

typedef struct options {
    unsigned long long n, rounds;
    int json, quick, no_metrics;
} options;

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--no-metrics", BENCH_OPT_FLAG, OPT_AT(no_metrics),
     .help = "the limiters with metrics=0 (a rule's metrics block is one "
             "more cold line per customer's rule)"},
    {"--n", BENCH_OPT_COUNT, OPT_AT(n), 1, 1e12, 100000, 25000,
     NULL, "checks per timed block"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, MAX_ROUNDS,
     7, 7, NULL, "timed blocks per set (medians)"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "rlbench values",
    .about = "ns per rl_check() with 10 and 5000 per-value overrides, beside "
             "none."};

/* The general rule and n overrides as a JSON array (malloc'd). */
static char *set_json(unsigned n)
{
    size_t room = (size_t)n * 120 + CUSTOMERS * 16 + 4096, at;
    char *s = malloc(room);

    at = (size_t)snprintf(s, room, "[{\"rule_id\":\"gen\",\"dimension\":"
                          "\"api_key\",\"limit\":1000000000,"
                          "\"window_seconds\":60}");
    if (n)
        at += (size_t)snprintf(s + at, room - at,
                               ",{\"rule_id\":\"vip\",\"dimension\":"
                               "\"api_key\",\"match\":{\"value\":[\"vip-0\","
                               "\"vip-1\",\"vip-2\",\"vip-3\",\"vip-4\","
                               "\"vip-5\",\"vip-6\",\"vip-7\",\"vip-8\","
                               "\"vip-9\"]},\"unlimited\":true}"
                               ",{\"rule_id\":\"g1\",\"dimension\":\"api_key\","
                               "\"match\":{\"value\":\"*-test\"},\"limit\":"
                               "1000000000,\"window_seconds\":60}"
                               ",{\"rule_id\":\"g2\",\"dimension\":\"api_key\","
                               "\"match\":{\"value\":\"k*-x-*\"},\"limit\":"
                               "1000000000,\"window_seconds\":60}");
    for (unsigned i = 0; n && i < 10; i++)
        at += (size_t)snprintf(s + at, room - at,
                               ",{\"rule_id\":\"t%u\",\"dimension\":"
                               "\"api_key\",\"match\":{\"value\":\"team%u-*\"}"
                               ",\"limit\":1000000000,\"window_seconds\":60}",
                               i, i);
    for (unsigned i = 0; i < n; i++) { /* CUSTOMERS in n rules */
        at += (size_t)snprintf(s + at, room - at,
                               ",{\"rule_id\":\"c%u\",\"dimension\":"
                               "\"api_key\",\"match\":{\"value\":[", i);
        for (unsigned c = i; c < CUSTOMERS; c += n)
            at += (size_t)snprintf(s + at, room - at, "%s\"cust-%u\"",
                                   c == i ? "" : ",", c);
        at += (size_t)snprintf(s + at, room - at, "]},\"limit\":1000000000,"
                               "\"window_seconds\":60}");
    }
    snprintf(s + at, room - at, "]");
    return s;
}

/* ns per rl_check() over n requests: with hit, by random customers of
 * the set's (each has an override); else by random keys of KEYS that no
 * override names. */
static double time_block(rl_limiter *lim, unsigned long long n,
                         unsigned hit, uint64_t *rng)
{
    char key[32];
    rl_result res = RL_RESULT_INIT;
    rl_request req = RL_REQUEST_INIT;
    uint64_t t0 = now_ns();

    req.api_key = key;
    req.cost = 1;
    for (unsigned long long i = 0; i < n; i++) {
        if (hit)
            snprintf(key, sizeof key, "cust-%u", (unsigned)pick(rng, hit));
        else
            snprintf(key, sizeof key, "other-%u", (unsigned)pick(rng, KEYS));
        if (rl_check(lim, &req, &res) != RL_OK || !res.allowed) {
            fprintf(stderr, "valuesbench: rl_check: %s\n", errtext(lim));
            exit(1);
        }
    }
    return (double)(now_ns() - t0) / (double)n;
}

int values_main(int argc, char **argv)
{
    options o = {0};
    double per[2 * NSETS][MAX_ROUNDS];
    rl_limiter *lim[NSETS];
    uint64_t rng = 7, t0 = now_ns();
    char err[ERRLEN];
    int rc = bench_opt_args(argc, argv, &table, &o), json = o.json;
    unsigned long long n = o.n, rounds = o.rounds;

    if (rc)
        return rc == 1 ? 0 : rc;
    if (!json)
        print_columns(&layout);
    for (size_t k = 0; k < NSETS; k++) {
        char *text = set_json(sizes[k]);
        lim[k] = bench_limiter_rules(
            (const char *const[]){"metrics", o.no_metrics ? "0" : "1", NULL},
            text, err);
        if (!lim[k]) {
            fprintf(stderr, "valuesbench: rules: %s\n", err);
            exit(1);
        }
        free(text);
        time_block(lim[k], 4 * KEYS, 0, &rng); /* warm: every state */
        time_block(lim[k], 4 * KEYS, sizes[k] ? CUSTOMERS : 0, &rng);
    }
    for (unsigned long long r = 0; r < rounds; r++)
        for (size_t j = 0; j < 2 * NSETS; j++) {
            size_t k = (j + r) % (2 * NSETS);
            per[k][r] = time_block(lim[k / 2], n,
                                   k % 2 && k > 1 ? CUSTOMERS : 0, &rng);
        }
    for (size_t k = 0; k < 2 * NSETS; k++) {
        static const int ref[2 * NSETS] = {-1, -1, 0, 2, 2, 3};
        char name[32], rname[32];
        figure f;
        if (k == 1)
            continue; /* the general rule alone has no override to hit */
        per[k][0] = median_of(per[k], rounds);
        snprintf(name, sizeof name, "%s_%u", k % 2 ? "hit" : "miss",
                 sizes[k / 2]);
        snprintf(rname, sizeof rname, "%s_%u",
                 ref[k] % 2 ? "hit" : "miss", ref[k] >= 0 ? sizes[ref[k] / 2] : 0);
        f = (figure){.name = name, .value = per[k][0], .unit = "ns",
                     .nrefs = ref[k] >= 0, .ref = {ref[k] >= 0 ? per[ref[k]][0] : 0},
                     .ref_name = {rname}};
        xnum(&f, "overrides", sizes[k / 2]);
        emit_figure(&f, json, &layout);
    }
    for (size_t k = 0; k < NSETS; k++)
        rl_limiter_free(lim[k]);
    print_done("valuesbench", json, t0);
    return 0;
}
