/*
 * check_async_loops.c -- the header-only adapters <ratelimit/libevent.h>
 * and <ratelimit/libuv.h> driving asynchronous checks from a real
 * libevent and a real libuv loop, against a real redis-server and a real
 * Redis Cluster: every callback runs in the loop's thread, from the loop,
 * and the admissions are exact.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <ratelimit/libevent.h>
#include <ratelimit/libuv.h>

#include "redis_harness.h"
#include "server_fixtures.h"
#include "testutil.h"

#define USERS 20
#define PER 15            /* checks per user; the limit is 10        */
#define N (USERS * PER)

static const char *rules =
    "[{\"rule_id\":\"u\",\"dimension\":\"user\",\"limit\":10,"
    "\"window_seconds\":3600}]";

typedef struct run {
    rl_async_check chk[N];
    rl_result res[N];
    rl_request req[USERS];
    char names[USERS][24];
    int calls, allowed, errors, wrong_thread;
    pthread_t loop_thread;
    void (*stop)(struct run *r);
    struct event_base *base;
    uv_loop_t *uv;
} run;

static void on_done(rl_async_check *chk, int rc)
{
    run *r = chk->data;

    r->calls++;
    r->wrong_thread += !pthread_equal(pthread_self(), r->loop_thread);
    if (rc != RL_OK)
        r->errors++;
    else
        r->allowed += chk->result->allowed;
    if (r->calls == N)
        r->stop(r);
}

static rl_limiter *open_lim(const char *store)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_config_set(cfg, "store", store), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "2000"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    rl_config_free(cfg);
    return lim;
}

static void start_all(run *r, rl_async *a)
{
    r->loop_thread = pthread_self();
    for (int u = 0; u < USERS; u++) {
        snprintf(r->names[u], sizeof r->names[u], "%s%d",
                 r->base ? "event" : "uv", u); /* one cluster for both */
        r->req[u] = (rl_request){.size = sizeof(rl_request), .user = r->names[u], .cost = 1};
    }
    for (int i = 0; i < N; i++) {
        r->chk[i] = (rl_async_check)RL_ASYNC_CHECK_INIT;
        r->chk[i].cb = on_done;
        r->chk[i].data = r;
        r->res[i] = (rl_result)RL_RESULT_INIT;
        r->chk[i].result = &r->res[i];
        ck_assert_int_eq(rl_check_start(a, &r->req[i % USERS], &r->chk[i]),
                         RL_OK);
    }
    ck_assert_int_eq(r->calls, 0);
}

static void verdict(const run *r)
{
    ck_assert_int_eq(r->calls, N);
    ck_assert_int_eq(r->errors, 0);
    ck_assert_int_eq(r->wrong_thread, 0);
    ck_assert_int_eq(r->allowed, USERS * 10);
}

/* ---- libevent ---------------------------------------------------------- */

static void stop_event(run *r)
{
    event_base_loopbreak(r->base);
}

static void with_libevent(const char *store)
{
    static run r;
    rl_limiter *lim = open_lim(store);
    rl_event w;
    rl_async *a;

    memset(&r, 0, sizeof r);
    r.stop = stop_event;
    r.base = event_base_new();
    ck_assert_int_eq(rl_async_new(lim, N, &a), RL_OK);
    ck_assert_int_eq(rl_event_attach(&w, r.base, a), 0);
    start_all(&r, a);
    ck_assert_int_ge(event_base_dispatch(r.base), 0);
    verdict(&r);
    rl_event_detach(&w);
    rl_async_free(a);
    event_base_free(r.base);
    rl_limiter_free(lim);
}

/* ---- libuv --------------------------------------------------------------- */

static void stop_uv(run *r)
{
    uv_stop(r->uv);
}

static void with_libuv(const char *store)
{
    static run r;
    rl_limiter *lim = open_lim(store);
    uv_loop_t loop;
    rl_uv w;
    rl_async *a;

    memset(&r, 0, sizeof r);
    r.stop = stop_uv;
    r.uv = &loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(rl_async_new(lim, N, &a), RL_OK);
    ck_assert_int_eq(rl_uv_attach(&w, &loop, a), 0);
    start_all(&r, a);
    uv_run(&loop, UV_RUN_DEFAULT);
    verdict(&r);
    rl_uv_detach(&w, NULL);
    uv_run(&loop, UV_RUN_DEFAULT); /* lets the handle close */
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    rl_async_free(a);
    rl_limiter_free(lim);
}

/* ---- the servers: server_fixtures.h ----------------------------------------- */

START_TEST(libevent_redis) { with_libevent(uri); }
END_TEST
START_TEST(libuv_redis) { with_libuv(uri); }
END_TEST
START_TEST(libevent_cluster) { with_libevent(curi); }
END_TEST
START_TEST(libuv_cluster) { with_libuv(curi); }
END_TEST
START_TEST(libevent_memory) { with_libevent("memory://"); }
END_TEST
START_TEST(libuv_memory) { with_libuv("memory://"); }
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("async_loops");
    TCase *mem = tcase_create("memory");
    TCase *red = tcase_create("redis");
    TCase *clu = tcase_create("cluster");

    tcase_add_test(mem, libevent_memory);
    tcase_add_test(mem, libuv_memory);
    suite_add_tcase(s, mem);
    if (rh_available()) {
        tcase_add_checked_fixture(red, srv_up, srv_down);
        tcase_set_timeout(red, 60);
        tcase_add_test(red, libevent_redis);
        tcase_add_test(red, libuv_redis);
        suite_add_tcase(s, red);
    }
    if (rh_cluster_available()) {
        tcase_add_unchecked_fixture(clu, cluster_up, cluster_down);
        tcase_set_timeout(clu, 120);
        tcase_add_test(clu, libevent_cluster);
        tcase_add_test(clu, libuv_cluster);
        suite_add_tcase(s, clu);
    }
    return s;
}

int main(void)
{
    return run_suite(suite());
}
