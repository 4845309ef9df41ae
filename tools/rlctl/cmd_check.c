/*
 * cmd_check.c -- `rlctl check KEY RULE --store URI`: what a server would
 * decide for one client now.  It opens a limiter on the store (the
 * library's public API, as any embedding does), loads the rule set the
 * rules service holds (or a file), charges the key under the rule and
 * prints the decision with the headers a client would get.  It charges
 * for real (the fleet sees it); --cost 0 only looks.
 */
#include "rlctl.h"

#include <getopt.h>
#include <ratelimit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rule set from the service, loaded into lim. */
static int load_from_service(const rlctl_opts *o, rl_limiter *lim)
{
    rlctl_reply r;
    int rc = rlctl_request(o, "GET", "/v1/rules", NULL, NULL, NULL, "rules",
                           &r);

    if (rc == RLCTL_DONE &&
        rl_rules_load_string(lim, r.body) != RL_OK) {
        fprintf(stderr, "rlctl check: the service's rule set does not load: "
                "%s\n", rl_errmsg(lim));
        rc = RLCTL_UNREACHABLE;
    }
    rlctl_reply_free(&r);
    return rc;
}

static void print_result(const char *key, const rl_result *res)
{
    char hdrs[RL_HEADERS_FORMAT_MAX];

    printf("%s: %s by rule %s (limit %lld per %lld s, %lld remaining)%s%s\n",
           key, res->allowed ? "allowed" : "denied", res->rule_id,
           (long long)res->limit, (long long)res->window,
           (long long)res->remaining,
           res->flags & RL_FLAG_SOFT ? ", would deny (mode log)" : "",
           res->flags & (RL_FLAG_FAIL_OPEN | RL_FLAG_FALLBACK |
                         RL_FLAG_FAIL_CLOSED)
               ? ", the store failed: decided by the failure mode" : "");
    if (rl_headers_format(res, RL_HEADERS_IETF, hdrs, sizeof hdrs) >= 0)
        fputs(hdrs, stdout);
}

/* Open the limiter: the store from flags, the rules from a file or the
 * service. */
static int open_limiter(const rlctl_opts *o, const char *store,
                        const char *rules, rl_limiter **lim)
{
    rl_config *cfg = rl_config_new();
    int rc;

    if (!cfg)
        return fprintf(stderr, "rlctl check: out of memory\n"),
               RLCTL_UNREACHABLE;
    rc = rl_config_set(cfg, "store", store);
    if (rc == RL_OK) { /* one operator's check waits as --timeout says,
                        * not the request path's 5 ms default */
        char ms[24];
        snprintf(ms, sizeof ms, "%ld",
                 o->timeout_ms > 60000 ? 60000L : (long)o->timeout_ms);
        rc = rl_config_set(cfg, "timeout_ms", ms);
    }
    if (rc == RL_OK && rules)
        rc = rl_config_set(cfg, "rules_file", rules);
    if (rc != RL_OK) {
        fprintf(stderr, "rlctl check: %s\n", rl_errmsg(NULL));
        rl_config_free(cfg);
        return RLCTL_USAGE;
    }
    rc = rl_limiter_new(lim, cfg);
    rl_config_free(cfg);
    if (rc != RL_OK) {
        fprintf(stderr, "rlctl check: %s\n", rl_errmsg(NULL));
        return rc == RL_ESTORE ? RLCTL_UNREACHABLE : RLCTL_USAGE;
    }
    return rules ? RLCTL_DONE : load_from_service(o, *lim);
}

int rlctl_cmd_check(const rlctl_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"store", required_argument, NULL, 's'},
        {"cost", required_argument, NULL, 'c'},
        {"rules", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0}};
    const char *store = NULL, *rules = NULL;
    long long cost = 1;
    rl_limiter *lim = NULL;
    rl_result res = RL_RESULT_INIT;
    char *end;
    int c, rc;

    while ((c = getopt_long(argc, argv, "s:c:r:", opts, NULL)) != -1) {
        if (c == 's')
            store = optarg;
        else if (c == 'r')
            rules = optarg;
        else if (c != 'c' || (cost = strtoll(optarg, &end, 10), *end) ||
                 !*optarg)
            return fprintf(stderr, "rlctl check: --cost: a whole number\n"),
                   RLCTL_USAGE;
    }
    if (optind != argc - 2 || !store)
        return fprintf(stderr, "usage: rlctl check KEY RULE --store URI "
                       "[--cost N] [--rules FILE]\n"), RLCTL_USAGE;
    if ((rc = open_limiter(o, store, rules, &lim)) == RLCTL_DONE) {
        int got = rl_allow(lim, argv[optind], argv[optind + 1], cost, &res);
        if (got != RL_OK) {
            fprintf(stderr, "rlctl check: %s\n", rl_errmsg(lim));
            rc = got == RL_ENORULE ? RLCTL_REFUSED : RLCTL_USAGE;
        } else {
            print_result(argv[optind], &res);
            rc = res.allowed ? RLCTL_DONE : RLCTL_REFUSED;
        }
    }
    rl_limiter_free(lim);
    return rc;
}
