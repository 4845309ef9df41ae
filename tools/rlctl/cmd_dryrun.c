/*
 * cmd_dryrun.c -- `rlctl dryrun RULE --redis URI`: what a rule in mode log
 * would have rejected across the fleet.  Every limiter that runs the rule
 * writes its counts and its sketch of the clients it would have denied
 * into the hash rl:dryrun:{RULE} of the Redis its rules come from (every
 * 5 s); this merges them as the library defines (dryrun_report.h: counts
 * summed over the newest rule version, sketches merged register by
 * register) and prints the fleet's figures.
 */
#include "rlctl.h"
#include "dryrun_report.h"
#include "redis_uri.h"
#include "rule.h"
#include "rules_redis.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void print_report(const char *id, const dryrun_report *r)
{
    if (r->limiters == 0) {
        printf("%s: no limiter has reported a dry run of it (the rule is "
               "not in mode log, or has denied nothing, or its limiters do "
               "not read their rules from this Redis)\n", id);
        return;
    }
    uint64_t distinct = dryrun_report_distinct(r);

    printf("%s (rule version %lld): %llu checks, %llu would have been "
           "denied, about %llu distinct client%s; from %zu limiter%s\n", id,
           (long long)r->version, (unsigned long long)r->checks,
           (unsigned long long)r->would_deny, (unsigned long long)distinct,
           distinct == 1 ? "" : "s", r->limiters,
           r->limiters == 1 ? "" : "s");
    if (r->stale || r->invalid)
        printf("  (left out: %zu report%s of an older version, %zu "
               "unreadable)\n", r->stale, r->stale == 1 ? "" : "s",
               r->invalid);
}

int rlctl_cmd_dryrun(const rlctl_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"redis", required_argument, NULL, 'r'}, {NULL, 0, NULL, 0}};
    const char *uri = NULL, *id;
    rr_conn *c;
    dryrun_report rep;
    redis_uri u;
    char err[256], name[300];
    int c_, rc;

    while ((c_ = getopt_long(argc, argv, "r:", opts, NULL)) != -1) {
        if (c_ != 'r')
            return RLCTL_USAGE;
        uri = optarg;
    }
    if (optind != argc - 1 || !uri)
        return fprintf(stderr, "usage: rlctl dryrun RULE --redis URI\n"),
               RLCTL_USAGE;
    id = argv[optind];
    if (rule_id_check(id))
        return fprintf(stderr, "rlctl: \"%.80s\" is not a rule id\n", id),
               RLCTL_USAGE;
    if (redis_uri_parse(uri, &u, err, sizeof err))
        return fprintf(stderr, "rlctl dryrun: --redis: %s\n", err),
               RLCTL_USAGE;
    if (u.tls) /* dryrun_fetch() reads a blocking hiredis context */
        return fprintf(stderr, "rlctl dryrun: --redis: rediss:// (TLS) is "
                       "not supported; use redis:// or unix://\n"),
               RLCTL_USAGE;
    c = rr_connect(&u, NULL, -1, mono_ms() + o->timeout_ms, o->timeout_ms, &rc,
                   err, sizeof err);
    if (!c) { /* the server by address, never by its URI (a password) */
        rr_name(&u, name, sizeof name);
        return fprintf(stderr, "rlctl dryrun: redis %s: %s\n", name, err),
               RLCTL_UNREACHABLE;
    }
    rc = dryrun_fetch(c->c, id, &rep, err, sizeof err);
    rr_close(c);
    if (rc != 0)
        return fprintf(stderr, "rlctl dryrun: %s\n", err),
               RLCTL_UNREACHABLE;
    if (o->json)
        printf("{\"rule_id\":\"%s\",\"version\":%lld,\"checks\":%llu,"
               "\"would_deny\":%llu,\"distinct\":%llu,\"limiters\":%zu}\n",
               id, (long long)rep.version, (unsigned long long)rep.checks,
               (unsigned long long)rep.would_deny,
               (unsigned long long)dryrun_report_distinct(&rep),
               rep.limiters);
    else
        print_report(id, &rep);
    return RLCTL_DONE;
}
