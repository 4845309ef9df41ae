/*
 * cmd_rules.c -- the rlctl commands that read and write the rule set
 * through ratelimitd: list, get, put, delete, history and mode.  Each one
 * is a request (or, for mode, a read and a conditional write) and a
 * printout; rule ids are checked with the library's own rule-id check
 * before anything is sent, and bodies are built in the canonical form the
 * library reads (ratelimit(3)).
 */
#include "rlctl.h"
#include "rule.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "/v1/rules/<id>[suffix]", or -1 (and a message) for a bad id. */
static int rule_path(const char *id, const char *suffix, char *out,
                     size_t len)
{
    if (rule_id_check(id)) {
        fprintf(stderr, "rlctl: \"%.80s\" is not a rule id (1..%d bytes of "
                "A-Z a-z 0-9 . _ : -)\n", id, RL_RULE_ID_MAX);
        return -1;
    }
    snprintf(out, len, "/v1/rules/%s%s", id, suffix);
    return 0;
}

/* Print a JSON answer: as is with --json, else indented. */
static void print_json(const rlctl_opts *o, const rlctl_reply *r)
{
    json_t *doc = o->json ? NULL : json_loads(r->body, 0, NULL);

    if (doc) {
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(doc);
    } else {
        fputs(r->body, stdout);
        if (r->len && r->body[r->len - 1] != '\n')
            fputc('\n', stdout);
    }
}

/* One request whose answer is printed as JSON on success. */
static int simple(const rlctl_opts *o, const char *method, const char *path,
                  const char *body, const char *if_match, const char *what)
{
    rlctl_reply r;
    int rc = rlctl_request(o, method, path, body, if_match, NULL, what, &r);

    if (rc == RLCTL_DONE)
        print_json(o, &r);
    rlctl_reply_free(&r);
    return rc;
}

/* Flags for a command that takes none: any is a usage error. */
static int no_flags(int argc, char **argv)
{
    static const struct option none[] = {{NULL, 0, NULL, 0}};

    return getopt_long(argc, argv, "", none, NULL) == -1 ? 0 : -1;
}

/* The single positional argument of a command without flags. */
static const char *one_arg(int argc, char **argv, const char *name)
{
    if (no_flags(argc, argv) || optind != argc - 1) {
        fprintf(stderr, "rlctl %s: needs %s\n", argv[0], name);
        return NULL;
    }
    return argv[optind];
}

int rlctl_cmd_get(const rlctl_opts *o, int argc, char **argv)
{
    char path[128];
    const char *id = one_arg(argc, argv, "a rule id");

    if (!id || rule_path(id, "", path, sizeof path))
        return RLCTL_USAGE;
    return simple(o, "GET", path, NULL, NULL, id);
}

int rlctl_cmd_history(const rlctl_opts *o, int argc, char **argv)
{
    char path[128];
    const char *id = one_arg(argc, argv, "a rule id");

    if (!id || rule_path(id, "/history", path, sizeof path))
        return RLCTL_USAGE;
    return simple(o, "GET", path, NULL, NULL, id);
}

int rlctl_cmd_delete(const rlctl_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"if-match", required_argument, NULL, 'm'}, {NULL, 0, NULL, 0}};
    const char *if_match = NULL, *id;
    char path[128], etag[80];
    int c;

    while ((c = getopt_long(argc, argv, "m:", opts, NULL)) != -1) {
        if (c != 'm')
            return RLCTL_USAGE;
        if_match = optarg;
    }
    if (optind != argc - 1 || !(id = argv[optind]) ||
        rule_path(id, "", path, sizeof path))
        return RLCTL_USAGE;
    return simple(o, "DELETE", path, NULL,
                  rlctl_etag(if_match, etag, sizeof etag), id);
}

/* A one-line summary of a canonical rule. */
static void rule_line(json_t *rule)
{
    json_t *m = json_object_get(rule, "match");
    const char *ep = json_string_value(json_object_get(m, "endpoint"));
    const char *tier = json_string_value(json_object_get(m, "tier"));
    json_t *burst = json_object_get(rule, "burst");
    int unlimited = json_is_true(json_object_get(rule, "unlimited"));
    char rate[48];

    if (unlimited) /* no numbers, algorithm or failure mode: "-" */
        snprintf(rate, sizeof rate, "unlimited");
    else
        snprintf(rate, sizeof rate, "%lld/%llds",
             (long long)json_integer_value(json_object_get(rule, "limit")),
             (long long)json_integer_value(
                 json_object_get(rule, "window_seconds")));
    const char *col[] = {
        json_string_value(json_object_get(rule, "rule_id")),
        json_string_value(json_object_get(rule, "dimension")),
        ep ? ep : "*", tier ? tier : "*", rate,
        json_string_value(json_object_get(rule, "algorithm")),
        json_string_value(json_object_get(rule, "mode")),
        json_string_value(json_object_get(rule, "failure_mode"))};
    static const int width[] = {24, 8, 16, 8, 14, 14, 7, 8};

    /* what the service sent is printed without its control bytes */
    for (size_t i = 0; i < sizeof col / sizeof col[0]; i++) {
        int n = col[i] ? (int)strlen(col[i]) : unlimited ? 1 : 6;
        if (i)
            putchar(' ');
        rlctl_put_clean(stdout, col[i] ? col[i] : unlimited ? "-" : "(null)");
        printf("%*s", n < width[i] ? width[i] - n : 0, "");
    }
    printf(" v%lld",
           (long long)json_integer_value(json_object_get(rule, "version")));
    if (burst)
        printf(" burst %lld", (long long)json_integer_value(burst));
    putchar('\n');
}

int rlctl_cmd_list(const rlctl_opts *o, int argc, char **argv)
{
    rlctl_reply r;
    json_t *doc, *rules, *rule;
    size_t i;
    int rc;

    if (no_flags(argc, argv) || optind != argc)
        return fprintf(stderr, "rlctl list: takes no argument\n"),
               RLCTL_USAGE;
    if ((rc = rlctl_request(o, "GET", "/v1/rules", NULL, NULL, NULL, "list",
                            &r))) {
        rlctl_reply_free(&r);
        return rc;
    }
    doc = o->json ? NULL : json_loads(r.body, 0, NULL);
    rules = json_object_get(doc, "rules");
    if (!json_is_array(rules)) {
        print_json(o, &r);
    } else {
        printf("rule set version %lld, %zu rule%s\n",
               (long long)json_integer_value(json_object_get(doc, "version")),
               json_array_size(rules), json_array_size(rules) == 1 ? "" : "s");
        json_array_foreach(rules, i, rule)
            rule_line(rule);
    }
    json_decref(doc);
    rlctl_reply_free(&r);
    return RLCTL_DONE;
}

int rlctl_cmd_mode(const rlctl_opts *o, int argc, char **argv)
{
    char path[128], what[128];
    rlctl_reply r;
    json_t *rule;
    char *body;
    int rc;

    if (no_flags(argc, argv) || optind != argc - 2 || (strcmp(argv[optind + 1], "log") != 0 &&
                               strcmp(argv[optind + 1], "enforce") != 0))
        return fprintf(stderr, "rlctl mode: needs a rule id and log or "
                       "enforce\n"), RLCTL_USAGE;
    if (rule_path(argv[optind], "", path, sizeof path))
        return RLCTL_USAGE;
    snprintf(what, sizeof what, "%s", argv[optind]);
    if ((rc = rlctl_request(o, "GET", path, NULL, NULL, NULL, what, &r))) {
        rlctl_reply_free(&r);
        return rc;
    }
    rule = json_loads(r.body, 0, NULL);
    if (!json_is_object(rule)) {
        json_decref(rule);
        rlctl_reply_free(&r);
        return fprintf(stderr, "rlctl: %s: the service answered no rule\n",
                       what), RLCTL_UNREACHABLE;
    }
    json_object_set_new(rule, "mode", json_string(argv[optind + 1]));
    json_object_del(rule, "version");
    json_object_del(rule, "updated_at");
    body = json_dumps(rule, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(rule);
    /* Only if nobody changed it since we read it. */
    rc = body ? simple(o, "PUT", path, body, r.etag[0] ? r.etag : NULL, what)
              : RLCTL_UNREACHABLE;
    free(body);
    rlctl_reply_free(&r);
    return rc;
}
