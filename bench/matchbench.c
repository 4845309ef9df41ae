/*
 * matchbench.c -- what finding a request's rules costs (issue 11), each
 * figure beside its reference measured in the same run.
 * Method and figures: docs/BENCHMARKS.md, "How each bench measures".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmodes.h"
#include "benchutil.h"
#include "pattern.h"
#include "pattern_dp.h"
#include "ratelimit.h"
#include "rule.h"
#include "rule_index.h"
#include "ruleset.h"

#define GLOBS 100
#define USERS 1000
#define MAX_ROUNDS 64

typedef struct options {
    unsigned long long n, rounds;
    int json, quick;
} options;

static const text_layout layout = {20, 13, 1, 3, 12, 3};

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--n", BENCH_OPT_COUNT, OPT_AT(n), 1, 1e12, 20000, 5000,
     NULL, "checks per timed block"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, MAX_ROUNDS,
     7, 7, NULL, "timed blocks per size (medians)"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "rlbench match",
    .about = "ns per rl_check() with 10 to 100000 rules, beside 10; glob "
             "matching beside the old matcher."};

/* ---- rules: 10 to 5000 ---------------------------------------------------- */

#define BIG "1000000000"
#define RULE_FMT "{\"rule_id\":\"%s%u\",\"dimension\":\"%s\",\"limit\":%s," \
                 "\"window_seconds\":60,\"match\":{\"endpoint\":\"%s\"%s%s%s}}"

/* The glob-heavy shape's rule i >= 3 (ep: its endpoint; *tier: its
 * tier or NULL). */
static void shape_rule(unsigned i, char *ep, size_t room, const char **tier)
{
    static const char *const globs[] = {
        "/api/*/items%u/*", "/api/v?/orders%u", "/svc%u/**/x",
        "/files%u/*.json", "/api/*/users/*/r%u", "/api/**/h%u"};
    static const char *const exact[] = {"/svc/%u/op", "/api/v1/users/n%u",
                                        "/api/v%u/users", "/e%u"};
    static const char *const prefix[] = {"/p%u/**", "/api/v1/users/n%u/**",
                                         "/api/v%u/**"};
    unsigned k = i % 10;

    *tier = NULL;
    if (k < 4)
        snprintf(ep, room, exact[k], i);
    else if (k < 7)
        snprintf(ep, room, prefix[k - 4], i);
    else if (k < 9)
        snprintf(ep, room, globs[(i / 10 * 2 + k - 7) % 6], i);
    else /* another tier's, on the request's own pattern or another */
        snprintf(ep, room, i % 20 == 9 ? "/api/*/users/*" : "/svc/%u/op", i);
    if (k == 9)
        *tier = "t";
}

/* n rules as described at the top, the glob-heavy shape (glob) or the
 * plain set, as a JSON array (malloc'd). */
static char *rules_json(unsigned n, int glob)
{
    static const char *const globs[] = {"/g/*/items", "/v?/**/x",
                                        "/files/**.png", "/u/*/posts/*"};
    size_t room = (size_t)n * 200 + 1024, at;
    char *s = malloc(room), ep[64], tier[16];

    at = (size_t)sprintf(s, "[" RULE_FMT "," RULE_FMT ",{\"rule_id\":\"g0\","
                         "\"dimension\":\"global\",\"limit\":" BIG ","
                         "\"window_seconds\":60%s}", "u", 0u, "user", BIG,
                         glob ? "/api/*/users/*" : "/search", "", "", "",
                         "ip", 0u, "ip", BIG, glob ? "/api/v1/**" : "/search",
                         "", "", "", glob ? ",\"match\":{\"tier\":\"gold\"}" : "");
    for (unsigned i = 3; i < n; i++) {
        const char *t = NULL;
        if (glob)
            shape_rule(i, ep, sizeof ep, &t);
        else
            snprintf(ep, sizeof ep, i < 7 ? globs[i - 3] : i % 5 == 0 ?
                     "/p%u/**" : "/svc/%u/op", i);
        snprintf(tier, sizeof tier, "t%u", i % 37);
        at += (size_t)sprintf(s + at, "," RULE_FMT, "r", i, "user",
                              glob ? BIG : "100", ep, t ? ",\"tier\":\"" : "",
                              t ? tier : "", t ? "\"" : "");
    }
    strcpy(s + at, "]");
    return s;
}

/* A request of the set's kind (glob-heavy or not) by user u. */
static void request_of(int glob, unsigned u, rl_request *req, char *user,
                       char *ep)
{
    sprintf(user, "u%u", u);
    sprintf(ep, "/api/v1/users/%u", u);
    req->endpoint = glob ? ep : "/search";
    req->tier = glob ? "gold" : NULL;
}

/* ns per rl_check() over n requests to /search (glob: to
 * "/api/v1/users/<id>", tier gold) by random users. */
static double time_block(rl_limiter *lim, unsigned long long n,
                         uint64_t *rng, int glob)
{
    char user[32], ep[48];
    rl_result res = RL_RESULT_INIT;
    rl_request req = RL_REQUEST_INIT;
    uint64_t t0 = now_ns();

    req.ip = "10.0.0.1";
    req.user = user;
    req.cost = 1;
    for (unsigned long long i = 0; i < n; i++) {
        request_of(glob, (unsigned)pick(rng, USERS), &req, user, ep);
        if (rl_check(lim, &req, &res) != RL_OK || !res.allowed) {
            fprintf(stderr, "matchbench: rl_check: %s\n", errtext(lim));
            exit(1);
        }
    }
    return (double)(now_ns() - t0) / (double)n;
}

/* Median ns of the old walk (rule_matches() on every rule, in order;
 * fewer requests for big sets) or of rule_index_match() alone (index). */
static double time_walk(const rl_ruleset *rs, const options *o, int glob,
                        int index)
{
    double per[MAX_ROUNDS];
    volatile size_t sink = 0;
    unsigned long long n = index ? o->n : o->n * 10 / rs->n + 10;
    rl_request req = RL_REQUEST_INIT;
    char user[32], ep[48];
    uint32_t hit[RULE_INDEX_MAX];

    request_of(glob, 7, &req, user, ep);
    for (unsigned long long r = 0; r < o->rounds; r++) {
        uint64_t t0 = now_ns();
        for (unsigned long long i = 0; i < n; i++)
            if (index)
                sink += rule_index_match(rs->match, rs->rules, req.endpoint,
                                         strlen(req.endpoint), req.tier,
                                         req.tier ? strlen(req.tier) : 0, ~0ULL,
                                         hit, RULE_INDEX_MAX);
            else
                for (size_t k = 0; k < rs->n; k++)
                    sink += (size_t)rule_matches(&rs->rules[k], req.endpoint,
                                                 req.tier);
        per[r] = (double)(now_ns() - t0) / (double)n;
    }
    (void)sink;
    return median_of(per, o->rounds);
}

static rl_limiter *limiter_with(const char *json)
{
    rl_limiter *lim = NULL;

    if (rl_limiter_new(&lim, NULL) != RL_OK ||
        rl_rules_load_string(lim, json) != RL_OK) {
        fprintf(stderr, "matchbench: limiter: %s\n", errtext(lim));
        exit(1);
    }
    return lim;
}

#define NSIZES 4

static rl_ruleset *parse_or_die(const char *json)
{
    char why[256];
    rl_ruleset *rs = NULL;

    if (ruleset_parse(json, strlen(json), 1, &rs, why, sizeof why)) {
        fprintf(stderr, "matchbench: %s\n", why);
        exit(1);
    }
    return rs;
}

/* At the largest size: median ms to build the index and to parse the
 * whole set, and the index's bytes per rule. */
static void build_figures(figure *f, const char *json, const options *o)
{
    double build[MAX_ROUNDS], parse[MAX_ROUNDS];
    rl_ruleset *rs = parse_or_die(json);

    for (unsigned long long r = 0; r < o->rounds; r++) {
        uint64_t t0 = now_ns();
        rule_index *ix = rule_index_build(rs->rules, rs->n);
        build[r] = (double)(now_ns() - t0) / 1e6;
        rule_index_free(ix);
        t0 = now_ns();
        ruleset_free(parse_or_die(json));
        parse[r] = (double)(now_ns() - t0) / 1e6;
    }
    xnum(f, "build_ms", median_of(build, o->rounds));
    xnum(f, "parse_ms", median_of(parse, o->rounds));
    xnum(f, "index_bytes_per_rule",
         (double)rule_index_bytes(rs->match) / (double)rs->n);
    ruleset_free(rs);
}

/* The sizes' blocks alternate, in a rotating order, so drift on a shared
 * machine hits them alike; each size's figure is its median block. */
static void bench_rules(const options *o, int glob)
{
    static const unsigned plain[NSIZES] = {10, 100, 1000, 5000};
    static const unsigned shape[NSIZES] = {10, 5000, 100000};
    const unsigned *sizes = glob ? shape : plain;
    size_t ns = glob ? 3 : NSIZES;
    rl_limiter *lim[NSIZES];
    double per[NSIZES][MAX_ROUNDS], walk[NSIZES], only[NSIZES];
    char *json[NSIZES];
    uint64_t rng = 42;

    for (size_t k = 0; k < ns; k++) {
        rl_ruleset *rs;
        json[k] = rules_json(sizes[k], glob);
        lim[k] = limiter_with(json[k]);
        rs = parse_or_die(json[k]);
        walk[k] = time_walk(rs, o, glob, 0);
        only[k] = time_walk(rs, o, glob, 1);
        time_block(lim[k], o->n, &rng, glob); /* warm-up: users' state */
        ruleset_free(rs);
    }
    for (unsigned long long r = 0; r < o->rounds; r++)
        for (size_t j = 0; j < ns; j++) {
            size_t k = (j + r) % ns;
            per[k][r] = time_block(lim[k], o->n, &rng, glob);
        }
    for (size_t k = 0; k < ns; k++) {
        char name[32];
        double v = per[k][0] = median_of(per[k], o->rounds);
        figure f = {.name = name, .value = v, .unit = "ns", .nrefs = 1,
                    .ref = {per[0][0]},
                    .ref_name = {glob ? "shape_10" : "rules_10"}, .nextra = 4,
                    .x = {{"rules", sizes[k]}, {"walk_ns", walk[k]},
                          {"index_ns", only[k]},
                          {"index_ratio", only[k] / only[0]}}};

        snprintf(name, sizeof name, "%s_%u", glob ? "shape" : "rules",
                 sizes[k]);
        if (glob && k == ns - 1)
            build_figures(&f, json[k], o);
        emit_figure(&f, o->json, &layout);
        rl_limiter_free(lim[k]);
        free(json[k]);
    }
}

/* ---- globs and long endpoints --------------------------------------------- */

/* ns a round, rounds repeated until 50 ms have gone by: the 100 patterns
 * pat matched against ep by the matcher (how 0) or by the one before it
 * (how 1), *out their matches; or (how 2) rl_check() of ep on lim, *out its
 * code. */
static double time_globs(char (*pat)[64], rl_limiter *lim, const char *ep,
                         int how, int *out)
{
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;
    uint64_t t0 = now_ns(), t;
    unsigned long reps = 0;

    req.endpoint = ep;
    req.user = "u1";
    req.cost = 0;
    do {
        *out = how == 2 ? rl_check(lim, &req, &res) : 0;
        for (int i = 0; how < 2 && i < GLOBS; i++)
            *out += how ? pattern_match_dp(pat[i], ep)
                        : pattern_match(pat[i], ep);
        reps++;
    } while ((t = now_ns() - t0) < 50000000ULL);
    return (double)t / (double)reps;
}

/* glob_<family>_L (the matcher beside the one before it, on the 100
 * patterns of a family: "/api/STAR/vK/STARSTAR/end", or STARSTAR first) and
 * check_glob_L (rl_check() with the star family's rules), for endpoints
 * of L bytes ("/api/" + 'a's + "/end"). */
static void bench_globs(const options *o)
{
    static const size_t lens[] = {64, RL_ENDPOINT_MAX, 8192, 1 << 20};
    static const char *const fam[2] = {"star", "dstar"};
    char (*pat)[GLOBS][64] = malloc(2 * sizeof *pat);
    char *json = malloc(GLOBS * 160 + 16);
    size_t at = 1;
    rl_limiter *lim;

    json[0] = '[';
    for (int i = 0; i < GLOBS; i++) {
        for (int s = 0; s < 2; s++)
            snprintf(pat[s][i], sizeof pat[s][i], "/api/%s/v%d/**/end",
                     s ? "**" : "*", i);
        at += (size_t)sprintf(json + at, "%s" RULE_FMT, i ? "," : "", "g",
                              (unsigned)i, "user", BIG, pat[0][i], "", "", "");
    }
    strcpy(json + at, "]");
    lim = limiter_with(json);
    free(json);
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        char *ep = malloc(lens[k] + 1), name[40];
        int rc, m[2];
        double t_check, t[2];

        memset(ep, 'a', lens[k]);
        memcpy(ep, "/api/", 5);
        memcpy(ep + lens[k] - 4, "/end", 5);
        t_check = time_globs(NULL, lim, ep, 2, &rc);
        for (int s = 0; s < 2; s++) {
            t[0] = time_globs(pat[s], NULL, ep, 0, &m[0]);
            t[1] = o->quick && lens[k] > 8192 ? 0
                   : time_globs(pat[s], NULL, ep, 1, &m[1]);
            if (t[1] && m[0] != m[1]) {
                fprintf(stderr, "matchbench: matchers disagree\n");
                exit(1);
            }
            snprintf(name, sizeof name, "glob_%s_%zu", fam[s], lens[k]);
            emit_figure(&(figure){.name = name, .value = t[0], .unit = "ns",
                .nrefs = 1, .ref = {t[1]}, .ref_name = {"dp_before"},
                .nextra = 2, .x = {{"endpoint_bytes", (double)lens[k]},
                                   {"patterns", GLOBS}}}, o->json, &layout);
        }
        snprintf(name, sizeof name, "check_glob_%zu", lens[k]);
        emit_figure(&(figure){.name = name, .value = t_check, .unit = "ns",
            .nextra = 2, .x = {{"endpoint_bytes", (double)lens[k]},
            {"rc", 0, rc == RL_OK ? "RL_OK" : rl_strerror(rc)}}},
            o->json, &layout);
        free(ep);
    }
    rl_limiter_free(lim);
    free(pat);
}

int match_main(int argc, char **argv)
{
    options o = {0};
    uint64_t t0 = now_ns();
    int rc = bench_opt_args(argc, argv, &table, &o);

    if (rc)
        return rc == 1 ? 0 : rc;
    if (!o.json)
        print_columns(&layout);
    bench_rules(&o, 0);
    bench_rules(&o, 1);
    bench_globs(&o);
    print_done("matchbench", o.json, t0);
    return 0;
}
