/*
 * reservebench.c -- what reserving and settling cost beside a plain check,
 * on any store (--store, memory:// by default; a redis:// URI measures
 * the round trips).  One thread; keys drawn from --keys users; the rule
 * set charges 2 rules per request (per user, a fixed window; per ip, a
 * token bucket), all far from their limits.  Workloads, each the median
 * over --rounds rounds of --n requests of nanoseconds per request:
 *   check       rl_check() of cost 10: the reference, measured in the
 *               same run, interleaved with the others round by round;
 *   refund      rl_reserve() of 10, then rl_settle() at 7;
 *   debt        rl_reserve() of 10, then rl_settle() at 13;
 *   equal       rl_reserve() of 10, then rl_settle() at 10 (no store
 *               call for the settle).
 * Each line gives the workload's figure and its ratio to check.  --json:
 * one object per line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ratelimit.h"

enum { W_CHECK, W_REFUND, W_DEBT, W_EQUAL, W_N };
static const char *const wname[W_N] = {"check", "refund", "debt", "equal"};
static const int64_t actual_of[W_N] = {0, 7, 13, 10};

#define ROUNDS_MAX 101

typedef struct opts {
    const char *store;
    unsigned long n, rounds, keys;
    int json;
} opts;

static const char *rules =
    "[{\"rule_id\":\"u\",\"dimension\":\"user\",\"limit\":1000000000,"
    "\"window_seconds\":60,\"algorithm\":\"fixed_window\"},"
    "{\"rule_id\":\"i\",\"dimension\":\"ip\",\"limit\":1000000000,"
    "\"window_seconds\":60,\"algorithm\":\"token_bucket\"}]";

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, rl_limiter *lim)
{
    fprintf(stderr, "reservebench: %s: %s\n", what, rl_errmsg(lim));
    exit(1);
}

/* One round of workload w: ns per request. */
static double round_of(rl_limiter *lim, int w, const opts *o,
                       unsigned long *seq)
{
    char user[32];
    rl_request req = {.size = sizeof(rl_request), .user = user,
                      .ip = "192.0.2.1", .cost = 10};
    rl_result res = RL_RESULT_INIT;
    uint64_t t0 = now_ns();

    for (unsigned long i = 0; i < o->n; i++) {
        rl_reservation rsv = RL_RESERVATION_INIT;
        snprintf(user, sizeof user, "%lu", (*seq)++ % o->keys);
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

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void parse(int argc, char **argv, opts *o)
{
    *o = (opts){.store = "memory://", .n = 20000, .rounds = 9,
                .keys = 10000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0)
            o->json = 1;
        else if (v && strcmp(a, "--store") == 0)
            o->store = argv[++i];
        else if (v && strcmp(a, "--n") == 0)
            o->n = strtoul(argv[++i], NULL, 10);
        else if (v && strcmp(a, "--rounds") == 0)
            o->rounds = strtoul(argv[++i], NULL, 10);
        else if (v && strcmp(a, "--keys") == 0)
            o->keys = strtoul(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: reservebench [--store URI] [--n N] "
                    "[--rounds R] [--keys K] [--json]\n");
            exit(2);
        }
    }
    if (!o->n || !o->keys || !o->rounds || o->rounds > ROUNDS_MAX) {
        fprintf(stderr, "reservebench: --n, --keys: > 0; --rounds: "
                "1..%d\n", ROUNDS_MAX);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    static double t[W_N][ROUNDS_MAX];
    double med[W_N];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    unsigned long seq = 0;
    opts o;

    parse(argc, argv, &o);
    if (!cfg || rl_config_set(cfg, "store", o.store) != RL_OK ||
        rl_config_set(cfg, "rules", rules) != RL_OK ||
        rl_config_set(cfg, "timeout_ms", "1000") != RL_OK ||
        rl_limiter_new(&lim, cfg) != RL_OK)
        die("setting up", NULL);
    rl_config_free(cfg);
    round_of(lim, W_CHECK, &o, &seq); /* warm: keys in the store */
    for (unsigned long r = 0; r < o.rounds; r++)
        for (int w = 0; w < W_N; w++)
            t[w][r] = round_of(lim, w, &o, &seq);
    for (int w = 0; w < W_N; w++) {
        qsort(t[w], o.rounds, sizeof t[w][0], cmp);
        med[w] = t[w][o.rounds / 2];
    }
    for (int w = 0; w < W_N; w++) {
        if (o.json)
            printf("{\"store\":\"%s\",\"workload\":\"%s\",\"ns_per_request\""
                   ":%.1f,\"vs_check\":%.3f,\"n\":%lu,\"rounds\":%lu}\n",
                   o.store, wname[w], med[w], med[w] / med[W_CHECK], o.n,
                   o.rounds);
        else
            printf("%-8s %10.1f ns/request  %5.2fx check\n", wname[w],
                   med[w], med[w] / med[W_CHECK]);
    }
    rl_limiter_free(lim);
    return 0;
}
