/*
 * reservebench.c -- rlbench reserve: rl_reserve() then rl_settle() beside
 * rl_check() of the same request, on any store (--store).  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */

#include "benchmodes.h"
#include "benchutil.h"

enum { W_CHECK, W_REFUND, W_DEBT, W_EQUAL, W_N };
static const char *const wname[W_N] = {"check", "refund", "debt", "equal"};
static const int64_t actual_of[W_N] = {0, 7, 13, 10};

#define ROUNDS_MAX 101

typedef struct options {
    const char *store;
    unsigned long long n, rounds, keys;
    int json;
} options;

static const char *rules =
    "[{\"rule_id\":\"u\",\"dimension\":\"user\",\"limit\":1000000000,"
    "\"window_seconds\":60,\"algorithm\":\"fixed_window\"},"
    "{\"rule_id\":\"i\",\"dimension\":\"ip\",\"limit\":1000000000,"
    "\"window_seconds\":60,\"algorithm\":\"token_bucket\"}]";

static void die(const char *what, rl_limiter *lim)
{
    fprintf(stderr, "reservebench: %s: %s\n", what, rl_errmsg(lim));
    exit(1);
}

/* One round of workload w: ns per request. */
static double round_of(rl_limiter *lim, int w, const options *o,
                       unsigned long long *seq)
{
    char user[32];
    rl_request req = {.size = sizeof(rl_request), .user = user,
                      .ip = "192.0.2.1", .cost = 10};
    rl_result res = RL_RESULT_INIT;
    uint64_t t0 = now_ns();

    for (unsigned long long i = 0; i < o->n; i++) {
        rl_reservation rsv = RL_RESERVATION_INIT;
        snprintf(user, sizeof user, "%llu", (*seq)++ % o->keys);
        if (w == W_CHECK) {
            if (rl_check(lim, &req, &res) != RL_OK)
                die("rl_check", lim);
            continue;
        }
        if (rl_reserve(lim, &req, &rsv, &res) != RL_OK || !res.allowed)
            die("rl_reserve", lim);
        if (rl_settle(lim, &req, &rsv, actual_of[w]) != RL_OK)
            die("rl_settle", lim);
    }
    return (double)(now_ns() - t0) / (double)o->n;
}

static const bench_opt rows[] = {
    BENCH_OPT_JSON_ROW(options),
    {"--store", BENCH_OPT_NAME, OPT_AT(store), -1, -1, -1, -1, NULL,
     "the store (default memory://)"},
    {"--n", BENCH_OPT_COUNT, OPT_AT(n), 1, 1e12, 20000, 20000, NULL,
     "requests a round"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, ROUNDS_MAX, 9, 9, NULL,
     "rounds"},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e12, 10000, 10000, NULL,
     "users drawn from"},
};

static const bench_opts table = {
    .rows = rows, .n = sizeof rows / sizeof rows[0],
    .prog = "rlbench reserve",
    .about = "rl_reserve() then rl_settle() beside rl_check()."};

int reserve_main(int argc, char **argv)
{
    static double t[W_N][ROUNDS_MAX];
    double med[W_N];
    char err[ERRLEN] = "";
    rl_limiter *lim;
    unsigned long long seq = 0;
    options o = {.store = "memory://"};
    int rc = bench_opt_args(argc, argv, &table, &o);

    if (rc)
        return rc == 1 ? 0 : rc;
    if (!(lim = bench_limiter((const char *const[]){"store", o.store,
                                                    "rules", rules,
                                                    "timeout_ms", "1000",
                                                    NULL},
                              err)))
        return fprintf(stderr, "reservebench: %s\n", err), 1;
    round_of(lim, W_CHECK, &o, &seq); /* warm: keys in the store */
    for (unsigned long long r = 0; r < o.rounds; r++)
        for (int w = 0; w < W_N; w++)
            t[w][r] = round_of(lim, w, &o, &seq);
    for (int w = 0; w < W_N; w++)
        med[w] = median_of(t[w], o.rounds);
    for (int w = 0; w < W_N; w++) {
        if (o.json)
            printf("{\"store\":\"%s\",\"workload\":\"%s\",\"ns_per_request\""
                   ":%.1f,\"vs_check\":%.3f,\"n\":%llu,\"rounds\":%llu}\n",
                   o.store, wname[w], med[w], med[w] / med[W_CHECK], o.n,
                   o.rounds);
        else
            printf("%-8s %10.1f ns/request  %5.2fx check\n", wname[w],
                   med[w], med[w] / med[W_CHECK]);
    }
    rl_limiter_free(lim);
    return 0;
}
