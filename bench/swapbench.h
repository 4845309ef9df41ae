/*
 * swapbench.h -- what the files of bench/swapbench share: the options
 * and constants, the rule sets it builds, and each measurement's entry
 * point.  swapbench.c says what the program measures.
 */
#ifndef RL_BENCH_SWAPBENCH_H
#define RL_BENCH_SWAPBENCH_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "benchutil.h"
#include "redis_harness.h"
#include "rld_harness.h"
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

extern const text_layout layout;

int want(const options *o, const char *what);
void sleep_ns(uint64_t ns);
char *rule_set(unsigned long long n, int minimal, long long version,
               long long limit0);
int parse_next(const char *text, size_t len, const rl_ruleset *prev,
               rl_ruleset **out, char *err);

/* The measurements (swapbench_swap.c, _parse.c, _change.c). */
int bench_swap(const options *o, char *err);
int bench_parse(const options *o, char *err);
int bench_change(const options *o, const rh_server *srv, char *err);
int bench_put(const options *o, const rh_server *srv, char *err);

#endif
