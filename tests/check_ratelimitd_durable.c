/*
 * check_ratelimitd_durable.c -- what ratelimitd promises beyond one
 * request: every change in the Redis snapshot key and on its channel (a
 * real redis-server, tests/redis_harness.c), writes going on while Redis is
 * away and the newest set published when it returns, and kill -9 in the
 * middle of 200 concurrent PUTs losing no acknowledged change and leaving
 * nothing half-written (the SQLite file checked after).
 */
#include <check.h>
#include <curl/curl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_harness.h"
#include "rld_check.h"
#include "testutil.h"

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

    /* A restart publishes version 3 again, under the start's own
     * generation (ratelimitd(8), GENERATIONS); the next change is 4. */
    ck_assert_int_eq(rld_stop(&d), 0);
    start_published(&d);
    ck_assert_int_eq(next_message(sub), 3);
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
    Suite *s = suite_create("ratelimitd_durable");
    TCase *pub = tcase_create("redis"), *crash = tcase_create("crash");

    curl_global_init(CURL_GLOBAL_DEFAULT);
    tcase_set_timeout(pub, 90);
    tcase_set_timeout(crash, 240);
    tcase_add_test(pub, every_change_is_published);
    tcase_add_test(pub, redis_away_then_back);
    tcase_add_test(crash, kill_9_loses_no_acknowledged_change);
    suite_add_tcase(s, pub);
    suite_add_tcase(s, crash);
    return run_suite(s);
}
