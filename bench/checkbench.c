/*
 * checkbench.c -- rl_check() and rl_check_many() on the memory store, for
 * comparing two builds of the library (issue 12); compiles against any
 * header from 0.1 on (of benchutil.h it uses only the inline parts, and
 * links no bench code).  Method: docs/BENCHMARKS.md, "How each bench
 * measures".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "ratelimit.h" /* before benchutil.h, which defines the INITs */

#ifdef RL_REQUEST_INIT
#define HAVE_SIZES 1 /* the 1.0 header: sizes and named dimensions */
#else
#define HAVE_SIZES 0
#endif

#include "benchutil.h" /* now_ns(), pick(), RL_RESULT_INIT before 1.0 */

#define BATCH 32

typedef struct opts {
    unsigned long n, rounds, keys, others;
    int json;
} opts;

/* `others` rules per user on other endpoints, then per user (or tenant),
 * per ip, global: a request to /search is charged those 3. */
static rl_limiter *limiter(const char *user_dim, unsigned long others)
{
    size_t cap = 256 * (others + 3), len = 1;
    char *s = malloc(cap);
    rl_limiter *lim = NULL;

    if (!s)
        exit(1);
    s[0] = '[';
    for (unsigned long i = 0; i < others; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "{\"rule_id\":\"o%lu\",\"dimension\":\"user\","
                                "\"match\":{\"endpoint\":\"/other%lu\"},"
                                "\"limit\":1000000000,\"window_seconds\":60},",
                                i, i);
    snprintf(s + len, cap - len,
             "{\"rule_id\":\"u\",\"dimension\":\"%s\",\"match\":"
             "{\"endpoint\":\"/search\"},\"limit\":1000000000,"
             "\"window_seconds\":60},{\"rule_id\":\"i\",\"dimension\":"
             "\"ip\",\"limit\":1000000000,\"window_seconds\":60,"
             "\"algorithm\":\"token_bucket\"},{\"rule_id\":\"g\","
             "\"dimension\":\"global\",\"limit\":1000000000,"
             "\"window_seconds\":60,\"algorithm\":\"fixed_window\"}]",
             user_dim);
    if (rl_limiter_new(&lim, NULL) != RL_OK ||
        rl_rules_load_string(lim, s) != RL_OK)
        exit((fprintf(stderr, "checkbench: %s\n", rl_errmsg(lim)), 1));
    free(s);
    return lim;
}

typedef struct workload {
    const char *name;
    int named, many;
} workload;

/* Requests for n draws among keys users, built before timing. */
typedef struct reqset {
    rl_request *req;
    char (*user)[24];
    char (*ip)[32];
#if HAVE_SIZES
    rl_dim *dim;
#endif
} reqset;

static void reqset_make(reqset *r, const opts *o, int named)
{
    uint64_t x = 0x9e3779b97f4a7c15u;

    r->req = calloc(o->n, sizeof *r->req);
    r->user = calloc(o->keys, sizeof *r->user);
    r->ip = calloc(o->keys, sizeof *r->ip);
#if HAVE_SIZES
    if (!(r->dim = calloc(o->keys, sizeof *r->dim)))
        exit(1);
#endif
    if (!r->req || !r->user || !r->ip)
        exit(1);
    for (unsigned long k = 0; k < o->keys; k++) {
        snprintf(r->user[k], sizeof r->user[k], "%lu", 100000 + k);
        snprintf(r->ip[k], sizeof r->ip[k], "10.%u.%u.%u",
                 (unsigned)(k >> 16 & 255), (unsigned)(k >> 8 & 255),
                 (unsigned)(k & 255));
#if HAVE_SIZES
        r->dim[k] = (rl_dim){"tenant", r->user[k]};
#endif
    }
    for (unsigned long i = 0; i < o->n; i++) {
        unsigned long k = (unsigned long)pick(&x, o->keys);
        r->req[i] = (rl_request){
#if HAVE_SIZES
            .size = sizeof(rl_request),
            .dims = named ? &r->dim[k] : NULL, .ndims = named ? 1 : 0,
#endif
            .endpoint = "/search", .user = named ? NULL : r->user[k],
            .ip = r->ip[k], .cost = 1};
    }
}

/* ns a request of one round over the set, one at a time or BATCH. */
static double round_ns(rl_limiter *lim, const reqset *r, const opts *o,
                       int many)
{
    rl_result res[BATCH];
    int codes[BATCH], rc = RL_OK;
    uint64_t t0;

    for (int i = 0; i < BATCH; i++)
        res[i] = (rl_result)RL_RESULT_INIT;
    t0 = now_ns();
    for (unsigned long i = 0; !many && i < o->n && rc == RL_OK; i++)
        rc = rl_check(lim, &r->req[i], &res[0]);
    for (unsigned long i = 0; many && i + BATCH <= o->n && rc == RL_OK;
         i += BATCH)
        rc = rl_check_many(lim, &r->req[i], res, codes, BATCH);
    if (rc != RL_OK)
        exit((fprintf(stderr, "%s\n", rl_errmsg(lim)), 1));
    return (double)(now_ns() - t0) / (double)(o->n / BATCH * BATCH);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static void run(const workload *w, const opts *o)
{
    rl_limiter *lim = limiter(w->named ? "tenant" : "user", o->others);
    double *ns = calloc(o->rounds, sizeof *ns);
    reqset r;

    reqset_make(&r, o, w->named);
    round_ns(lim, &r, o, w->many); /* warm: every key in the store */
    for (unsigned long i = 0; i < o->rounds; i++)
        ns[i] = round_ns(lim, &r, o, w->many);
    qsort(ns, o->rounds, sizeof *ns, cmp);
    if (o->json)
        printf("{\"bench\":\"checkbench\",\"library\":\"%s\",\"workload\":"
               "\"%s\",\"ns_per_request_median\":%.1f,\"ns_min\":%.1f,"
               "\"ns_max\":%.1f,\"rounds\":%lu,\"n\":%lu,\"keys\":%lu,"
               "\"other_rules\":%lu}\n",
               rl_version_string(), w->name, ns[o->rounds / 2], ns[0],
               ns[o->rounds - 1], o->rounds, o->n, o->keys, o->others);
    else
        printf("%-8s %-12s %8.1f ns/request (min %.1f, max %.1f)\n",
               rl_version_string(), w->name, ns[o->rounds / 2], ns[0],
               ns[o->rounds - 1]);
    free(ns);
    free(r.req);
    free(r.user);
    free(r.ip);
#if HAVE_SIZES
    free(r.dim);
#endif
    rl_limiter_free(lim);
}

int main(int argc, char **argv)
{
    static const workload all[] = {{"check", 0, 0}, {"many", 0, 1},
                                   {"check_named", 1, 0},
                                   {"many_named", 1, 1}};
    opts o = {.n = 200000, .rounds = 7, .keys = 10000, .others = 97};

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o.json = 1;
        else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
            o.n = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            o.rounds = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc)
            o.keys = strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--others") == 0 && i + 1 < argc)
            o.others = strtoul(argv[++i], NULL, 10);
        else
            return fprintf(stderr, "usage: checkbench [--json] [--n N] "
                           "[--rounds R] [--keys K] [--others N]\n"), 2;
    }
    if (o.n < BATCH || o.rounds < 1 || o.keys < 1 || o.keys > 1u << 24 ||
        o.others > 100000)
        return fprintf(stderr, "checkbench: bad numbers\n"), 2;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (HAVE_SIZES || !all[i].named)
            run(&all[i], &o);
    return 0;
}
