/*
 * cmd_put.c -- `rlctl put ID`: create or replace one rule, from a JSON
 * file (the body as is: the whole rule) or from flags.  Flags change only
 * what they name: the rule is read first (GET) and the flags laid over
 * it (match.endpoint and match.tier one by one), then written back with
 * If-Match on the version read, so a change made between the two by
 * someone else is refused (412), never overwritten; --if-match V asks
 * for V instead.  A rule that does not exist is created from the flags
 * alone, with If-None-Match: * (a rule created meanwhile: 412).  The
 * service validates it with the library's own parser; rlctl only checks
 * what it must to build the request (the id, numbers being numbers), so
 * there is one definition of a valid rule.
 */
#include "rlctl.h"
#include "rule.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX (1 << 20) /* bytes of a rule file rlctl sends */

static const char put_usage[] =
    "usage: rlctl put ID --file F|-            the rule as JSON\n"
    "       rlctl put ID --dimension D --limit N --window S [--burst B]\n"
    "                [--algorithm A] [--endpoint P] [--tier T]\n"
    "                [--mode enforce|log] [--failure-mode fallback|open|closed]\n"
    "                [--value V]... [--replaces ID]... [--unlimited]\n"
    "       either form: [--if-match V] (only if the rule's version is V)\n"
    "       flags on an existing rule change only what they name\n";

/* The whole of a file (or stdin for "-"), NUL-terminated; NULL and a
 * message on error. */
static char *slurp(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char *buf = f ? malloc(FILE_MAX + 1) : NULL;
    size_t n = 0;

    if (!f || !buf) {
        fprintf(stderr, "rlctl put: cannot read %s\n", path);
        free(buf);
        if (f && f != stdin)
            fclose(f);
        return NULL;
    }
    n = fread(buf, 1, FILE_MAX + 1, f);
    if (f != stdin)
        fclose(f);
    if (n > FILE_MAX) {
        fprintf(stderr, "rlctl put: %s is over %d bytes\n", path, FILE_MAX);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* A number flag into the rule object; -1 (and a message) if not one. */
static int set_int(json_t *rule, const char *key, const char *flag,
                   const char *v)
{
    char *end;
    long long n = strtoll(v, &end, 10);

    if (!*v || *end) {
        fprintf(stderr, "rlctl put: --%s: \"%.40s\" is not a whole number\n",
                flag, v);
        return -1;
    }
    json_object_set_new(rule, key, json_integer(n));
    return 0;
}

static void set_match(json_t *rule, const char *key, const char *v)
{
    json_t *m = json_object_get(rule, "match");

    if (!m)
        json_object_set_new(rule, "match", m = json_object());
    json_object_set_new(m, key, json_string(v));
}

/* One more string in rule's array `key` (inside match when in_match). */
static void add_string(json_t *rule, int in_match, const char *key,
                       const char *v)
{
    json_t *o = rule, *a;

    if (in_match && !(o = json_object_get(rule, "match")))
        json_object_set_new(rule, "match", o = json_object());
    if (!(a = json_object_get(o, key)))
        json_object_set_new(o, key, a = json_array());
    json_array_append_new(a, json_string(v));
}

/* The flags into rule (or *file, if --file); -1 on a usage error. */
static int parse_flags(int argc, char **argv, json_t *rule,
                       const char **file, const char **if_match)
{
    static const struct option opts[] = {
        {"file", required_argument, NULL, 'f'},
        {"dimension", required_argument, NULL, 'd'},
        {"limit", required_argument, NULL, 'l'},
        {"window", required_argument, NULL, 'w'},
        {"burst", required_argument, NULL, 'b'},
        {"algorithm", required_argument, NULL, 'a'},
        {"endpoint", required_argument, NULL, 'e'},
        {"tier", required_argument, NULL, 't'},
        {"mode", required_argument, NULL, 'M'},
        {"failure-mode", required_argument, NULL, 'F'},
        {"if-match", required_argument, NULL, 'm'},
        {"value", required_argument, NULL, 'v'},
        {"replaces", required_argument, NULL, 'r'},
        {"unlimited", no_argument, NULL, 'u'},
        {NULL, 0, NULL, 0}};
    int c, bad = 0;

    while (!bad && (c = getopt_long(argc, argv, "f:d:l:w:b:a:e:t:M:F:m:v:r:u",
                                    opts, NULL)) != -1) {
        switch (c) {
        case 'f': *file = optarg; break;
        case 'd': json_object_set_new(rule, "dimension", json_string(optarg)); break;
        case 'l': bad = set_int(rule, "limit", "limit", optarg); break;
        case 'w': bad = set_int(rule, "window_seconds", "window", optarg); break;
        case 'b': bad = set_int(rule, "burst", "burst", optarg); break;
        case 'a': json_object_set_new(rule, "algorithm", json_string(optarg)); break;
        case 'e': set_match(rule, "endpoint", optarg); break;
        case 't': set_match(rule, "tier", optarg); break;
        case 'M': json_object_set_new(rule, "mode", json_string(optarg)); break;
        case 'F': json_object_set_new(rule, "failure_mode", json_string(optarg)); break;
        case 'm': *if_match = optarg; break;
        case 'v': add_string(rule, 1, "value", optarg); break;
        case 'r': add_string(rule, 0, "replaces", optarg); break;
        case 'u': json_object_set_new(rule, "unlimited", json_true()); break;
        default: bad = -1;
        }
    }
    return bad;
}

/* --unlimited on a rule with numbers drops them; --limit or --window on
 * an unlimited rule drops "unlimited": the flags say which it becomes. */
static void limits_over(json_t *cur, json_t *flags)
{
    static const char *const numbers[] = {"limit", "window_seconds",
                                          "burst", "algorithm",
                                          "failure_mode", "lease"};

    if (json_object_get(flags, "unlimited"))
        for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
            json_object_del(cur, numbers[i]);
    else if (json_object_get(flags, "limit") ||
             json_object_get(flags, "window_seconds"))
        json_object_del(cur, "unlimited");
}

/* The flags' rule laid over the rule the service holds (*rule replaced
 * by the merge), with the conditions that keep the read and the write
 * one change: If-Match on the version read (unless --if-match gave one),
 * If-None-Match: * when there was none.  RLCTL_DONE, or the exit code of
 * a read that failed (its reason on stderr). */
static int merge(const rlctl_opts *o, const char *path, const char *id,
                 json_t **rule, const char **if_match,
                 const char **if_none_match, char *etag, size_t len)
{
    rlctl_reply r;
    json_t *cur, *m, *v;
    const char *key;
    int rc = rlctl_http(o, "GET", path, NULL, NULL, NULL, &r);

    if (rc == RLCTL_DONE && r.status == 404) {
        rlctl_reply_free(&r);
        if (!*if_match)
            *if_none_match = "*";
        return RLCTL_DONE;
    }
    if (rc != RLCTL_DONE || r.status != 200) {
        rc = rlctl_status_exit(&r, id);
        rlctl_reply_free(&r);
        return rc == RLCTL_DONE ? RLCTL_REFUSED : rc;
    }
    cur = json_loads(r.body, 0, NULL);
    snprintf(etag, len, "%s", r.etag);
    rlctl_reply_free(&r);
    if (!json_is_object(cur)) {
        json_decref(cur);
        fprintf(stderr, "rlctl: %s: the service answered no rule\n", id);
        return RLCTL_UNREACHABLE;
    }
    json_object_del(cur, "version");
    json_object_del(cur, "updated_at");
    limits_over(cur, *rule);
    json_object_foreach(*rule, key, v) {
        if (strcmp(key, "match") == 0 &&
            json_is_object(m = json_object_get(cur, "match")))
            json_object_update(m, v);
        else
            json_object_set(cur, key, v);
    }
    json_decref(*rule);
    *rule = cur;
    if (!*if_match && etag[0])
        *if_match = etag;
    return RLCTL_DONE;
}

int rlctl_cmd_put(const rlctl_opts *o, int argc, char **argv)
{
    const char *file = NULL, *if_match = NULL, *if_none_match = NULL, *id;
    json_t *rule = json_object();
    char path[128], etag[80], etag_read[80], *body = NULL;
    rlctl_reply r;
    int rc;

    if (parse_flags(argc, argv, rule, &file, &if_match) ||
        optind != argc - 1 || (file && json_object_size(rule))) {
        json_decref(rule);
        fputs(put_usage, stderr);
        return RLCTL_USAGE;
    }
    id = argv[optind];
    snprintf(path, sizeof path, "/v1/rules/%s", id);
    if (rule_id_check(id)) {
        json_decref(rule);
        fprintf(stderr, "rlctl: \"%.80s\" is not a rule id (1..%d bytes of "
                "A-Z a-z 0-9 . _ : -)\n", id, RL_RULE_ID_MAX);
        return RLCTL_USAGE;
    }
    if (file) {
        body = slurp(file);
    } else {
        json_object_set_new(rule, "rule_id", json_string(id));
        if ((rc = merge(o, path, id, &rule, &if_match, &if_none_match,
                        etag_read, sizeof etag_read)) != RLCTL_DONE) {
            json_decref(rule);
            return rc;
        }
        body = json_dumps(rule, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(rule);
    if (!body)
        return RLCTL_USAGE;
    rc = rlctl_request(o, "PUT", path, body,
                       rlctl_etag(if_match, etag, sizeof etag), if_none_match,
                       id, &r);
    free(body);
    if (rc == RLCTL_DONE) {
        fputs(r.body, stdout);
        if (r.len && r.body[r.len - 1] != '\n')
            fputc('\n', stdout);
    }
    rlctl_reply_free(&r);
    return rc;
}
