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
                                         strlen(req.endpoint), req.tier, ~0ULL,
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
        figure f;
        per[k][0] = median_of(per[k], o->rounds);
        snprintf(name, sizeof name, "%s_%u", glob ? "shape" : "rules",
                 sizes[k]);
        f = (figure){.name = name, .value = per[k][0], .unit = "ns",
                     .nrefs = 1, .ref = {per[0][0]},
                     .ref_name = {glob ? "shape_10" : "rules_10"}};
        xnum(&f, "rules", sizes[k]);
        xnum(&f, "walk_ns", walk[k]);
        xnum(&f, "index_ns", only[k]);
        xnum(&f, "index_ratio", only[k] / only[0]);
        if (glob && k == ns - 1)
            build_figures(&f, json[k], o);
        emit_figure(&f, o->json, &layout);
        rl_limiter_free(lim[k]);
        free(json[k]);
    }
}

/* ---- globs and long endpoints --------------------------------------------- */

/* ns per call of the 100 patterns on ep, by the new matcher (old = 0) or
 * the old; repeated until at least 50 ms have gone by. */
static double time_globs(char (*pat)[64], const char *ep, int old,
                         int *matched)
{
    uint64_t t0 = now_ns(), t;
    unsigned long reps = 0;
    int m = 0;

    do {
        m = 0;
        for (int i = 0; i < GLOBS; i++)
            m += old ? pattern_match_dp(pat[i], ep) : pattern_match(pat[i], ep);
        reps++;
    } while ((t = now_ns() - t0) < 50000000ULL);
    *matched = m;
    return (double)t / (double)reps;
}

static double time_check_glob(rl_limiter *lim, const char *ep, int *rc)
{
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;
    uint64_t t0 = now_ns(), t;
    unsigned long reps = 0;

    req.endpoint = ep;
    req.user = "u1";
    req.cost = 0;
    do {
        *rc = rl_check(lim, &req, &res);
        reps++;
    } while ((t = now_ns() - t0) < 50000000ULL);
    return (double)t / (double)reps;
}

static char *long_endpoint(size_t len)
{
    char *ep = malloc(len + 1);

    memset(ep, 'a', len);
    memcpy(ep, "/api/", 5);
    memcpy(ep + len - 4, "/end", 4);
    ep[len] = '\0';
    return ep;
}

/* The 100 patterns of a family (star: "/api/STAR/..."; else STARSTAR). */
static void make_globs(char (*pat)[64], int star)
{
    for (int i = 0; i < GLOBS; i++)
        snprintf(pat[i], sizeof pat[i], "/api/%s/v%d/**/end",
                 star ? "*" : "**", i);
}

static rl_limiter *glob_limiter(char (*pat)[64])
{
    size_t room = GLOBS * 160 + 16, at = 1;
    char *json = malloc(room);
    rl_limiter *lim;

    json[0] = '[';
    for (int i = 0; i < GLOBS; i++)
        at += (size_t)sprintf(json + at, "%s" RULE_FMT, i ? "," : "", "g",
                              (unsigned)i, "user", BIG, pat[i], "", "", "");
    strcpy(json + at, "]");
    lim = limiter_with(json);
    free(json);
    return lim;
}

/* glob_<family>_L: the new matcher beside the old on one endpoint. */
static void emit_glob(const options *o, char (*pat)[64], const char *fam,
                      const char *ep, size_t len)
{
    int m_new, m_old = 0;
    double t_new = time_globs(pat, ep, 0, &m_new), t_old = 0;
    char name[40];
    figure f;

    if (!(o->quick && len > 8192))
        t_old = time_globs(pat, ep, 1, &m_old);
    if (t_old && m_new != m_old) {
        fprintf(stderr, "matchbench: matchers disagree\n");
        exit(1);
    }
    snprintf(name, sizeof name, "glob_%s_%zu", fam, len);
    f = (figure){.name = name, .value = t_new, .unit = "ns", .nrefs = 1,
                 .ref = {t_old}, .ref_name = {"dp_before"}};
    xnum(&f, "endpoint_bytes", (double)len);
    xnum(&f, "patterns", GLOBS);
    emit_figure(&f, o->json, &layout);
}

static void bench_globs(const options *o)
{
    static const size_t lens[] = {64, RL_ENDPOINT_MAX, 8192, 1 << 20};
    char (*star)[64] = malloc(GLOBS * sizeof *star);
    char (*dstar)[64] = malloc(GLOBS * sizeof *dstar);
    rl_limiter *lim;

    make_globs(star, 1);
    make_globs(dstar, 0);
    lim = glob_limiter(star);
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        char *ep = long_endpoint(lens[k]), name[40];
        int rc;
        double t_check = time_check_glob(lim, ep, &rc);
        figure f;

        emit_glob(o, star, "star", ep, lens[k]);
        emit_glob(o, dstar, "dstar", ep, lens[k]);
        snprintf(name, sizeof name, "check_glob_%zu", lens[k]);
        f = (figure){.name = name, .value = t_check, .unit = "ns"};
        xnum(&f, "endpoint_bytes", (double)lens[k]);
        xstr(&f, "rc", rc == RL_OK ? "RL_OK" : rl_strerror(rc));
        emit_figure(&f, o->json, &layout);
        free(ep);
    }
    rl_limiter_free(lim);
    free(star);
    free(dstar);
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
