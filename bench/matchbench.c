/*
 * matchbench.c -- what finding a request's rules costs (issue 11), each
 * figure beside its reference measured in the same run.
 *
 *   rules_N       rl_check() on the memory store, one thread, median ns
 *                 per request over --rounds blocks of --n requests (the
 *                 four sizes' blocks alternate, in a rotating order), with N
 *                 rules (10, 100, 1000, 5000): 3 that apply (per user,
 *                 per ip, global on /search), 4 globs, and the rest exact
 *                 endpoints (4 in 5) and prefixes ("/pNNN/STARSTAR");
 *                 reference: the same with 10 rules (target: ratio <= 1.3).
 *                 Beside it, walk_ns: what the walk over every rule
 *                 (rule_matches() on each, as rl_check did before the
 *                 index) costs for the same request and set.
 *   glob_star_L   100 glob rules "/api/STAR/vK/STARSTAR/end" and an
 *                 endpoint of L bytes ("/api/" + 'a's + "/end") that gets
 *                 past every pattern's fixed ends and keeps its automaton
 *                 alive to the last byte: ns for the 100 matches by the
 *                 bit-parallel matcher (src/rules/pattern.c); reference: the
 *                 dynamic programme it replaced (tests/pattern_dp.h).  L:
 *                 64, 2 KiB (RL_ENDPOINT_MAX), 8 KiB, 1 MiB (1 MiB under
 *                 the old matcher takes seconds: skipped with --quick).
 *   glob_dstar_L  the same with "/api/STARSTAR/vK/STARSTAR/end": only
 *                 double stars, so segments found with memmem().
 *   check_glob_L  rl_check() with the first 100 rules and that endpoint:
 *                 at 2 KiB and below matched; at 8 KiB and 1 MiB refused
 *                 (RL_EINVAL, over RL_ENDPOINT_MAX), which costs reading
 *                 the bound.
 *
 *   bench/rlbench match [--json] [--quick] [--n N] [--rounds R]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmodes.h"
#include "benchutil.h"
#include "pattern.h"
#include "pattern_dp.h"
#include "ratelimit.h"
#include "rule.h"
#include "ruleset.h"

#define GLOBS 100
#define USERS 1000
#define MAX_ROUNDS 64

typedef struct options {
    unsigned long long n, rounds;
    int json, quick;
} options;

static const text_layout layout = {20, 13, 1, 3, 12, 3};

/* ---- rules: 10 to 5000 ---------------------------------------------------- */

#define RULE_FMT "{\"rule_id\":\"%s%u\",\"dimension\":\"%s\",\"limit\":%s," \
                 "\"window_seconds\":60,\"match\":{\"endpoint\":\"%s\"}}"

/* n rules as described at the top, as a JSON array (malloc'd). */
static char *rules_json(unsigned n)
{
    size_t room = (size_t)n * 200 + 1024, at = 0;
    char *s = malloc(room), ep[64];
    static const char *const globs[] = {"/g/*/items", "/v?/**/x",
                                        "/files/**.png", "/u/*/posts/*"};

    at += (size_t)sprintf(s, "[" RULE_FMT "," RULE_FMT ",", "u", 0u,
                          "user", "1000000000", "/search", "ip", 0u, "ip",
                          "1000000000", "/search");
    at += (size_t)sprintf(s + at, "{\"rule_id\":\"g0\",\"dimension\":"
                          "\"global\",\"limit\":1000000000,"
                          "\"window_seconds\":60}");
    for (unsigned i = 3; i < n; i++) {
        if (i < 7)
            snprintf(ep, sizeof ep, "%s", globs[i - 3]);
        else if (i % 5 == 0)
            snprintf(ep, sizeof ep, "/p%u/**", i);
        else
            snprintf(ep, sizeof ep, "/svc/%u/op", i);
        at += (size_t)sprintf(s + at, "," RULE_FMT, "r", i, "user", "100",
                              ep);
    }
    strcpy(s + at, "]");
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* ns per rl_check() over n requests to /search by random users. */
static double time_block(rl_limiter *lim, unsigned long long n,
                         uint64_t *rng)
{
    char user[32];
    rl_result res = RL_RESULT_INIT;
    rl_request req = RL_REQUEST_INIT;
    uint64_t t0 = now_ns();

    req.endpoint = "/search";
    req.ip = "10.0.0.1";
    req.user = user;
    req.cost = 1;
    for (unsigned long long i = 0; i < n; i++) {
        snprintf(user, sizeof user, "u%u", (unsigned)pick(rng, USERS));
        if (rl_check(lim, &req, &res) != RL_OK || !res.allowed) {
            fprintf(stderr, "matchbench: rl_check: %s\n", errtext(lim));
            exit(1);
        }
    }
    return (double)(now_ns() - t0) / (double)n;
}

/* Median ns of the old walk: rule_matches() on every rule, in order. */
static double time_walk(const rl_ruleset *rs, const options *o)
{
    double per[MAX_ROUNDS];
    volatile size_t sink = 0;

    for (unsigned long long r = 0; r < o->rounds; r++) {
        uint64_t t0 = now_ns();
        for (unsigned long long i = 0; i < o->n; i++)
            for (size_t k = 0; k < rs->n; k++)
                sink += (size_t)rule_matches(&rs->rules[k], "/search", NULL);
        per[r] = (double)(now_ns() - t0) / (double)o->n;
    }
    (void)sink;
    return median(per, o->rounds);
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

/* The sizes' blocks alternate, in a rotating order, so drift on a shared
 * machine hits them alike; each size's figure is its median block. */
static void bench_rules(const options *o)
{
    static const unsigned sizes[NSIZES] = {10, 100, 1000, 5000};
    rl_limiter *lim[NSIZES];
    double per[NSIZES][MAX_ROUNDS], walk[NSIZES];
    uint64_t rng = 42;

    for (size_t k = 0; k < NSIZES; k++) {
        char *json = rules_json(sizes[k]), why[256];
        rl_ruleset *rs = NULL;

        lim[k] = limiter_with(json);
        if (ruleset_parse(json, strlen(json), 1, &rs, why, sizeof why)) {
            fprintf(stderr, "matchbench: %s\n", why);
            exit(1);
        }
        walk[k] = time_walk(rs, o);
        time_block(lim[k], o->n, &rng); /* warm-up: every user's state */
        ruleset_free(rs);
        free(json);
    }
    for (unsigned long long r = 0; r < o->rounds; r++)
        for (size_t j = 0; j < NSIZES; j++) {
            size_t k = (j + r) % NSIZES;
            per[k][r] = time_block(lim[k], o->n, &rng);
        }
    for (size_t k = 0; k < NSIZES; k++) {
        char name[32];
        figure f;
        per[k][0] = median(per[k], o->rounds);
        snprintf(name, sizeof name, "rules_%u", sizes[k]);
        f = (figure){.name = name, .value = per[k][0], .unit = "ns",
                     .nrefs = 1, .ref = {per[0][0]},
                     .ref_name = {"rules_10"}};
        xnum(&f, "rules", sizes[k]);
        xnum(&f, "walk_ns", walk[k]);
        emit_figure(&f, o->json, &layout);
        rl_limiter_free(lim[k]);
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
                              (unsigned)i, "user", "1000000000", pat[i]);
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

static void usage(void)
{
    fprintf(stderr, "usage: rlbench match [--json] [--quick] [--n N] "
                    "[--rounds R (1..%d)]\n", MAX_ROUNDS);
    exit(2);
}

int match_main(int argc, char **argv)
{
    options o = {.n = 20000, .rounds = 7};
    uint64_t t0 = now_ns();

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o.json = 1;
        else if (strcmp(argv[i], "--quick") == 0)
            o.quick = 1;
        else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            parse_count(argv[++i], &o.n) == 0 ? (void)0 : usage();
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            parse_count(argv[++i], &o.rounds) == 0 ? (void)0 : usage();
        else
            usage();
    }
    if (o.n == 0 || o.rounds == 0 || o.rounds > MAX_ROUNDS)
        usage();
    if (o.quick)
        o.n /= 4;
    if (!o.json)
        print_columns(&layout);
    bench_rules(&o);
    bench_globs(&o);
    print_done("matchbench", o.json, t0);
    return 0;
}
