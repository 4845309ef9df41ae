/*
 * check_redis_timing.c -- the Redis store's checks timed against their
 * timeout, against a real redis-server the tests stop (SIGSTOP), slow
 * down and resume: a hung server costs each check one timeout, the
 * breaker opens and closes, a silent connection is replaced (and a slow
 * one is not), the tightest timeout still reaches Redis, and
 * rl_check_many waits no longer than its timeout.  A suite of its own
 * (it was check_redis's "timing" case) so that a slowed run
 * (tests/valgrind.sh) can leave it out whole.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "redis_harness.h"
#include "server_fixtures.h"
#include "store_redis.h"
#include "testutil.h"
#include "redis_fixture.h"

/* A 2-core VM can delay a thread waking at its deadline by tens of ms;
 * sanitizer builds check memory and races, not time. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLACK_MS 2000
#else
#define SLACK_MS 250
#endif

/* The store's count of calls given up at their deadline, once the I/O
 * thread has counted at least `least` (it counts a call its caller left
 * when it next meets it, which a loaded machine may delay). */
static int64_t timeouts_once_at_least(rl_limiter *lim, int64_t least)
{
    store_redis_stats st;

    for (int i = 0; i < 2000; i++) {
        memset(&st, 0, sizeof st);
        store_redis_stats_get(limiter_store(lim), &st);
        if (st.timeouts >= least)
            return st.timeouts;
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return st.timeouts;
}

/* The store's count of timeouts once it has held still for QUIET_READS
 * reads QUIET_MS apart: a call of await_redis's that timed out in flight
 * is counted when its late reply arrives, which a loaded machine may
 * hold back past the checks that followed (distcheck saw one counted
 * after the server was stopped, charged to the first hung check). */
#define QUIET_MS 100
#define QUIET_READS 3
static int64_t timeouts_settled(rl_limiter *lim)
{
    int64_t last = timeouts_once_at_least(lim, 0);

    for (int same = 0, i = 0; same < QUIET_READS && i < 100; i++) {
        struct timespec ts = {0, QUIET_MS * 1000 * 1000};
        nanosleep(&ts, NULL);
        int64_t now = timeouts_once_at_least(lim, 0);
        same = now == last ? same + 1 : 0;
        last = now;
    }
    return last;
}

/* A hung server costs each check its timeout once: no second wait (a
 * retry, another connection, a reconnect) before the failure mode
 * decides.  What the test holds the library to is what it controls, not
 * a loaded machine's wake-up times: each check counts exactly one
 * timeout in the store's own counters, and the quickest of the checks
 * returns within two timeouts -- one that waited twice cannot, however
 * promptly it is woken, while a busy machine that delays a wake-up now
 * and then does not delay every one.  The breaker and the stuck-connection
 * sweep, which have their tests (breaker_opens_..., a_silent_...), are
 * kept out: no number of failures opens it here, and no connection counts
 * as stuck before connect_timeout_ms. */
#define HUNG_TIMEOUT_MS 100
#define HUNG_CHECKS 5
#define STR_(x) #x
#define STR(x) STR_(x)

START_TEST(a_hung_server_costs_one_timeout)
{
    const char *opts[] = {"store", uri, "rules", rules, "deny_cache", "0",
                          "timeout_ms", STR(HUNG_TIMEOUT_MS),
                          "breaker_failures", "1000",
                          "connect_timeout_ms", "30000", NULL};
    rl_limiter *lim = limiter_from(opts);
    rl_result res = RL_RESULT_INIT;
    long quickest = -1;
    int64_t before, late = 0;

    /* Redis deciding first, then every earlier timeout counted. */
    await_redis(lim, "user:1");
    before = timeouts_settled(lim);
    ck_assert_int_eq(rh_pause(&srv), 0);
    for (int i = 0; i < HUNG_CHECKS; i++) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        ck_assert_int_eq(rl_allow(lim, "user:1", "fb", 1, &res), RL_OK);
        long ms = elapsed_ms(&t);
        ck_assert(res.flags & RL_FLAG_FALLBACK);
        if (quickest < 0 || ms < quickest)
            quickest = ms;
        /* This check's timeout, and no other. */
        ck_assert_int_eq(timeouts_once_at_least(lim, before + i + 1),
                         before + i + 1);
    }
    ck_assert_msg(quickest < 2 * HUNG_TIMEOUT_MS,
                  "the quickest of %d checks took %ld ms (timeout %d ms)",
                  HUNG_CHECKS, quickest, HUNG_TIMEOUT_MS);
    ck_assert_int_eq(rh_resume(&srv), 0);
    /* Until Redis decides again, each check (a loaded machine may take a
     * while to run the server) costs a timeout of its own.  The first it
     * decides was sent in a turn of the I/O thread that began by counting
     * every call whose deadline had passed: any second wait shows now. */
    for (int i = 0;; i++) {
        ck_assert_int_eq(rl_allow(lim, "user:1", "sw", 0, &res), RL_OK);
        if (!(res.flags & RL_FLAG_FALLBACK))
            break;
        late++;
        ck_assert_msg(i < 100, "Redis did not decide again in 100 checks");
    }
    ck_assert_int_eq(timeouts_once_at_least(lim, before + HUNG_CHECKS + late),
                     before + HUNG_CHECKS + late);
    rl_limiter_free(lim);
}
END_TEST

/* A server that stops answering (SIGSTOP: the socket stays open, nothing
 * comes back): a connection whose oldest call has waited over max(1 s,
 * connect_timeout_ms) with no reply, its deadline (500 ms) passed, is
 * stuck and replaced, never before. */
START_TEST(a_silent_connection_is_replaced_after_a_second)
{
    rl_limiter *lim = open_limiter(uri, "redis_connections", "1");
    store_redis_stats st = {0};
    struct timespec t0, t;
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(admitted(lim, "user:silent", "sw", 1), 1);
    ck_assert_int_eq(rh_pause(&srv), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(rl_allow(lim, "user:silent", "sw", 1, &res), RL_OK);
    ck_assert(res.flags & RL_FLAG_FALLBACK); /* timed out */
    for (;;) {
        store_redis_stats_get(limiter_store(lim), &st);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (st.stuck)
            break;
        ck_assert_msg(t.tv_sec - t0.tv_sec < 10, "never replaced");
        nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
    }
    ck_assert_int_eq(st.stuck, 1);
    ck_assert_int_ge((t.tv_sec - t0.tv_sec) * 1000 +
                         (t.tv_nsec - t0.tv_nsec) / 1000000, 1000);
    ck_assert_int_eq(rh_resume(&srv), 0);
    await_redis(lim, "user:back");
    rl_limiter_free(lim);
}
END_TEST

/* A check in a thread of its own: its outcome and how long it took. */
typedef struct lone_check {
    rl_limiter *lim;
    const char *key;
    int rc;
    rl_result res;
    long ms;
} lone_check;

static void *lone_check_main(void *p)
{
    lone_check *l = p;
    struct timespec t0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    l->rc = rl_allow(l->lim, l->key, "sw", 1, &l->res);
    l->ms = elapsed_ms(&t0);
    return NULL;
}

/* Start l's check; return once its store has sent it to Redis. */
static void start_check(lone_check *l, pthread_t *th)
{
    store_redis_stats st = {0};
    int64_t before;

    l->res = (rl_result)RL_RESULT_INIT;
    store_redis_stats_get(limiter_store(l->lim), &st);
    before = st.checks;
    ck_assert_int_eq(pthread_create(th, NULL, lone_check_main, l), 0);
    for (int i = 0; st.checks == before; i++) {
        ck_assert_msg(i < 10000, "the check was never sent");
        nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
        store_redis_stats_get(limiter_store(l->lim), &st);
    }
}

/* A slow server, alive (DEBUG SLEEP 1.5, queued ahead of the check while
 * the server was stopped, so that the check waits for all of it), under
 * a timeout_ms of 6 s (room for a loaded host): the check gets Redis's
 * answer after 1.5 s, and its connection, silent for over a second, is
 * not stuck while its call may still be answered.  It was taken for
 * stuck at 1 s and replaced, the check falling back. */
START_TEST(a_slow_server_answers_before_the_deadline_on_its_connection)
{
    rl_limiter *lim = open_limiter(uri, "timeout_ms", "6000");
    lone_check l = {.lim = lim, .key = "user:slow"};
    store_redis_stats st = {0};
    redisContext *c = rh_connect(&srv);
    redisReply *rep = NULL;
    int64_t reconnects;
    pthread_t th;
    int done = 0;

    ck_assert_ptr_nonnull(c);
    rep = redisCommand(c, "PING"); /* accepted before the pause */
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);
    ck_assert_int_eq(admitted(lim, "user:slow", "sw", 1), 1);
    store_redis_stats_get(limiter_store(lim), &st);
    reconnects = st.reconnects;
    ck_assert_int_eq(rh_pause(&srv), 0);
    ck_assert_int_eq(redisAppendCommand(c, "DEBUG SLEEP 1.5"), REDIS_OK);
    while (!done)
        ck_assert_int_eq(redisBufferWrite(c, &done), REDIS_OK);
    start_check(&l, &th);
    ck_assert_int_eq(rh_resume(&srv), 0);
    pthread_join(th, NULL);
    ck_assert_int_eq(redisGetReply(c, (void **)&rep), REDIS_OK);
    ck_assert_str_eq(rep->str, "OK");
    freeReplyObject(rep);
    redisFree(c);
    ck_assert_int_eq(l.rc, RL_OK);
    ck_assert_int_eq(l.res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN), 0);
    ck_assert(l.res.allowed);
    ck_assert_int_ge(l.ms, 1000); /* it did wait for the sleep */
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.stuck, 0);
    ck_assert_int_eq(st.reconnects, reconnects);
    rl_limiter_free(lim);
}
END_TEST

/* The same timeout_ms on a server that stopped answering: the check
 * waits its whole 3 s, then times out, and the connection is replaced
 * once its call has timed out (before the fix, at 1 s, failing the check
 * early). */
START_TEST(a_silent_connection_is_replaced_once_its_calls_time_out)
{
    rl_limiter *lim = open_limiter(uri, "timeout_ms", "3000");
    lone_check l = {.lim = lim, .key = "user:silent3"};
    store_redis_stats st = {0};
    pthread_t th;

    ck_assert_int_eq(admitted(lim, "user:silent3", "sw", 1), 1);
    ck_assert_int_eq(rh_pause(&srv), 0);
    start_check(&l, &th);
    pthread_join(th, NULL);
    ck_assert_int_eq(l.rc, RL_OK);
    ck_assert(l.res.flags & RL_FLAG_FALLBACK); /* timed out */
    ck_assert_int_ge(l.ms, 3000);
    for (int i = 0; !st.stuck; i++) {
        ck_assert_msg(i < 1000, "never replaced");
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        store_redis_stats_get(limiter_store(lim), &st);
    }
    ck_assert_int_eq(st.stuck, 1);
    ck_assert_int_eq(rh_resume(&srv), 0);
    await_redis(lim, "user:back3");
    rl_limiter_free(lim);
}
END_TEST

/* A hung server: K timeouts open the breaker, after which checks make no
 * network call (they answer at once, by failure mode); after the cooldown
 * one probe closes it again once the server answers. */
START_TEST(breaker_opens_skips_the_network_and_closes)
{
    /* A timeout of at least the breaker's 50 ms slice: each timed-out
     * call counts. */
    const char *opts[] = {"store", uri, "rules", rules, "timeout_ms", "60",
                          "breaker_failures", "3",
                          "breaker_cooldown_ms", "300", NULL};
    rl_limiter *lim = limiter_from(opts);
    rl_result res = RL_RESULT_INIT;
    rl_stats st = RL_STATS_INIT;
    struct timespec t;
    ck_assert_int_eq(admitted(lim, "user:1", "fb", 1), 1);
    ck_assert_int_eq(rl_stats_get(lim, &st), RL_OK);
    ck_assert_int_eq(st.breaker_state, RL_BREAKER_CLOSED);

    ck_assert_int_eq(rh_pause(&srv), 0);
    for (int i = 0; i < 3; i++) { /* each waits its timeout */
        ck_assert_int_eq(rl_allow(lim, "user:1", "fb", 1, &res), RL_OK);
        ck_assert(res.flags & RL_FLAG_FALLBACK);
    }
    ck_assert_int_eq(rl_stats_get(lim, &st), RL_OK);
    ck_assert_int_eq(st.breaker_state, RL_BREAKER_OPEN);
    ck_assert_int_eq(st.breaker_opens, 1);
    clock_gettime(CLOCK_MONOTONIC, &t);
    for (int i = 0; i < 100; i++) { /* open: no waiting at all */
        ck_assert_int_eq(rl_allow(lim, "user:1", "fb", 1, &res), RL_OK);
        ck_assert(res.flags & RL_FLAG_FALLBACK);
    }
    /* 100 checks with no network wait; had each waited its 60 ms timeout
     * they would take 6 s.  The bound leaves room for a loaded machine. */
    ck_assert_int_lt(elapsed_ms(&t), 1000);

    ck_assert_int_eq(rh_resume(&srv), 0);
    clock_gettime(CLOCK_MONOTONIC, &t);
    for (;;) { /* the first check after the cooldown probes */
        ck_assert_int_eq(rl_allow(lim, "user:2", "sw", 0, &res), RL_OK);
        if (!(res.flags & RL_FLAG_FALLBACK))
            break;
        ck_assert_int_lt(elapsed_ms(&t), 3000);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(rl_stats_get(lim, &st), RL_OK);
    ck_assert_int_eq(st.breaker_state, RL_BREAKER_CLOSED);
    ck_assert_int_eq(st.breaker_closes, 1);
    ck_assert_int_ge(st.store_errors, 103);
    ck_assert_int_ge(st.fallback, 103);
    rl_limiter_free(lim);
}
END_TEST

/* The tightest timeout still reaches a healthy server: deadlines are kept
 * in ns, not rounded down to whole ms (where 1 ms became 0 and no check
 * ever reached Redis).  On busy cores a 1 ms round trip is often missed
 * and the breaker then opens for a while, so the test checks (10 ms
 * apart, the breaker's probes let through) until one is decided by Redis,
 * for up to 20 s: with the old rounding none ever is. */
START_TEST(one_ms_timeout_still_reaches_redis)
{
    rl_limiter *lim = open_limiter(uri, "timeout_ms", "1");
    rl_result res = RL_RESULT_INIT;
    struct timespec t;
    int by_redis = 0;

    clock_gettime(CLOCK_MONOTONIC, &t);
    while (!by_redis && elapsed_ms(&t) < 20000) {
        struct timespec gap = {0, 10 * 1000000};
        ck_assert_int_eq(rl_allow(lim, "user:t", "sw", 0, &res), RL_OK);
        by_redis = !(res.flags & RL_FLAG_FALLBACK);
        nanosleep(&gap, NULL);
    }
    ck_assert_int_gt(by_redis, 0);
    rl_limiter_free(lim);
}
END_TEST

typedef struct lone {
    rl_limiter *lim;
    long ms;
} lone;

static void *lone_main(void *p)
{
    lone *l = p;
    rl_result res = RL_RESULT_INIT;
    struct timespec a;

    clock_gettime(CLOCK_MONOTONIC, &a);
    rl_allow(l->lim, "user:lead", "fb", 1, &res);
    l->ms = elapsed_ms(&a);
    return NULL;
}

/* A hung server: a call of 40 requests queued behind another thread's
 * check (which leads the lane and waits out its timeout) leaves the queue
 * at its own deadline; every request falls back, none waits longer than
 * the timeout; and once Redis answers again, so do the batches. */
START_TEST(check_many_waits_no_longer_than_its_timeout)
{
    rl_limiter *lim = open_limiter(uri, "timeout_ms", "100");
    lone other = {lim, 0};
    rl_request req[40];
    rl_result res[40];
    int codes[40];
    pthread_t th;
    struct timespec a;
    long ms;

    results_init(res, 40);
    for (int i = 0; i < 40; i++)
        req[i] = (rl_request){.size = sizeof(rl_request), .endpoint = "/both", .user = "hung",
                              .cost = 1};
    ck_assert_int_eq(rl_check_many(lim, req, res, codes, 1), RL_OK);
    ck_assert_int_eq(rh_pause(&srv), 0);
    pthread_create(&th, NULL, lone_main, &other);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL); /* the lone check leads, its call is out */
    clock_gettime(CLOCK_MONOTONIC, &a);
    ck_assert_int_eq(rl_check_many(lim, req, res, codes, 40), RL_OK);
    ms = elapsed_ms(&a);
    pthread_join(th, NULL);
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(codes[i], RL_OK);
        ck_assert(res[i].flags & RL_FLAG_FALLBACK);
    }
    ck_assert_int_le(ms, 100 + SLACK_MS);
    ck_assert_int_le(other.ms, 100 + SLACK_MS);
    ck_assert_int_eq(rh_resume(&srv), 0);
    await_redis(lim, "user:hung");
    ck_assert_int_eq(rl_check_many(lim, req, res, codes, 40), RL_OK);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(res[i].flags & RL_FLAG_FALLBACK, 0);
    rl_limiter_free(lim);
}
END_TEST
int main(void)
{
    Suite *s = suite_create("redis_timing");
    TCase *tc = tcase_create("timing");

    if (!rh_available()) {
        fprintf(stderr,
                "check_redis_timing: redis-server not available, skipping\n");
        return 77;
    }
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, srv_up, srv_down);
    tcase_add_test(tc, a_hung_server_costs_one_timeout);
    tcase_add_test(tc, breaker_opens_skips_the_network_and_closes);
    tcase_add_test(tc, a_silent_connection_is_replaced_after_a_second);
    tcase_add_test(tc, a_slow_server_answers_before_the_deadline_on_its_connection);
    tcase_add_test(tc, a_silent_connection_is_replaced_once_its_calls_time_out);
    tcase_add_test(tc, one_ms_timeout_still_reaches_redis);
    tcase_add_test(tc, check_many_waits_no_longer_than_its_timeout);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
