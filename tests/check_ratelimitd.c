/*
 * check_ratelimitd.c -- ratelimitd's API end to end: the real binary on a
 * free loopback port with a real SQLite file (tests/rld_harness.c), HTTP
 * through libcurl or raw bytes.
 *
 * What it holds the service to: the API of contracts.md section 5 with the
 * library's canonical JSON in every answer; ETag / If-Match /
 * If-None-Match; 400 naming the field for every kind of bad body,
 * 401/403/405/413/415, and path tricks refused; the database files byte for
 * byte unchanged by all of those.  Publishing and crashes:
 * check_ratelimitd_durable.c.
 */
#include <check.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rld_check.h"
#include "testutil.h"

/* ---- the database files, byte for byte -------------------------------------------- */

typedef struct files {
    char *db, *wal;
    size_t db_len, wal_len;
} files;

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    *len = 0;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

static files files_read(const rld *d)
{
    char wal[320];
    files f;

    snprintf(wal, sizeof wal, "%s-wal", d->db);
    f.db = slurp(d->db, &f.db_len);
    f.wal = slurp(wal, &f.wal_len);
    ck_assert_ptr_nonnull(f.db);
    return f;
}

static void assert_files_same(files *a, files *b)
{
    ck_assert_uint_eq(a->db_len, b->db_len);
    ck_assert_int_eq(memcmp(a->db, b->db, a->db_len), 0);
    ck_assert_uint_eq(a->wal_len, b->wal_len);
    ck_assert(a->wal_len == 0 || memcmp(a->wal, b->wal, a->wal_len) == 0);
    free(a->db);
    free(a->wal);
    free(b->db);
    free(b->wal);
}

/* ---- the API ----------------------------------------------------------------------- */

/* PUT that must succeed with ETag "<version>": the answer's body. */
static char *put_ok(const rld *d, const char *id, const char *body,
                    const char *token, long long version)
{
    char etag[32];
    rld_resp r;
    char *text;

    ck_assert_int_eq(put(d, id, body, token, NULL, &r), 200);
    snprintf(etag, sizeof etag, "\"%lld\"", version);
    ck_assert_str_eq(r.etag, etag);
    assert_canonical_rule(r.body, NULL);
    text = strdup(r.body);
    rld_resp_free(&r);
    return text;
}

static void delete_ok(const rld *d, const char *id, const char *token,
                      long long version)
{
    char path[128];
    rld_resp r;
    json_t *j;

    snprintf(path, sizeof path, "/v1/rules/%s", id);
    ck_assert_int_eq(rld_http(d, "DELETE", path, token, NULL, NULL, 0, &r),
                     200);
    j = parse(r.body);
    ck_assert_int_eq(int_of(j, "version"), version);
    ck_assert_str_eq(str_of(j, "deleted"), id);
    json_decref(j);
    rld_resp_free(&r);
}

START_TEST(put_get_list_delete)
{
    rld d = {0};
    rld_resp r;
    rl_rule rule;
    rl_ruleset *rs;
    json_t *j;
    char *first;

    start(&d, NULL);
    first = put_ok(&d, "search", rule_body, ALICE, 1);
    assert_canonical_rule(first, &rule);
    ck_assert_str_eq(rule.id, "search");
    ck_assert_int_eq(rule.version, 1);
    ck_assert_int_eq(rule.ap.burst, 20);
    ck_assert_int_eq(rule.window_s, 60);
    ck_assert_int_eq(rule.mode, RL_MODE_LOG);
    ck_assert_int_eq(rule.failure, RL_FAIL_OPEN);
    ck_assert_int_eq((int)strlen(rule.updated_at), 20); /* ...T..:..:..Z */
    rule_clear(&rule);

    /* GET gives what PUT answered. */
    ck_assert_int_eq(get(&d, "/v1/rules/search", NULL, NULL, &r), 200);
    ck_assert_str_eq(r.body, first);
    ck_assert_str_eq(r.etag, "\"1\"");
    ck_assert_str_eq(r.content_type, "application/json");
    rld_resp_free(&r);

    /* A second rule, snake_case this time, by the other operator. */
    free(put_ok(&d, "login", "{\"rule_id\":\"login\",\"dimension\":\"ip\","
                "\"limit\":5,\"window_seconds\":300}", BOB, 2));
    rs = list(&d);
    ck_assert_int_eq(rs->version, 2);
    ck_assert_uint_eq(rs->n, 2);
    ck_assert_str_eq(rs->rules[0].id, "login"); /* by id */
    ck_assert_int_eq(ruleset_find(rs, "search")->version, 1);
    ck_assert_int_eq(ruleset_find(rs, "login")->version, 2);
    ruleset_free(rs);

    delete_ok(&d, "search", BOB, 3);
    ck_assert_int_eq(get(&d, "/v1/rules/search", NULL, NULL, &r), 404);
    assert_error(&r, 404, "not_found", NULL);
    rld_resp_free(&r);
    ck_assert_int_eq(rld_http(&d, "DELETE", "/v1/rules/search", BOB, NULL,
                              NULL, 0, &r), 404);
    rld_resp_free(&r);
    rs = list(&d);
    ck_assert_int_eq(rs->version, 3);
    ck_assert_uint_eq(rs->n, 1);
    ruleset_free(rs);

    /* HEAD and /healthz. */
    ck_assert_int_eq(rld_http(&d, "HEAD", "/v1/rules", NULL, NULL, NULL, 0,
                              &r), 200);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_str_eq(r.etag, "\"3\"");
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/healthz", NULL, NULL, &r), 200);
    j = parse(r.body);
    ck_assert(json_is_true(json_object_get(j, "ok")));
    ck_assert_int_eq(int_of(j, "version"), 3);
    ck_assert_str_eq(str_of(j, "redis"), "off");
    json_decref(j);
    rld_resp_free(&r);
    free(first);
    finish(&d);
}
END_TEST

/* The set served after many changes (each made from the last) is, byte
 * for byte, the one the service makes from the database at its next
 * start, and the library's canonical form of it. */
START_TEST(the_set_served_is_the_set_stored)
{
    rld d = {0};
    rld_resp r;
    char id[16], body[128], *before;
    unsigned x = 12345;
    int version = 0;

    start(&d, NULL);
    for (int i = 0; i < 80; i++) {
        x = x * 1103515245u + 12345u;
        snprintf(id, sizeof id, "k%u", (x >> 8) % 12);
        if ((x >> 20) % 4 == 0) {
            snprintf(body, sizeof body, "/v1/rules/%s", id);
            if (rld_http(&d, "DELETE", body, BOB, NULL, NULL, 0, &r) == 200)
                version++;
            else
                ck_assert_int_eq(r.status, 404);
            rld_resp_free(&r);
            continue;
        }
        snprintf(body, sizeof body, "{\"dimension\":\"user\",\"limit\":%u,"
                 "\"window_seconds\":%u}", 1 + x % 1000, 1 + (x >> 4) % 600);
        free(put_ok(&d, id, body, ALICE, ++version));
        rl_ruleset *rs = list(&d); /* canonical, parsed by the library */
        ck_assert_int_eq(rs->version, version);
        ruleset_free(rs);
    }
    ck_assert_int_eq(get(&d, "/v1/rules", NULL, NULL, &r), 200);
    before = strdup(r.body);
    rld_resp_free(&r);
    ck_assert_int_eq(rld_stop(&d), 0);
    start(&d, NULL);
    ck_assert_int_eq(get(&d, "/v1/rules", NULL, NULL, &r), 200);
    /* the same set and version; the generation is the start's own */
    ck_assert_ptr_nonnull(strstr(before, ",\"rules\":"));
    ck_assert_ptr_nonnull(strstr(r.body, ",\"rules\":"));
    ck_assert_str_eq(strstr(r.body, ",\"rules\":"),
                     strstr(before, ",\"rules\":"));
    ck_assert_int_eq(strncmp(r.body, before, 30), 0);
    ck_assert_str_ne(r.body, before);
    rld_resp_free(&r);
    free(before);
    finish(&d);
}
END_TEST

/* One history entry: version, op, by, and the rule written (NULL: none). */
static void assert_entry(json_t *e, long long version, const char *op,
                         const char *by, const char *rule)
{
    json_t *written = json_object_get(e, "rule");
    char *text;

    ck_assert_int_eq(int_of(e, "version"), version);
    ck_assert_str_eq(str_of(e, "op"), op);
    ck_assert_str_eq(str_of(e, "by"), by);
    ck_assert_int_eq((int)strlen(str_of(e, "at")), 20); /* RFC 3339, Z */
    if (!rule) {
        ck_assert(json_is_null(written));
        return;
    }
    text = json_dumps(written, RULE_JSON_DUMP_FLAGS);
    ck_assert_uint_eq(strlen(text) + 1, strlen(rule)); /* rule ends "\n" */
    ck_assert_int_eq(strncmp(text, rule, strlen(text)), 0);
    free(text);
}

START_TEST(history_says_what_when_and_who)
{
    rld d = {0};
    rld_resp r;
    json_t *j, *h;
    char *v1, *v2;

    start(&d, NULL);
    v1 = put_ok(&d, "search", rule_body, ALICE, 1);
    free(put_ok(&d, "other", OKBODY, ALICE, 2));
    v2 = put_ok(&d, "search", OKBODY, BOB, 3);
    delete_ok(&d, "search", BOB, 4);

    /* Every version of the rule, oldest first, even after its delete. */
    ck_assert_int_eq(get(&d, "/v1/rules/search/history", NULL, NULL, &r),
                     200);
    j = parse(r.body);
    ck_assert_str_eq(str_of(j, "rule_id"), "search");
    h = json_object_get(j, "history");
    ck_assert_uint_eq(json_array_size(h), 3);
    assert_entry(json_array_get(h, 0), 1, "put", RLD_ALICE, v1);
    assert_entry(json_array_get(h, 1), 3, "put", RLD_BOB, v2);
    assert_entry(json_array_get(h, 2), 4, "delete", RLD_BOB, NULL);
    json_decref(j);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/never/history", NULL, NULL, &r),
                     404);
    assert_error(&r, 404, "not_found", NULL);
    rld_resp_free(&r);
    free(v1);
    free(v2);
    finish(&d);
}
END_TEST

START_TEST(a_get_rule_put_back_unchanged_is_accepted)
{
    rld d = {0};
    rld_resp r;
    char *body;

    start(&d, NULL);
    ck_assert_int_eq(put(&d, "r1", rule_body, ALICE, NULL, &r), 200);
    body = strdup(r.body); /* holds version and updated_at */
    rld_resp_free(&r);
    ck_assert_int_eq(put(&d, "r1", body, ALICE, NULL, &r), 200);
    ck_assert_str_eq(r.etag, "\"2\""); /* the server's, not the body's */
    rld_resp_free(&r);
    free(body);
    finish(&d);
}
END_TEST

/* One request with at most one extra header: its status and ETag ("" for
 * none expected) must be these. */
static void expect(const rld *d, const char *method, const char *path,
                   const char *header, const char *body, long status,
                   const char *etag)
{
    const char *hdrs[] = {header, NULL};
    rld_resp r;
    long st = rld_http(d, method, path, strcmp(method, "GET") ? ALICE : NULL,
                       hdrs, body, body ? strlen(body) : 0, &r);

    ck_assert_msg(st == status, "%s %s (%s): %ld, wanted %ld: %s", method,
                  path, header ? header : "", st, status, r.body);
    if (status == 412)
        assert_error(&r, 412, "precondition_failed", NULL);
    if (etag)
        ck_assert_str_eq(r.etag, etag);
    if (status == 304)
        ck_assert_uint_eq(r.len, 0);
    rld_resp_free(&r);
}

#define LIMIT7 "{\"dimension\":\"ip\",\"limit\":7,\"window_seconds\":1}"

/* A rule counts by any dimension name of the library's grammar: the
 * service takes what the library's parser takes, and writes it back. */
START_TEST(named_dimensions_accepted)
{
    rld d = {0};
    char *text;

    start(&d, NULL);
    text = put_ok(&d, "tenants", "{\"dimension\":\"tenant\",\"limit\":5,"
                  "\"window_seconds\":60}", ALICE, 1);
    ck_assert_ptr_nonnull(strstr(text, "\"dimension\":\"tenant\""));
    free(text);
    text = put_ok(&d, "versions", "{\"dimension\":\"header:x-api-version\","
                  "\"limit\":5,\"window_seconds\":60}", ALICE, 2);
    ck_assert_ptr_nonnull(strstr(text, "\"header:x-api-version\""));
    free(text);
    ck_assert_int_eq(rld_stop(&d), 0);
}
END_TEST

START_TEST(conditional_writes)
{
    rld d = {0};
    rld_resp r;
    rl_rule rule;
    json_t *j;

    start(&d, NULL);
    free(put_ok(&d, "r1", rule_body, ALICE, 1));
    /* The tag held is current: the write goes through. */
    expect(&d, "PUT", "/v1/rules/r1", "If-Match: \"1\"", LIMIT7, 200, "\"2\"");
    /* A second operator with the same stale tag: 412, nothing changes. */
    expect(&d, "PUT", "/v1/rules/r1", "If-Match: \"1\"", rule_body, 412, NULL);
    expect(&d, "DELETE", "/v1/rules/r1", "If-Match: \"1\"", NULL, 412, NULL);
    /* If-Match compares strongly; If-None-Match: * creates only. */
    expect(&d, "PUT", "/v1/rules/r1", "If-Match: W/\"2\"", rule_body, 412,
           NULL);
    expect(&d, "PUT", "/v1/rules/r1", "If-None-Match: *", rule_body, 412, NULL);
    ck_assert_int_eq(get(&d, "/v1/rules/r1", NULL, NULL, &r), 200);
    assert_canonical_rule(r.body, &rule);
    ck_assert_int_eq(rule.version, 2);
    ck_assert_int_eq(rule.ap.limit, 7);
    rule_clear(&rule);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/r1/history", NULL, NULL, &r), 200);
    j = parse(r.body);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "history")), 2);
    json_decref(j);
    rld_resp_free(&r);

    /* A list naming the current tag; "*" (any current rule); a tag, or
     * "*", for a rule that is not there; create-only; a conditional
     * delete. */
    expect(&d, "PUT", "/v1/rules/r1", "If-Match: \"7\", \"2\"", LIMIT7, 200,
           "\"3\"");
    expect(&d, "PUT", "/v1/rules/r1", "If-Match: *", LIMIT7, 200, "\"4\"");
    expect(&d, "PUT", "/v1/rules/r2", "If-Match: \"9\"", LIMIT7, 412, NULL);
    /* "*" asks for a current rule: there is none (RFC 9110 13.1.1) */
    expect(&d, "PUT", "/v1/rules/r2", "If-Match: *", LIMIT7, 412, NULL);
    expect(&d, "DELETE", "/v1/rules/r2", "If-Match: *", NULL, 404, NULL);
    expect(&d, "GET", "/v1/rules/r2", NULL, NULL, 404, NULL);
    expect(&d, "PUT", "/v1/rules/r2", "If-None-Match: *", LIMIT7, 200, "\"5\"");
    expect(&d, "DELETE", "/v1/rules/r2", "If-Match: \"5\"", NULL, 200, NULL);
    finish(&d);
}
END_TEST

START_TEST(conditional_reads)
{
    rld d = {0};

    start(&d, NULL);
    free(put_ok(&d, "r1", rule_body, ALICE, 1));
    free(put_ok(&d, "r2", LIMIT7, ALICE, 2));
    /* The rule's tag is its version, the set's the set's. */
    expect(&d, "GET", "/v1/rules/r1", "If-None-Match: \"1\"", NULL, 304,
           "\"1\"");
    expect(&d, "GET", "/v1/rules/r1", "If-None-Match: W/\"1\"", NULL, 304,
           "\"1\"");
    expect(&d, "GET", "/v1/rules/r1", "If-None-Match: \"2\"", NULL, 200,
           "\"1\"");
    expect(&d, "GET", "/v1/rules/r1", "If-None-Match: *", NULL, 304, "\"1\"");
    expect(&d, "GET", "/v1/rules", "If-None-Match: \"2\"", NULL, 304, "\"2\"");
    expect(&d, "GET", "/v1/rules", "If-None-Match: \"1\"", NULL, 200, "\"2\"");
    free(put_ok(&d, "r1", LIMIT7, ALICE, 3));
    expect(&d, "GET", "/v1/rules/r1", "If-None-Match: \"1\"", NULL, 200,
           "\"3\"");
    expect(&d, "GET", "/v1/rules", "If-None-Match: \"2\"", NULL, 200, "\"3\"");
    finish(&d);
}
END_TEST

/* ---- refusals: each its status, none of them a change ----------------------------- */

typedef struct refusal {
    const char *method, *path, *token;
    const char *headers[3];
    const char *body;           /* NULL: no body */
    long status;
    const char *error, *field;  /* error code; field named, or NULL */
} refusal;

#define ID "/v1/rules/r1"

static const refusal bad_bodies[] = {
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"window_seconds\":1}",
     400, "invalid_rule", "limit"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":0,"
     "\"window_seconds\":1}", 400, "invalid_rule", "limit"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":5,"
     "\"window_seconds\":1,\"colour\":\"red\"}", 400, "invalid_rule",
     "colour"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":5,"
     "\"window_seconds\":\"60\"}", 400, "invalid_rule", "window_seconds"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":5,"
     "\"window_seconds\":60,\"windowSeconds\":60}", 400, "invalid_rule",
     "window_seconds"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":5,"
     "\"window_seconds\":60,\"match\":{\"tier\":7}}", 400, "invalid_rule",
     "match.tier"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":5,"
     "\"window_seconds\":60,\"match\":{\"tier\":\"pro\\u001b[2J\"}}", 400,
     "invalid_rule", "match.tier"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":5,"
     "\"window_seconds\":60,\"match\":{\"endpoint\":\"api/x\"}}", 400,
     "invalid_rule", "match.endpoint"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"Planet\",\"limit\":5,"
     "\"window_seconds\":60}", 400, "invalid_rule", "dimension"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":5,"
     "\"window_seconds\":60,\"burst\":3}", 400, "invalid_rule", "burst"},
    {"PUT", ID, ALICE, {0}, "{\"rule_id\":\"r2\",\"dimension\":\"ip\","
     "\"limit\":5,\"window_seconds\":60}", 400, "invalid_rule", "rule_id"},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"limit\":5,"
     "\"window_seconds\":60,\"version\":\"new\"}", 400, "invalid_rule",
     "version"},
    {"PUT", ID, ALICE, {0}, "[" OKBODY "]", 400, "invalid_rule", NULL},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",", 400, "bad_json", NULL},
    {"PUT", ID, ALICE, {0}, "limit=5", 400, "bad_json", NULL},
    {"PUT", ID, ALICE, {0}, "", 400, "bad_json", NULL},
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"ip\",\"dimension\":\"ip\","
     "\"limit\":5,\"window_seconds\":1}", 400, "bad_json", NULL},
};

static const refusal bad_requests[] = {
    /* tokens */
    {"PUT", ID, NULL, {0}, OKBODY, 401, "unauthorized", NULL},
    {"PUT", ID, "not-a-token-of-this-service", {0}, OKBODY, 403,
     "forbidden", NULL},
    {"PUT", ID, NULL, {"Authorization: Basic YWxpY2U6eA==", 0}, OKBODY, 401,
     "unauthorized", NULL},
    {"DELETE", ID, NULL, {0}, NULL, 401, "unauthorized", NULL},
    {"DELETE", ID, ALICE "x", {0}, NULL, 403, "forbidden", NULL},
    /* media type, methods, paths */
    {"PUT", ID, ALICE, {"Content-Type: text/plain", 0}, OKBODY, 415,
     "unsupported_media_type", NULL},
    {"PUT", ID, ALICE, {"Content-Type: application/jsonx", 0}, OKBODY, 415,
     "unsupported_media_type", NULL},
    {"POST", ID, ALICE, {0}, OKBODY, 405, "method_not_allowed", NULL},
    {"PUT", "/v1/rules", ALICE, {0}, OKBODY, 405, "method_not_allowed", NULL},
    {"DELETE", ID "/history", ALICE, {0}, NULL, 405, "method_not_allowed",
     NULL},
    {"PATCH", ID, ALICE, {0}, OKBODY, 405, "method_not_allowed", NULL},
    {"PUT", "/v1/rule/r1", ALICE, {0}, OKBODY, 404, "not_found", NULL},
    {"PUT", ID "/x", ALICE, {0}, OKBODY, 404, "not_found", NULL},
    {"PUT", "/v1/rules/", ALICE, {0}, OKBODY, 400, "bad_rule_id", "rule_id"},
    {"PUT", "/v1/rules/..", ALICE, {0}, OKBODY, 400, "bad_rule_id",
     "rule_id"},
    {"PUT", "/v1/rules/.", ALICE, {0}, OKBODY, 400, "bad_rule_id", "rule_id"},
    {"PUT", "/v1/rules/%2F", ALICE, {0}, OKBODY, 400, "bad_rule_id",
     "rule_id"},
    {"PUT", "/v1/rules/r1%2F..%2Fr2", ALICE, {0}, OKBODY, 400, "bad_rule_id",
     "rule_id"},
    {"PUT", "/v1/rules/%2e%2e", ALICE, {0}, OKBODY, 400, "bad_rule_id",
     "rule_id"},
    {"PUT", "/v1/rules/%72%31", ALICE, {0}, OKBODY, 400, "bad_rule_id",
     "rule_id"},
    {"PUT", "/v1/rules/../rules/r1", ALICE, {0}, OKBODY, 400, "bad_rule_id",
     "rule_id"},
    {"PUT", "/v1/rules/r1/../r2", ALICE, {0}, OKBODY, 404, "not_found", NULL},
    {"PUT", "/v1/rules/caf%C3%A9", ALICE, {0}, OKBODY, 400, "bad_rule_id",
     "rule_id"},
    {"PUT", "/v1/rules/a+b", ALICE, {0}, OKBODY, 400, "bad_rule_id",
     "rule_id"},
    {"PUT", "/v1/rules/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaa", ALICE, {0}, OKBODY, 400, "bad_rule_id", "rule_id"},
    {"GET", "/v1/rules/%2e%2e/history", NULL, {0}, NULL, 400, "bad_rule_id",
     "rule_id"},
    {"GET", "/v1/%72ules/r1", NULL, {0}, NULL, 404, "not_found", NULL},
    /* stale tags */
    {"PUT", ID, ALICE, {"If-Match: \"0\"", 0}, OKBODY, 412,
     "precondition_failed", NULL},
    {"DELETE", ID, ALICE, {"If-Match: \"2\"", 0}, NULL, 412,
     "precondition_failed", NULL},
    {"PUT", "/v1/rules/new", ALICE, {"If-Match: \"1\"", 0}, OKBODY, 412,
     "precondition_failed", NULL},
    {"PUT", ID, ALICE, {"If-None-Match: *", 0}, OKBODY, 412,
     "precondition_failed", NULL},
};

static void run_refusals(const rld *d, const refusal *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        rld_resp r;
        long st = rld_http(d, t[i].method, t[i].path, t[i].token,
                           t[i].headers, t[i].body,
                           t[i].body ? strlen(t[i].body) : 0, &r);
        ck_assert_msg(st == t[i].status, "%s %s %s: %ld, wanted %ld: %s",
                      t[i].method, t[i].path, t[i].body ? t[i].body : "",
                      st, t[i].status, r.body);
        assert_error(&r, t[i].status, t[i].error, t[i].field);
        if (st == 401)
            ck_assert_str_eq(r.www_auth, "Bearer realm=\"ratelimitd\"");
        if (st == 405)
            ck_assert_ptr_nonnull(strstr(r.allow, "GET"));
        rld_resp_free(&r);
    }
}

/* A server holding r1 at version 1; the files as they are then. */
static files start_with_r1(rld *d, const char *const *args)
{
    rld_resp r;

    start(d, args);
    ck_assert_int_eq(put(d, "r1", OKBODY, ALICE, NULL, &r), 200);
    rld_resp_free(&r);
    return files_read(d);
}

static void assert_nothing_changed(rld *d, files *before)
{
    files after = files_read(d);
    rl_ruleset *rs = list(d);

    ck_assert_int_eq(rs->version, 1);
    ck_assert_uint_eq(rs->n, 1);
    ck_assert_int_eq(rs->rules[0].ap.limit, 5);
    ruleset_free(rs);
    assert_files_same(before, &after);
}

START_TEST(bad_bodies_get_400_naming_the_field)
{
    rld d = {0};
    files before = start_with_r1(&d, NULL);

    run_refusals(&d, bad_bodies, sizeof bad_bodies / sizeof bad_bodies[0]);
    assert_nothing_changed(&d, &before);
    finish(&d);
}
END_TEST

START_TEST(bad_requests_get_their_status)
{
    rld d = {0};
    files before = start_with_r1(&d, NULL);

    run_refusals(&d, bad_requests,
                 sizeof bad_requests / sizeof bad_requests[0]);
    assert_nothing_changed(&d, &before);
    finish(&d);
}
END_TEST

/* Bodies over the cap: declared (answered before the body) and chunked
 * (dropped as it comes); both 413, nothing stored. */
START_TEST(oversize_bodies_get_413)
{
    const char *args[] = {"--max-body", "2048", NULL};
    const char *chunked[] = {"Transfer-Encoding: chunked", NULL};
    rld d = {0};
    files before = start_with_r1(&d, args);
    size_t n = 4096;
    char *big = malloc(n + 1);
    rld_resp r;

    memset(big, ' ', n);
    memcpy(big, OKBODY, strlen(OKBODY)); /* valid JSON, then spaces */
    big[n] = '\0';
    ck_assert_int_eq(put(&d, "r1", big, ALICE, NULL, &r), 413);
    assert_error(&r, 413, "payload_too_large", NULL);
    rld_resp_free(&r);
    ck_assert_int_eq(put(&d, "r1", big, ALICE, chunked, &r), 413);
    assert_error(&r, 413, "payload_too_large", NULL);
    rld_resp_free(&r);
    assert_nothing_changed(&d, &before);
    big[2048] = '\0'; /* at the cap: fine */
    ck_assert_int_eq(put(&d, "r2", big, ALICE, NULL, &r), 200);
    rld_resp_free(&r);
    ck_assert_int_eq(put(&d, "r2", big, ALICE, chunked, &r), 200);
    rld_resp_free(&r);
    free(big);
    finish(&d);
}
END_TEST

/* Raw requests: bytes a client library would escape or refuse to send. */
START_TEST(raw_path_tricks)
{
    static const struct {
        const char *path;
        int status;
    } paths[] = {
        {"/v1/rules/caf\xc3\xa9", 400},  {"/v1/rules/a\x01z", 400},
        {"/v1/rules/r1%00", 400},        {"/v1/rules/%00", 400},
        {"/v1/rules/r1#x", 400},         {"/v1/rules/r1;x", 400},
        {"/v1/rules/..%2F..%2Fetc", 400}, {"/v1/rules/%252e%252e", 400},
        {"/v1/rules/.%2e", 400},
        {"//v1/rules/r1", 404},          {"/v1/rules//r1", 400},
        {"/v1/rules/r1/", 404},          {"/v1/rules/..;/r1", 400},
    };
    rld d = {0};
    files before = start_with_r1(&d, NULL);
    char req[1024];

    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        /* A GET of the path, then a PUT of a valid rule to it. */
        int n = snprintf(req, sizeof req,
                         "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                         "\r\n", paths[i].path);
        int st = rld_raw(&d, req, (size_t)n);
        ck_assert_msg(st == paths[i].status, "GET %s: %d", paths[i].path,
                      st);
        n = snprintf(req, sizeof req,
                     "PUT %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                     "Authorization: Bearer " ALICE "\r\n"
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s", paths[i].path,
                     strlen(OKBODY), OKBODY);
        st = rld_raw(&d, req, (size_t)n);
        ck_assert_msg(st == paths[i].status, "PUT %s: %d", paths[i].path,
                      st);
    }
    assert_nothing_changed(&d, &before);
    finish(&d);
}
END_TEST

START_TEST(reads_need_a_token_with_read_auth)
{
    const char *args[] = {"--read-auth", NULL};
    rld d = {0};
    rld_resp r;

    start(&d, args);
    ck_assert_int_eq(get(&d, "/v1/rules", NULL, NULL, &r), 401);
    assert_error(&r, 401, "unauthorized", NULL);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/x/history", "wrong-token-xxxxxxx",
                         NULL, &r), 403);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/x", BOB, NULL, &r), 404);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules", BOB, NULL, &r), 200);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/healthz", NULL, NULL, &r), 200);
    rld_resp_free(&r);
    finish(&d);
}
END_TEST

START_TEST(start_up_refusals)
{
    rld d = {0};
    char tokens[320], tail[2048], db[320];
    const char *no_tokens[] = {"--db", db, NULL};
    const char *open_tokens[] = {"--token-file", tokens, "--db", db, NULL};
    const char *bad_redis[] = {"--token-file", tokens, "--db", db,
                               "--redis", "http://x", NULL};
    const char *bad_flag[] = {"--token-file", tokens, "--max-body", "1",
                              NULL};

    start(&d, NULL); /* holds its database */
    snprintf(tokens, sizeof tokens, "%s/tokens", d.dir);
    snprintf(db, sizeof db, "%s", d.db);
    ck_assert_int_eq(rld_run(&d, no_tokens), 2);
    ck_assert_int_eq(rld_run(&d, bad_flag), 2);
    ck_assert_int_eq(rld_run(&d, bad_redis), 1);
    ck_assert_int_eq(rld_run(&d, open_tokens), 1); /* a second service */
    rld_log_tail(&d, tail, sizeof tail);
    ck_assert_msg(strstr(tail, "in use by another ratelimitd"), "%s", tail);
    ck_assert_int_eq(chmod(tokens, 0604), 0);
    snprintf(db, sizeof db, "%s/other.db", d.dir);
    ck_assert_int_eq(rld_run(&d, open_tokens), 1);
    rld_log_tail(&d, tail, sizeof tail);
    ck_assert_msg(strstr(tail, "others may read or write it"), "%s", tail);
    ck_assert_ptr_null(strstr(tail, RLD_ALICE_TOKEN));
    finish(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ratelimitd");
    TCase *api = tcase_create("api"), *refuse = tcase_create("refusals");

    curl_global_init(CURL_GLOBAL_DEFAULT);
    tcase_set_timeout(api, 60);
    tcase_set_timeout(refuse, 60);
    tcase_add_test(api, put_get_list_delete);
    tcase_add_test(api, history_says_what_when_and_who);
    tcase_add_test(api, the_set_served_is_the_set_stored);
    tcase_add_test(api, a_get_rule_put_back_unchanged_is_accepted);
    tcase_add_test(api, named_dimensions_accepted);
    tcase_add_test(api, conditional_writes);
    tcase_add_test(api, conditional_reads);
    tcase_add_test(api, reads_need_a_token_with_read_auth);
    tcase_add_test(refuse, bad_bodies_get_400_naming_the_field);
    tcase_add_test(refuse, bad_requests_get_their_status);
    tcase_add_test(refuse, oversize_bodies_get_413);
    tcase_add_test(refuse, raw_path_tricks);
    tcase_add_test(refuse, start_up_refusals);
    suite_add_tcase(s, api);
    suite_add_tcase(s, refuse);
    return run_suite(s);
}
