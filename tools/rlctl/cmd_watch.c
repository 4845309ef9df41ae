/*
 * cmd_watch.c -- `rlctl watch`: follow the rule set's versions.  It asks
 * ratelimitd for the set with If-None-Match every interval (a 304 costs
 * the service nothing) and prints a line per new version: when, how many
 * rules, which rules changed, appeared or went.  An unreachable service is
 * said once, and watched for again.
 */
#include "rlctl.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* id -> version of every rule of a set. */
static json_t *versions_of(json_t *rules)
{
    json_t *map = json_object(), *rule;
    size_t i;

    json_array_foreach(rules, i, rule) {
        const char *id = json_string_value(json_object_get(rule, "rule_id"));
        if (id)
            json_object_set(map, id, json_object_get(rule, "version"));
    }
    return map;
}

/* "+id" for a new rule, "~id" for a changed one, "-id" for a gone one. */
static void print_changes(json_t *before, json_t *after)
{
    const char *id;
    json_t *v;

    json_object_foreach(after, id, v) {
        json_t *old = json_object_get(before, id);
        if (!old || !json_equal(old, v)) {
            fputs(!old ? " +" : " ~", stdout);
            rlctl_put_clean(stdout, id);
        }
    }
    json_object_foreach(before, id, v)
        if (!json_object_get(after, id)) {
            fputs(" -", stdout);
            rlctl_put_clean(stdout, id);
        }
}

static void print_version(json_t *doc, json_t *before, json_t *after)
{
    char when[32];
    time_t now = time(NULL);
    struct tm tm;

    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    printf("%s version %lld, %zu rules", when,
           (long long)json_integer_value(json_object_get(doc, "version")),
           json_object_size(after));
    if (before)
        print_changes(before, after);
    putchar('\n');
    fflush(stdout);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int rlctl_cmd_watch(const rlctl_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"interval", required_argument, NULL, 'i'},
        {"count", required_argument, NULL, 'n'},
        {NULL, 0, NULL, 0}};
    long interval = 1000, count = 0, seen = 0;
    char etag[64] = "", *end;
    json_t *before = NULL;
    int c, down = 0;

    while ((c = getopt_long(argc, argv, "i:n:", opts, NULL)) != -1) {
        long *slot = c == 'i' ? &interval : c == 'n' ? &count : NULL;
        if (!slot || (*slot = strtol(optarg, &end, 10), *end) ||
            *slot < (c == 'i' ? 10 : 0))
            return fprintf(stderr, "rlctl watch: [--interval MS >= 10] "
                           "[--count N]\n"), RLCTL_USAGE;
    }
    if (optind != argc)
        return fprintf(stderr, "rlctl watch: takes no argument\n"),
               RLCTL_USAGE;
    while (!count || seen < count) {
        rlctl_reply r;
        int rc = rlctl_http(o, "GET", "/v1/rules", NULL, NULL,
                            etag[0] ? etag : NULL, &r);
        json_t *doc = rc ? NULL : json_loads(r.body, 0, NULL);

        if (rc || r.status >= 500 || r.status == 401 || r.status == 403) {
            if (!down++ || r.status == 401 || r.status == 403)
                rc = rlctl_status_exit(&r, "watch");
            if (r.status == 401 || r.status == 403) {
                json_decref(doc);
                rlctl_reply_free(&r);
                json_decref(before);
                return rc;
            }
        } else if (r.status == 200 && json_is_array(json_object_get(doc, "rules"))) {
            json_t *after = versions_of(json_object_get(doc, "rules"));
            down = 0;
            print_version(doc, before, after);
            json_decref(before);
            before = after;
            snprintf(etag, sizeof etag, "%s", r.etag);
            seen++;
        }
        json_decref(doc);
        rlctl_reply_free(&r);
        if (!count || seen < count)
            sleep_ms(interval);
    }
    json_decref(before);
    return RLCTL_DONE;
}
