/*
 * check_threads.c -- many threads calling rl_check() on one Redis store
 * (issue 24 section 5: a thread-per-connection server): the blocking
 * callers' hand-off to the I/O thread and back, where the callers queued
 * between two of the loop's takes sleep on one bell per cohort and one
 * wake-up rings them all (src/redis/redis_ticket.h).
 *
 * Exact outcomes against a real redis-server: 96 threads on ONE socket
 * (more than a batch holds, so cohorts are split across batches and the
 * bells wrap around many times) admit exactly each key's limit, every
 * call answered by Redis, none timed out; and callers asleep on their
 * bells when the server stops leave at their deadlines and go on once it
 * answers again (no caller sleeps past its deadline, none is left
 * asleep); and an I/O thread kept off its CPU for over a second while
 * Redis answers reads the answer before it judges the connection stuck.
 */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "redis_harness.h"
#include "redis_io_loop.h"
#include "redis_node.h"
#include "server_fixtures.h"
#include "store_redis.h"
#include "testutil.h"
#include "timeutil.h"

#define THREADS 96
#define CHECKS_EACH 40
#define KEYS 8
#define LIMIT 100            /* per key; THREADS * CHECKS_EACH / KEYS: 480 */
#define STALL_THREADS 32
#define BOUND_MS 30000       /* the conditions' bound                      */

static const char *rules =
    "[{\"rule_id\":\"sw\",\"dimension\":\"user\",\"limit\":100,"
    "\"window_seconds\":3600}]";

static rl_limiter *open_limiter(const char *timeout_ms)
{
    const char *opts[] = {"store", uri, "rules", rules, "timeout_ms",
                          timeout_ms, "redis_connections", "1",
                          "deny_cache", "0", "fleet_size", "1", NULL};

    return limiter_from(opts);
}

typedef struct crowd {
    rl_limiter *lim;
    _Atomic int admitted[KEYS], elsewhere, errors;
    _Atomic int next;
} crowd;

static void *crowd_main(void *p)
{
    crowd *c = p;
    int me = atomic_fetch_add(&c->next, 1), k = me % KEYS;
    char key[16];
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;

    snprintf(key, sizeof key, "u%d", k);
    req.user = key;
    req.cost = 1;
    for (int i = 0; i < CHECKS_EACH; i++) {
        if (rl_check(c->lim, &req, &res) != RL_OK)
            atomic_fetch_add(&c->errors, 1);
        else if (res.flags & DECIDED_ELSEWHERE)
            atomic_fetch_add(&c->elsewhere, 1);
        else if (res.allowed)
            atomic_fetch_add(&c->admitted[k], 1);
    }
    return NULL;
}

START_TEST(ninety_six_threads_on_one_socket_admit_exactly_the_limit)
{
    /* A timeout no slowed run reaches: every check must reach Redis. */
    crowd c = {.lim = open_limiter("10000")};
    pthread_t th[THREADS];
    store_redis_stats st = {0};

    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, crowd_main, &c), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&c.errors), 0);
    ck_assert_int_eq(atomic_load(&c.elsewhere), 0);
    for (int k = 0; k < KEYS; k++)
        ck_assert_int_eq(atomic_load(&c.admitted[k]), LIMIT);
    store_redis_stats_get(limiter_store(c.lim), &st);
    ck_assert_int_eq(st.checks, THREADS * CHECKS_EACH);
    ck_assert_int_eq(st.timeouts, 0);
    ck_assert_int_lt(st.batches, st.checks); /* batched, not one by one */
    rl_limiter_free(c.lim);
}
END_TEST

/* ---- a stall: callers asleep on their bells leave at their deadlines ---- */

typedef struct stall {
    rl_limiter *lim;
    _Atomic int stop, next;
    _Atomic int redis[STALL_THREADS], failed[STALL_THREADS];
} stall;

static void *stall_main(void *p)
{
    stall *s = p;
    int me = atomic_fetch_add(&s->next, 1);
    char key[16];
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;

    snprintf(key, sizeof key, "s%d", me);
    req.user = key;
    req.cost = 1;
    while (!atomic_load(&s->stop)) {
        int rc = rl_check(s->lim, &req, &res);
        if (rc == RL_OK && !(res.flags & DECIDED_ELSEWHERE))
            atomic_fetch_add(&s->redis[me], 1);
        else
            atomic_fetch_add(&s->failed[me], 1);
    }
    return NULL;
}

/* Every thread's counter in v at least `least` above base[]. */
static int all_past(_Atomic int *v, const int *base, int least)
{
    for (int i = 0; i < STALL_THREADS; i++)
        if (atomic_load(&v[i]) < base[i] + least)
            return 0;
    return 1;
}

static void wait_all_past(_Atomic int *v, const int *base, int least,
                          const char *what)
{
    int64_t end = now_ms() + BOUND_MS;

    while (!all_past(v, base, least)) {
        ck_assert_msg(now_ms() < end, "not every thread %s", what);
        sleep_ms(5);
    }
}

START_TEST(callers_asleep_in_a_stall_leave_and_go_on)
{
    stall s = {.lim = open_limiter("200")};
    pthread_t th[STALL_THREADS];
    int base[STALL_THREADS] = {0};

    for (int i = 0; i < STALL_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, stall_main, &s), 0);
    wait_all_past(s.redis, base, 5, "was answered by Redis");
    ck_assert_int_eq(rh_pause(&srv), 0);
    for (int i = 0; i < STALL_THREADS; i++)
        base[i] = atomic_load(&s.failed[i]);
    wait_all_past(s.failed, base, 2, "left at its deadline in the stall");
    ck_assert_int_eq(rh_resume(&srv), 0);
    for (int i = 0; i < STALL_THREADS; i++)
        base[i] = atomic_load(&s.redis[i]);
    wait_all_past(s.redis, base, 5, "was answered again after the stall");
    atomic_store(&s.stop, 1);
    for (int i = 0; i < STALL_THREADS; i++)
        pthread_join(th[i], NULL);
    rl_limiter_free(s.lim);
}
END_TEST

/* ---- a loop off its CPU: the replies waiting are read, not "silence" ---- */

typedef struct lone {
    rl_limiter *lim;
    rl_result res;
    int rc;
} lone;

static void *lone_main(void *p)
{
    lone *l = p;
    rl_request req = RL_REQUEST_INIT;

    req.user = "held";
    req.cost = 1;
    l->rc = rl_check(l->lim, &req, &l->res);
    return NULL;
}

/* Until a check of key "warm" is answered by Redis. */
static void await_redis_up(rl_limiter *lim)
{
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;
    int64_t end = now_ms() + BOUND_MS;

    req.user = "warm";
    req.cost = 1;
    for (;;) {
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        if (!(res.flags & DECIDED_ELSEWHERE))
            return;
        ck_assert_msg(now_ms() < end, "Redis never answered");
        sleep_ms(5);
    }
}

/* The I/O thread, kept from its next turn for over a second (what a
 * loaded host's scheduler or valgrind does to it; here the test holds the
 * queue's lock, which the loop takes at the top of each turn) while Redis
 * answers its call: the connection is not "stuck" (its answer waits in
 * the socket) and the caller gets Redis's answer.  It was replaced at the
 * loop's next turn, before the read, and the check fell back (check_threads
 * under valgrind: 659 of 3840 checks decided elsewhere). */
START_TEST(a_loop_off_its_cpu_reads_the_answer_before_judging_stuck)
{
    lone l = {.lim = open_limiter("10000"), .res = RL_RESULT_INIT};
    rio *r = rnode_io(store_redis_node(limiter_store(l.lim)));
    store_redis_stats st = {0};
    struct pollfd efd = {.fd = r->efd, .events = POLLIN};
    uint64_t one = 1;
    pthread_t th;
    int64_t end = now_ms() + BOUND_MS, sent;

    await_redis_up(l.lim);
    ck_assert_int_eq(rh_pause(&srv), 0);
    store_redis_stats_get(limiter_store(l.lim), &st);
    ck_assert_int_eq(pthread_create(&th, NULL, lone_main, &l), 0);
    for (int64_t before = st.checks; st.checks == before;) { /* sent */
        ck_assert_msg(now_ms() < end, "the check was never sent");
        sleep_ms(1);
        store_redis_stats_get(limiter_store(l.lim), &st);
    }
    sent = now_ms();
    /* The loop's next turn held: it drains the eventfd, then blocks on
     * the lock, past its last read before Redis answers. */
    pthread_mutex_lock(&r->mu);
    ck_assert_int_eq(write(r->efd, &one, sizeof one), (ssize_t)sizeof one);
    while (poll(&efd, 1, 0) == 1) {
        ck_assert_msg(now_ms() < end, "the loop never woke");
        sleep_ms(1);
    }
    ck_assert_int_eq(rh_resume(&srv), 0);
    /* Over the stuck sweep's bound (max(1 s, connect_timeout_ms)). */
    while (now_ms() - sent < 1500)
        sleep_ms(10);
    pthread_mutex_unlock(&r->mu);
    pthread_join(th, NULL);
    ck_assert_int_eq(l.rc, RL_OK);
    ck_assert_int_eq(l.res.flags & DECIDED_ELSEWHERE, 0);
    ck_assert(l.res.allowed);
    store_redis_stats_get(limiter_store(l.lim), &st);
    ck_assert_int_eq(st.stuck, 0);
    rl_limiter_free(l.lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");

    if (!rh_available()) {
        fprintf(stderr, "check_threads: redis-server not available, skipping\n");
        return 77;
    }
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, srv_up, srv_down);
    tcase_add_test(tc, ninety_six_threads_on_one_socket_admit_exactly_the_limit);
    tcase_add_test(tc, callers_asleep_in_a_stall_leave_and_go_on);
    tcase_add_test(tc, a_loop_off_its_cpu_reads_the_answer_before_judging_stuck);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
