/*
 * check_ratelimitd.c -- ratelimitd end to end: the real binary on a free
 * loopback port with a real SQLite file (tests/rld_harness.c), a real
 * redis-server (tests/redis_harness.c), HTTP through libcurl or raw bytes.
 *
 * What it holds the service to: the API of contracts.md section 5 with the
 * library's canonical JSON in every answer; ETag / If-Match / If-None-Match;
 * 400 naming the field for every kind of bad body, 401/403/405/413/415, and
 * path tricks refused; the database files byte for byte unchanged by all
 * of those; every change in the Redis snapshot key and on its channel;
 * writes going on while Redis is away and the newest set published when it
 * returns; and kill -9 in the middle of 200 concurrent PUTs losing no
 * acknowledged change and leaving nothing half-written.
 */
#include <check.h>
#include <curl/curl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "redis_harness.h"
#include "rld_harness.h"
#include "rule.h"
#include "rule_json.h"
#include "ruleset.h"
#include "testutil.h"

#define ALICE RLD_ALICE_TOKEN
#define BOB RLD_BOB_TOKEN
#define WAIT_MS 15000 /* the longest any wait for a condition may take */

static const char rule_body[] =
    "{\"dimension\":\"user\",\"match\":{\"endpoint\":\"/search\"},"
    "\"limit\":100,\"windowSeconds\":60,\"algorithm\":\"token_bucket\","
    "\"burst\":20,\"mode\":\"log\",\"failureMode\":\"open\"}";

/* ---- helpers ------------------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void start(rld *d, const char *const *args)
{
    char tail[2048];

    ck_assert_msg(rld_available(), "ratelimitd not built");
    if (rld_start(d, args) != 0) {
        rld_log_tail(d, tail, sizeof tail);
        ck_abort_msg("ratelimitd did not start: %s", tail);
    }
}

/* Stop cleanly (exit 0: no leak under ASan, no race under TSan) and
 * remove the dir. */
static void finish(rld *d)
{
    char tail[2048];
    int rc = rld_stop(d);

    rld_log_tail(d, tail, sizeof tail);
    ck_assert_msg(rc == 0, "ratelimitd exit %d:\n%s", rc, tail);
    rld_cleanup(d);
}

static long put(const rld *d, const char *id, const char *body,
                const char *token, const char *const *hdrs, rld_resp *r)
{
    char path[256];

    snprintf(path, sizeof path, "/v1/rules/%s", id);
    return rld_http(d, "PUT", path, token, hdrs, body, strlen(body), r);
}

static long get(const rld *d, const char *path, const char *token,
                const char *const *hdrs, rld_resp *r)
{
    return rld_http(d, "GET", path, token, hdrs, NULL, 0, r);
}

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);

    ck_assert_msg(j != NULL, "not JSON (%s): %s", e.text, text);
    return j;
}

static long long int_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    ck_assert_msg(json_is_integer(v), "no integer %s", key);
    return json_integer_value(v);
}

static const char *str_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    ck_assert_msg(json_is_string(v), "no string %s", key);
    return json_string_value(v);
}

/* The body is one rule in the library's canonical form, newline-ended:
 * parsing it and writing it again gives the same bytes. */
static void assert_canonical_rule(const char *body, rl_rule *out)
{
    json_t *j = parse(body), *again;
    char err[256], *text;
    rl_rule r;

    ck_assert_msg(rule_from_json(j, &r, err, sizeof err) == 0, "%s", err);
    json_decref(j);
    again = rule_to_json(&r);
    text = json_dumps(again, RULE_JSON_DUMP_FLAGS);
    json_decref(again);
    ck_assert_uint_eq(strlen(body), strlen(text) + 1);
    ck_assert_int_eq(strncmp(body, text, strlen(text)), 0);
    ck_assert_int_eq(body[strlen(text)], '\n');
    free(text);
    if (out)
        *out = r;
    else
        rule_clear(&r);
}

/* The same for a whole set; returns it parsed (the caller frees it). */
static rl_ruleset *assert_canonical_set(const char *body, size_t len)
{
    rl_ruleset *rs = NULL;
    char err[256], *text;
    json_t *j;

    ck_assert_msg(ruleset_parse(body, len, 0, &rs, err, sizeof err) == RL_OK,
                  "%s", err);
    j = ruleset_to_json(rs);
    text = json_dumps(j, RULE_JSON_DUMP_FLAGS);
    json_decref(j);
    ck_assert_uint_eq(len, strlen(text) + 1);
    ck_assert_int_eq(strncmp(body, text, strlen(text)), 0);
    free(text);
    return rs;
}

/* The set as GET /v1/rules gives it. */
static rl_ruleset *list(const rld *d)
{
    rld_resp r;
    rl_ruleset *rs;

    ck_assert_int_eq(get(d, "/v1/rules", NULL, NULL, &r), 200);
    rs = assert_canonical_set(r.body, r.len);
    rld_resp_free(&r);
    return rs;
}

/* An error answer: status, JSON {"error": code, "message", "field"?}. */
static void assert_error(const rld_resp *r, long status, const char *code,
                         const char *field)
{
    json_t *j;

    ck_assert_msg(r->status == status, "status %ld, wanted %ld: %s",
                  r->status, status, r->body);
    j = parse(r->body);
    ck_assert_str_eq(str_of(j, "error"), code);
    ck_assert(strlen(str_of(j, "message")) > 0);
    if (field)
        ck_assert_str_eq(str_of(j, "field"), field);
    else
        ck_assert_ptr_null(json_object_get(j, "field"));
    json_decref(j);
}

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

START_TEST(put_get_list_delete_history)
{
    rld d = {0};
    rld_resp r;
    rl_rule rule;
    rl_ruleset *rs;
    json_t *j, *h;

    start(&d, NULL);
    ck_assert_int_eq(put(&d, "search", rule_body, ALICE, NULL, &r), 200);
    ck_assert_str_eq(r.etag, "\"1\"");
    ck_assert_str_eq(r.content_type, "application/json");
    assert_canonical_rule(r.body, &rule);
    ck_assert_str_eq(rule.id, "search");
    ck_assert_int_eq(rule.version, 1);
    ck_assert_int_eq(rule.ap.burst, 20);
    ck_assert_int_eq(rule.window_s, 60);
    ck_assert_int_eq(rule.mode, RL_MODE_LOG);
    ck_assert_int_eq(rule.failure, RL_FAIL_OPEN);
    ck_assert_int_eq((int)strlen(rule.updated_at), 20); /* ...T..:..:..Z */
    rule_clear(&rule);
    char *first = strdup(r.body);
    rld_resp_free(&r);

    /* GET gives what PUT answered. */
    ck_assert_int_eq(get(&d, "/v1/rules/search", NULL, NULL, &r), 200);
    ck_assert_str_eq(r.body, first);
    ck_assert_str_eq(r.etag, "\"1\"");
    rld_resp_free(&r);

    /* A second rule, snake_case this time, by the other operator. */
    ck_assert_int_eq(put(&d, "login", "{\"rule_id\":\"login\",\"dimension\":"
                         "\"ip\",\"limit\":5,\"window_seconds\":300}", BOB,
                         NULL, &r), 200);
    ck_assert_str_eq(r.etag, "\"2\"");
    rld_resp_free(&r);
    rs = list(&d);
    ck_assert_int_eq(rs->version, 2);
    ck_assert_uint_eq(rs->n, 2);
    ck_assert_str_eq(rs->rules[0].id, "login"); /* by id */
    ck_assert_int_eq(ruleset_find(rs, "search")->version, 1);
    ck_assert_int_eq(ruleset_find(rs, "login")->version, 2);
    ruleset_free(rs);

    ck_assert_int_eq(rld_http(&d, "DELETE", "/v1/rules/search", BOB, NULL,
                              NULL, 0, &r), 200);
    j = parse(r.body);
    ck_assert_int_eq(int_of(j, "version"), 3);
    ck_assert_str_eq(str_of(j, "deleted"), "search");
    json_decref(j);
    rld_resp_free(&r);
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

    /* History: every version, oldest first, who and what. */
    ck_assert_int_eq(get(&d, "/v1/rules/search/history", NULL, NULL, &r),
                     200);
    j = parse(r.body);
    ck_assert_str_eq(str_of(j, "rule_id"), "search");
    h = json_object_get(j, "history");
    ck_assert_uint_eq(json_array_size(h), 2);
    ck_assert_int_eq(int_of(json_array_get(h, 0), "version"), 1);
    ck_assert_str_eq(str_of(json_array_get(h, 0), "op"), "put");
    ck_assert_str_eq(str_of(json_array_get(h, 0), "by"), RLD_ALICE);
    char *stored = json_dumps(json_object_get(json_array_get(h, 0), "rule"),
                              RULE_JSON_DUMP_FLAGS);
    ck_assert_int_eq(strncmp(stored, first, strlen(stored)), 0);
    free(stored);
    ck_assert_int_eq(int_of(json_array_get(h, 1), "version"), 3);
    ck_assert_str_eq(str_of(json_array_get(h, 1), "op"), "delete");
    ck_assert_str_eq(str_of(json_array_get(h, 1), "by"), RLD_BOB);
    ck_assert(json_is_null(json_object_get(json_array_get(h, 1), "rule")));
    ck_assert_int_eq((int)strlen(str_of(json_array_get(h, 1), "at")), 20);
    json_decref(j);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/never/history", NULL, NULL, &r),
                     404);
    rld_resp_free(&r);

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

START_TEST(etags_and_conditional_requests)
{
    rld d = {0};
    rld_resp r;
    rl_rule rule;
    const char *if1[] = {"If-Match: \"1\"", NULL};
    const char *if1weak[] = {"If-Match: W/\"2\"", NULL};
    const char *if_list[] = {"If-Match: \"7\", \"2\"", NULL};
    const char *star[] = {"If-Match: *", NULL};
    const char *none_star[] = {"If-None-Match: *", NULL};
    const char *inm3[] = {"If-None-Match: \"3\"", NULL};
    const char *inm_old[] = {"If-None-Match: \"1\"", NULL};
    const char *inm_weak[] = {"If-None-Match: W/\"3\"", NULL};
    const char *if9[] = {"If-Match: \"9\"", NULL};
    const char *limit7 = "{\"dimension\":\"ip\",\"limit\":7,\"window_seconds\":1}";

    start(&d, NULL);
    ck_assert_int_eq(put(&d, "r1", rule_body, ALICE, NULL, &r), 200);
    rld_resp_free(&r);
    /* The tag we hold is current: the write goes through. */
    ck_assert_int_eq(put(&d, "r1", limit7, ALICE, if1, &r), 200);
    ck_assert_str_eq(r.etag, "\"2\"");
    rld_resp_free(&r);
    /* A second operator with the same stale tag: 412, nothing changes. */
    ck_assert_int_eq(put(&d, "r1", rule_body, BOB, if1, &r), 412);
    assert_error(&r, 412, "precondition_failed", NULL);
    rld_resp_free(&r);
    ck_assert_int_eq(rld_http(&d, "DELETE", "/v1/rules/r1", BOB, if1, NULL,
                              0, &r), 412);
    rld_resp_free(&r);
    ck_assert_int_eq(put(&d, "r1", rule_body, BOB, if1weak, &r), 412);
    rld_resp_free(&r); /* If-Match compares strongly */
    ck_assert_int_eq(put(&d, "r1", rule_body, BOB, none_star, &r), 412);
    rld_resp_free(&r); /* create-only on an existing rule */
    ck_assert_int_eq(get(&d, "/v1/rules/r1", NULL, NULL, &r), 200);
    assert_canonical_rule(r.body, &rule);
    ck_assert_int_eq(rule.version, 2);
    ck_assert_int_eq(rule.ap.limit, 7);
    rule_clear(&rule);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/r1/history", NULL, NULL, &r), 200);
    json_t *j = parse(r.body);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "history")), 2);
    json_decref(j);
    rld_resp_free(&r);

    /* A list naming the current tag; "*"; then If-Match on a missing rule. */
    ck_assert_int_eq(put(&d, "r1", limit7, ALICE, if_list, &r), 200);
    ck_assert_str_eq(r.etag, "\"3\"");
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/r1", NULL, inm3, &r), 304);
    ck_assert_str_eq(r.etag, "\"3\"");
    ck_assert_uint_eq(r.len, 0);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/r1", NULL, inm_weak, &r), 304);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/r1", NULL, inm_old, &r), 200);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules", NULL, inm3, &r), 304);
    rld_resp_free(&r);
    ck_assert_int_eq(put(&d, "r1", limit7, ALICE, star, &r), 200);
    ck_assert_str_eq(r.etag, "\"4\"");
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules", NULL, inm3, &r), 200);
    ck_assert_str_eq(r.etag, "\"4\"");
    rld_resp_free(&r);
    ck_assert_int_eq(put(&d, "r2", limit7, ALICE, if9, &r), 412);
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/r2", NULL, NULL, &r), 404);
    rld_resp_free(&r);
    ck_assert_int_eq(put(&d, "r2", limit7, ALICE, none_star, &r), 200);
    ck_assert_str_eq(r.etag, "\"5\"");
    rld_resp_free(&r);
    ck_assert_int_eq(rld_http(&d, "DELETE", "/v1/rules/r2", ALICE,
                              (const char *[]){"If-Match: \"5\"", NULL},
                              NULL, 0, &r), 200);
    rld_resp_free(&r);
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
#define OKBODY "{\"dimension\":\"ip\",\"limit\":5,\"window_seconds\":1}"

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
    {"PUT", ID, ALICE, {0}, "{\"dimension\":\"planet\",\"limit\":5,"
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

/* ---- Redis ------------------------------------------------------------------------ */

static rh_server redis;

/* A server with --redis on `redis` (key rl:rules). */
static void start_published(rld *d)
{
    char uri[128];
    const char *args[] = {"--redis", uri, NULL};

    ck_assert_ptr_nonnull(rh_uri(&redis, uri, sizeof uri));
    start(d, args);
}

/* The version the snapshot key holds (-1: none), its text in *text. */
static long long key_version(char **text)
{
    redisContext *c = rh_connect(&redis);
    redisReply *r = c ? redisCommand(c, "GET rl:rules") : NULL;
    long long v = -1;

    if (text)
        *text = NULL;
    if (r && r->type == REDIS_REPLY_STRING) {
        json_t *j = json_loadb(r->str, r->len, 0, NULL);
        v = j ? json_integer_value(json_object_get(j, "version")) : -1;
        json_decref(j);
        if (text)
            *text = strdup(r->str);
    }
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return v;
}

static void wait_key_version(long long want)
{
    int64_t end = now_ms() + WAIT_MS;
    long long v;

    while ((v = key_version(NULL)) != want && now_ms() < end)
        sleep_ms(10);
    ck_assert_msg(v == want, "snapshot key at %lld, wanted %lld", v, want);
}

static void wait_health(const rld *d, const char *state)
{
    int64_t end = now_ms() + WAIT_MS;
    char now[16] = "";

    do {
        rld_resp r;
        if (get(d, "/healthz", NULL, NULL, &r) == 200) {
            json_t *j = parse(r.body);
            snprintf(now, sizeof now, "%s", str_of(j, "redis"));
            json_decref(j);
        }
        rld_resp_free(&r);
        if (strcmp(now, state) == 0)
            return;
        sleep_ms(10);
    } while (now_ms() < end);
    ck_abort_msg("healthz says redis %s, wanted %s", now, state);
}

/* The next message on the subscribed channel: its version. */
static long long next_message(redisContext *sub)
{
    redisReply *m = NULL;
    long long v;

    ck_assert_int_eq(redisGetReply(sub, (void **)&m), REDIS_OK);
    ck_assert_int_eq(m->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(m->elements, 3);
    ck_assert_str_eq(m->element[0]->str, "message");
    ck_assert_str_eq(m->element[1]->str, "rl:rules");
    v = atoll(m->element[2]->str);
    freeReplyObject(m);
    return v;
}

/* The key holds what GET /v1/rules answers, and the library parses it. */
static void assert_key_is_the_set(const rld *d, long long version)
{
    char *text;
    rld_resp r;
    rl_ruleset *rs;

    ck_assert_int_eq(key_version(&text), version);
    ck_assert_int_eq(get(d, "/v1/rules", NULL, NULL, &r), 200);
    ck_assert_uint_eq(strlen(text) + 1, r.len);
    ck_assert_int_eq(strncmp(text, r.body, strlen(text)), 0);
    rs = assert_canonical_set(r.body, r.len);
    ck_assert_int_eq(rs->version, version);
    ruleset_free(rs);
    rld_resp_free(&r);
    free(text);
}

START_TEST(every_change_is_published)
{
    rld d = {0};
    rld_resp r;
    redisContext *sub;
    redisReply *ok;
    struct timeval tv = {WAIT_MS / 1000, 0};

    ck_assert_int_eq(rh_start(&redis, NULL), 0);
    ck_assert_ptr_nonnull(sub = rh_connect(&redis));
    redisSetTimeout(sub, tv);
    ok = redisCommand(sub, "SUBSCRIBE rl:rules");
    ck_assert_ptr_nonnull(ok);
    freeReplyObject(ok);
    start_published(&d);
    wait_key_version(0); /* the set at start, empty */
    ck_assert_int_eq(next_message(sub), 0);
    wait_health(&d, "up");

    ck_assert_int_eq(put(&d, "a", rule_body, ALICE, NULL, &r), 200);
    rld_resp_free(&r);
    ck_assert_int_eq(next_message(sub), 1);
    assert_key_is_the_set(&d, 1);
    ck_assert_int_eq(put(&d, "b", OKBODY, BOB, NULL, &r), 200);
    rld_resp_free(&r);
    ck_assert_int_eq(next_message(sub), 2);
    ck_assert_int_eq(rld_http(&d, "DELETE", "/v1/rules/a", BOB, NULL, NULL,
                              0, &r), 200);
    rld_resp_free(&r);
    ck_assert_int_eq(next_message(sub), 3);
    assert_key_is_the_set(&d, 3);

    /* A restart publishes nothing new: the key already holds version 3. */
    ck_assert_int_eq(rld_stop(&d), 0);
    start_published(&d);
    wait_health(&d, "up");
    ck_assert_int_eq(put(&d, "c", OKBODY, BOB, NULL, &r), 200);
    rld_resp_free(&r);
    ck_assert_int_eq(next_message(sub), 4);
    redisFree(sub);
    finish(&d);
    rh_stop(&redis);
}
END_TEST

START_TEST(redis_away_then_back)
{
    rld d = {0};
    rld_resp r;
    rl_ruleset *rs;

    ck_assert_int_eq(rh_start(&redis, NULL), 0);
    start_published(&d);
    ck_assert_int_eq(put(&d, "a", OKBODY, ALICE, NULL, &r), 200);
    rld_resp_free(&r);
    wait_key_version(1);
    ck_assert_int_eq(rh_kill(&redis), 0);
    wait_health(&d, "down");

    /* Writes go on, stored and served. */
    ck_assert_int_eq(put(&d, "b", rule_body, ALICE, NULL, &r), 200);
    rld_resp_free(&r);
    ck_assert_int_eq(put(&d, "c", OKBODY, BOB, NULL, &r), 200);
    rld_resp_free(&r);
    rs = list(&d);
    ck_assert_int_eq(rs->version, 3);
    ck_assert_uint_eq(rs->n, 3);
    ruleset_free(rs);

    /* Back, and empty: the newest set is published by itself. */
    ck_assert_int_eq(rh_restart(&redis), 0);
    wait_key_version(3);
    assert_key_is_the_set(&d, 3);
    wait_health(&d, "up");
    finish(&d);
    rh_stop(&redis);
}
END_TEST

/* ---- kill -9 in the middle of 200 concurrent PUTs ----------------------------------- */

#define WRITERS 8
#define PER_WRITER 25
#define KILL_AFTER 100 /* acknowledged PUTs before the kill */

typedef struct acked {
    int ok;            /* 200 received */
    long long version; /* its ETag      */
} acked;

static struct {
    const rld *d;
    acked puts[WRITERS][PER_WRITER];
    atomic_int count;
} load;

static long long limit_of(int w, int i)
{
    return 1000 + w * 100 + i;
}

static void *writer(void *arg)
{
    int w = (int)(intptr_t)arg;
    char id[32], body[128];

    for (int i = 0; i < PER_WRITER; i++) {
        rld_resp r;
        snprintf(id, sizeof id, "w%d-%d", w, i);
        snprintf(body, sizeof body, "{\"dimension\":\"user\",\"limit\":%lld,"
                 "\"window_seconds\":60}", limit_of(w, i));
        long st = put(load.d, id, body, w % 2 ? ALICE : BOB, NULL, &r);
        if (st == 200) {
            load.puts[w][i].version = atoll(r.etag + 1);
            load.puts[w][i].ok = 1;
            atomic_fetch_add(&load.count, 1);
        }
        rld_resp_free(&r);
        if (st != 200)
            break; /* the server is gone */
    }
    return NULL;
}

/* After the restart: every acknowledged PUT is there as acknowledged,
 * the versions are exactly 1..V with no gap, and the next PUT gets V + 1. */
static void assert_survived(rld *d)
{
    rl_ruleset *rs = list(d);
    int acknowledged = 0;
    char *seen = calloc((size_t)rs->version + 1, 1);
    rld_resp r;

    ck_assert_ptr_nonnull(seen);
    for (int w = 0; w < WRITERS; w++)
        for (int i = 0; i < PER_WRITER; i++) {
            char id[32];
            const rl_rule *rule;
            snprintf(id, sizeof id, "w%d-%d", w, i);
            rule = ruleset_find(rs, id);
            if (!load.puts[w][i].ok)
                continue;
            acknowledged++;
            ck_assert_msg(rule != NULL, "acknowledged %s lost", id);
            ck_assert_int_eq(rule->version, load.puts[w][i].version);
            ck_assert_int_eq(rule->ap.limit, limit_of(w, i));
        }
    ck_assert_int_ge(acknowledged, KILL_AFTER);
    ck_assert_int_lt(acknowledged, WRITERS * PER_WRITER); /* killed mid-way */
    /* Each id was written once: the set's n rules hold versions 1..V. */
    ck_assert_int_eq((long long)rs->n, rs->version);
    for (size_t k = 0; k < rs->n; k++) {
        ck_assert(rs->rules[k].version >= 1 &&
                  rs->rules[k].version <= rs->version);
        ck_assert(!seen[rs->rules[k].version]);
        seen[rs->rules[k].version] = 1;
    }
    ck_assert_int_eq(put(d, "after", OKBODY, ALICE, NULL, &r), 200);
    ck_assert_int_eq(atoll(r.etag + 1), rs->version + 1);
    rld_resp_free(&r);
    free(seen);
    ruleset_free(rs);
}

static void assert_db_sound(const char *path)
{
    sqlite3 *db;
    sqlite3_stmt *s;

    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s,
                                        NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    /* The set version, the history and the rules agree. */
    ck_assert_int_eq(sqlite3_prepare_v2(db,
        "SELECT (SELECT value FROM meta WHERE name = 'set_version'),"
        " (SELECT max(version) FROM history), (SELECT count(*) FROM history),"
        " (SELECT count(*) FROM rules)", -1, &s, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1));
    ck_assert_int_eq(sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 2));
    ck_assert_int_eq(sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 2));
    sqlite3_finalize(s);
    sqlite3_close(db);
}

START_TEST(kill_9_loses_no_acknowledged_change)
{
    rld d = {0};
    pthread_t th[WRITERS];
    int64_t end;

    start(&d, NULL);
    memset(&load, 0, sizeof load);
    load.d = &d;
    for (int w = 0; w < WRITERS; w++)
        ck_assert_int_eq(pthread_create(&th[w], NULL, writer,
                                        (void *)(intptr_t)w), 0);
    end = now_ms() + 120000;
    while (atomic_load(&load.count) < KILL_AFTER && now_ms() < end)
        sleep_ms(1);
    ck_assert_int_ge(atomic_load(&load.count), KILL_AFTER);
    ck_assert_int_eq(rld_kill(&d), 0);
    for (int w = 0; w < WRITERS; w++)
        pthread_join(th[w], NULL);

    start(&d, NULL); /* the same database */
    assert_survived(&d);
    ck_assert_int_eq(rld_stop(&d), 0);
    assert_db_sound(d.db);
    rld_cleanup(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ratelimitd");
    TCase *api = tcase_create("api"), *refuse = tcase_create("refusals");
    TCase *pub = tcase_create("redis"), *crash = tcase_create("crash");

    curl_global_init(CURL_GLOBAL_DEFAULT);
    tcase_set_timeout(api, 60);
    tcase_set_timeout(refuse, 60);
    tcase_set_timeout(pub, 90);
    tcase_set_timeout(crash, 240);
    tcase_add_test(api, put_get_list_delete_history);
    tcase_add_test(api, a_get_rule_put_back_unchanged_is_accepted);
    tcase_add_test(api, etags_and_conditional_requests);
    tcase_add_test(api, reads_need_a_token_with_read_auth);
    tcase_add_test(refuse, bad_bodies_get_400_naming_the_field);
    tcase_add_test(refuse, bad_requests_get_their_status);
    tcase_add_test(refuse, oversize_bodies_get_413);
    tcase_add_test(refuse, raw_path_tricks);
    tcase_add_test(refuse, start_up_refusals);
    tcase_add_test(pub, every_change_is_published);
    tcase_add_test(pub, redis_away_then_back);
    tcase_add_test(crash, kill_9_loses_no_acknowledged_change);
    suite_add_tcase(s, api);
    suite_add_tcase(s, refuse);
    suite_add_tcase(s, pub);
    suite_add_tcase(s, crash);
    return run_suite(s);
}
