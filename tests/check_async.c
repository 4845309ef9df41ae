/*
 * check_async.c -- checks started without blocking (rl_check_start,
 * rl_async_process), on the memory store, a real redis-server and a real
 * Redis Cluster: callbacks only from rl_async_process, exact admissions
 * with many checks in flight, all-or-nothing across rules (a cluster
 * request over several masters refunds), deadlines and the failure modes
 * against a hung server (SIGSTOP), the breaker, the in-flight bound, and
 * rl_async_free with checks in flight.  The loop here is a plain poll()
 * on rl_async_fd(); the libevent and libuv adapters have their own suite.
 */
#include <check.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "server_fixtures.h"
#include "store.h"
#include "store_redis.h"
#include "timeutil.h"
#include "testutil.h"

#define RULES                                                           \
    "[{\"rule_id\":\"u\",\"dimension\":\"user\",\"limit\":10,"         \
    "\"window_seconds\":3600,\"failure_mode\":\"open\"},"               \
    " {\"rule_id\":\"ip\",\"dimension\":\"ip\",\"limit\":1000,"        \
    "\"window_seconds\":3600,\"failure_mode\":\"closed\"},"             \
    " {\"rule_id\":\"k\",\"dimension\":\"api_key\",\"limit\":1000,"     \
    "\"window_seconds\":3600,\"failure_mode\":\"fallback\"}]"

typedef struct tally {
    int calls, allowed, errors;
    unsigned flags;
} tally;

typedef struct job {
    rl_async_check chk;
    rl_result res;
    tally *t;
    int64_t started, took;
} job;

static void on_done(rl_async_check *chk, int rc)
{
    job *j = chk->data;

    j->t->calls++;
    j->took = now_ms() - j->started;
    if (rc != RL_OK) {
        j->t->errors++;
        return;
    }
    j->t->allowed += j->res.allowed;
    j->t->flags |= j->res.flags;
}

static void job_init(job *j, tally *t)
{
    *j = (job){.chk = RL_ASYNC_CHECK_INIT, .t = t, .started = now_ms()};
    j->chk.cb = on_done;
    j->chk.data = j;
    j->res = (rl_result)RL_RESULT_INIT;
    j->chk.result = &j->res;
}

static rl_limiter *open_lim(const char *store, const char *timeout,
                            const char *failures)
{
    const char *opts[] = {"store", store, "rules", RULES,
                          "timeout_ms", timeout,
                          "breaker_failures", failures,
                          "breaker_cooldown_ms", "60000", NULL};

    return limiter_from(opts);
}

/* Process completions until `want` callbacks ran or ms passed. */
static void drain(rl_async *a, tally *t, int want, int ms)
{
    int64_t until = now_ms() + ms;

    while (t->calls < want && now_ms() < until) {
        struct pollfd p = {.fd = rl_async_fd(a), .events = POLLIN};
        poll(&p, 1, 50);
        ck_assert_int_ge(rl_async_process(a), 0);
    }
}

static int readable(rl_async *a)
{
    struct pollfd p = {.fd = rl_async_fd(a), .events = POLLIN};

    return poll(&p, 1, 0) == 1;
}

/* ---- the memory store ----------------------------------------------------- */

START_TEST(memory_calls_back_from_process_only)
{
    rl_limiter *lim = open_lim("memory://", "100", "5");
    rl_request req = {.size = sizeof(rl_request), .user = "alice", .cost = 1};
    job jobs[12];
    tally t = {0};
    rl_async *a;

    ck_assert_int_eq(rl_async_new(lim, 16, &a), RL_OK);
    ck_assert(!readable(a));
    for (int i = 0; i < 12; i++) {
        job_init(&jobs[i], &t);
        ck_assert_int_eq(rl_check_start(a, &req, &jobs[i].chk), RL_OK);
    }
    ck_assert_int_eq(t.calls, 0); /* never inside the start call */
    ck_assert(readable(a));
    ck_assert_uint_eq(rl_async_in_flight(a), 12);
    ck_assert_int_eq(rl_async_process(a), 12);
    ck_assert_int_eq(t.calls, 12);
    ck_assert_int_eq(t.allowed, 10); /* limit 10 */
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(jobs[i].res.allowed, i < 10);
    ck_assert_uint_eq(rl_async_in_flight(a), 0);
    ck_assert(!readable(a));
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(memory_errors_and_bounds)
{
    rl_limiter *lim = open_lim("memory://", "100", "5");
    rl_request req = {.size = sizeof(rl_request), .user = "bob", .cost = 1};
    rl_request bad = {.size = sizeof(rl_request), .user = "b", .cost = -1};
    rl_request unsized = {.user = "bob", .cost = 1};
    rl_request none = {.size = sizeof(rl_request), .endpoint = "/x",
                       .cost = 1};
    job jobs[3];
    tally t = {0};
    rl_async *a;

    ck_assert_int_eq(rl_async_new(lim, 0, &a), RL_EINVAL);
    ck_assert_int_eq(rl_async_new(lim, 2, &a), RL_OK);
    job_init(&jobs[0], &t);
    jobs[0].chk.size = sizeof(size_t);
    ck_assert_int_eq(rl_check_start(a, &req, &jobs[0].chk), RL_EINVAL);
    job_init(&jobs[0], &t);
    ck_assert_int_eq(rl_check_start(a, &unsized, &jobs[0].chk), RL_EINVAL);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(lim), "req->size"));
    jobs[0].res.size = 0;
    ck_assert_int_eq(rl_check_start(a, &req, &jobs[0].chk), RL_EINVAL);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(lim), "RL_RESULT_INIT"));
    job_init(&jobs[0], &t);
    ck_assert_int_eq(rl_check_start(a, &bad, &jobs[0].chk), RL_EINVAL);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(lim), "cost"));
    ck_assert_int_eq(rl_check_start(a, NULL, &jobs[0].chk), RL_EINVAL);
    ck_assert_int_eq(rl_check_start(a, &none, &jobs[0].chk), RL_OK);
    job_init(&jobs[1], &t);
    ck_assert_int_eq(rl_check_start(a, &req, &jobs[1].chk), RL_OK);
    job_init(&jobs[2], &t);
    ck_assert_int_eq(rl_check_start(a, &req, &jobs[2].chk), RL_EBUSY);
    ck_assert_int_eq(rl_async_process(a), 2);
    ck_assert_int_eq(t.errors, 0);
    ck_assert(jobs[0].res.flags & RL_FLAG_NO_RULE); /* no rule: passes */
    ck_assert_int_eq(rl_check_start(a, &req, &jobs[2].chk), RL_OK);
    ck_assert_int_eq(rl_async_process(a), 1);
    ck_assert_int_eq(t.calls, 3);
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

/* A request over two rules: once one denies, the other is not charged. */
static void all_or_nothing(const char *store)
{
    rl_limiter *lim = open_lim(store, "500", "5");
    rl_request req = {.size = sizeof(rl_request), .user = "carol", .ip = "10.0.0.7", .cost = 1};
    rl_request ip_only = {.size = sizeof(rl_request), .ip = "10.0.0.7", .cost = 0};
    job jobs[15], probe;
    tally t = {0}, tp = {0};
    rl_async *a;

    ck_assert_int_eq(rl_async_new(lim, 64, &a), RL_OK);
    for (int i = 0; i < 15; i++) {
        job_init(&jobs[i], &t);
        ck_assert_int_eq(rl_check_start(a, &req, &jobs[i].chk), RL_OK);
    }
    drain(a, &t, 15, 5000);
    ck_assert_int_eq(t.calls, 15);
    ck_assert_int_eq(t.errors, 0);
    ck_assert_int_eq(t.allowed, 10);
    ck_assert_int_eq(t.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN), 0);
    /* ip charged 10 times, not 15.  A cluster gives back what the
     * passing group took in a call not waited for: wait for it to land. */
    for (int64_t until = now_ms() + 3000;;) {
        tp = (tally){0};
        job_init(&probe, &tp);
        ck_assert_int_eq(rl_check_start(a, &ip_only, &probe.chk), RL_OK);
        drain(a, &tp, 1, 5000);
        ck_assert_int_eq(tp.calls, 1);
        ck_assert_int_ge(probe.res.remaining, 1000 - 15);
        if (probe.res.remaining == 1000 - 10 || now_ms() > until)
            break;
        sleep_ms(10);
    }
    ck_assert_int_eq(probe.res.remaining, 1000 - 10);
    rl_async_free(a);
    rl_limiter_free(lim);
}

START_TEST(memory_all_or_nothing)
{
    all_or_nothing("memory://");
}
END_TEST

/* ---- answers at once (RL_ASYNC_NOW) ----------------------------------------- */

/* Alternate checks of one client answered at once (RL_ASYNC_NOW) and
 * queued (no flag): one count, the same answers either way, and the at
 * once ones never touch the descriptor (it stays unreadable: no eventfd
 * write, so no read either), take no slot and call nothing back. */
static void answers_at_once(const char *store)
{
    rl_limiter *lim = open_lim(store, "100", "5");
    rl_request req = {.size = sizeof(rl_request), .user = "carol", .cost = 1};
    tally t = {0};
    rl_async *a;

    ck_assert_int_eq(rl_async_new(lim, 1, &a), RL_OK);
    for (int i = 0; i < 12; i++) {
        job j;
        job_init(&j, &t);
        if (i % 2 == 0) {
            j.chk.flags = RL_ASYNC_NOW;
            ck_assert_int_eq(rl_check_start(a, &req, &j.chk), RL_ASYNC_DONE);
            ck_assert(!readable(a));
            ck_assert_uint_eq(rl_async_in_flight(a), 0);
            ck_assert_int_eq(rl_async_process(a), 0);
        } else {
            ck_assert_int_eq(rl_check_start(a, &req, &j.chk), RL_OK);
            ck_assert(readable(a));
            ck_assert_uint_eq(rl_async_in_flight(a), 1);
            ck_assert_int_eq(rl_async_process(a), 1);
            ck_assert(!readable(a));
        }
        ck_assert_int_eq(t.calls, (i + 1) / 2); /* the queued ones */
        ck_assert_int_eq(j.res.allowed, i < 10); /* limit 10 */
        ck_assert_int_eq(j.res.remaining, i < 10 ? 9 - i : 0);
        ck_assert_int_eq(j.res.limit, 10);
        ck_assert_str_eq(j.res.rule_id, "u");
    }
    rl_async_free(a);
    rl_limiter_free(lim);
}

START_TEST(memory_answers_at_once)
{
    answers_at_once("memory://");
}
END_TEST

START_TEST(shm_answers_at_once)
{
    char shm[96], path[64];

    snprintf(path, sizeof path, "/rl-async-now-%ld", (long)getpid());
    snprintf(shm, sizeof shm, "shm:/%s", path);
    shm_unlink(path);
    answers_at_once(shm);
    shm_unlink(path);
}
END_TEST

/* The flag is read only from a struct that has it: a 1.0 caller's size
 * keeps the queued answer whatever its memory holds past that size; an
 * answer no rule gives is at once too. */
START_TEST(memory_at_once_only_when_asked)
{
    rl_limiter *lim = open_lim("memory://", "100", "5");
    rl_request req = {.size = sizeof(rl_request), .user = "dave", .cost = 1};
    rl_request none = {.size = sizeof(rl_request), .endpoint = "/x",
                       .cost = 1};
    tally t = {0};
    job j;
    rl_async *a;

    ck_assert_int_eq(rl_async_new(lim, 4, &a), RL_OK);
    job_init(&j, &t);
    j.chk.size = RL_ASYNC_CHECK_SIZE_MIN;
    j.chk.flags = RL_ASYNC_NOW; /* past its size: not the library's */
    ck_assert_int_eq(rl_check_start(a, &req, &j.chk), RL_OK);
    ck_assert(readable(a));
    ck_assert_int_eq(rl_async_process(a), 1);
    ck_assert_int_eq(t.calls, 1);
    ck_assert_int_eq(j.res.remaining, 9);

    job_init(&j, &t);
    j.chk.flags = RL_ASYNC_NOW;
    ck_assert_int_eq(rl_check_start(a, &none, &j.chk), RL_ASYNC_DONE);
    ck_assert_int_eq(j.res.allowed, 1);
    ck_assert_uint_eq(j.res.flags & RL_FLAG_NO_RULE, RL_FLAG_NO_RULE);
    ck_assert(!readable(a));
    ck_assert_int_eq(t.calls, 1);
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

/* The limiter on store, its store on the hand clock (testutil.h). */
static rl_limiter *open_hand_clock(const char *store)
{
    rl_limiter *lim = open_lim(store, "100", "5");
    rl_store *st = limiter_store(lim);

    if (strncmp(store, "memory://", 9) == 0)
        store_memory_set_clock(st, test_clock, NULL);
    else
        st->vt->set_clock(st, test_clock, NULL);
    return lim;
}

static void assert_same_result(const rl_result *a, const rl_result *b,
                               int i)
{
    ck_assert_msg(a->allowed == b->allowed && a->flags == b->flags &&
                  a->limit == b->limit && a->remaining == b->remaining &&
                  a->reset_at == b->reset_at &&
                  a->retry_after == b->retry_after &&
                  a->window == b->window &&
                  strcmp(a->rule_id, b->rule_id) == 0 &&
                  a->retry_after_ms == b->retry_after_ms &&
                  a->reset_at_ms == b->reset_at_ms,
                  "check %d: at once %d/%lld/%lld/%lld, rl_check "
                  "%d/%lld/%lld/%lld (allowed/remaining/retry_ms/reset_ms)",
                  i, a->allowed, (long long)a->remaining,
                  (long long)a->retry_after_ms, (long long)a->reset_at_ms,
                  b->allowed, (long long)b->remaining,
                  (long long)b->retry_after_ms, (long long)b->reset_at_ms);
}

/* A store that decides in-process says so itself: every check started
 * with RL_ASYNC_NOW is RL_ASYNC_DONE with the answer rl_check gives a
 * twin limiter (its own store, the same rules and hand clock), admitted
 * and denied, into a result of this library's size (built in place) and
 * into a 1.0-sized one (copied as far as its size, the rest the
 * caller's).  A Redis store does not (redis_at_once_only_when_decided). */
static void at_once_as_rl_check(const char *store, const char *twin)
{
    rl_limiter *lim = open_hand_clock(store), *ref = open_hand_clock(twin);
    rl_request req = {.size = sizeof(rl_request), .user = "fay", .ip = "10.0.0.9", .cost = 1};
    tally t = {0};
    rl_async *a;

    clock_set(T0 + 1234);
    ck_assert_int_eq(rl_async_new(lim, 1, &a), RL_OK);
    for (int i = 0; i < 14; i++) {
        rl_result want = RL_RESULT_INIT;
        job j;

        job_init(&j, &t);
        j.chk.flags = RL_ASYNC_NOW;
        if (i % 3 == 2) { /* a 1.0 caller's result: its tail untouched */
            j.res.size = RL_RESULT_SIZE_MIN;
            j.res.retry_after_ms = j.res.reset_at_ms = -7;
        }
        ck_assert_int_eq(rl_check_start(a, &req, &j.chk), RL_ASYNC_DONE);
        ck_assert_int_eq(rl_check(ref, &req, &want), RL_OK);
        if (i % 3 == 2) {
            ck_assert(j.res.retry_after_ms == -7 && j.res.reset_at_ms == -7);
            j.res.retry_after_ms = want.retry_after_ms;
            j.res.reset_at_ms = want.reset_at_ms;
        }
        assert_same_result(&j.res, &want, i);
        ck_assert_int_eq(j.res.allowed, i < 10); /* limit 10 */
        ck_assert(!readable(a));
        ck_assert_uint_eq(rl_async_in_flight(a), 0);
        clock_add(250);
    }
    ck_assert_int_eq(t.calls, 0);
    rl_async_free(a);
    rl_limiter_free(lim);
    rl_limiter_free(ref);
}

START_TEST(memory_at_once_as_rl_check)
{
    at_once_as_rl_check("memory://", "memory://");
}
END_TEST

START_TEST(shm_at_once_as_rl_check)
{
    char shm[2][128], path[2][48];

    for (int i = 0; i < 2; i++) {
        snprintf(path[i], sizeof path[i], "/rl-async-twin%d-%ld", i,
                 (long)getpid());
        snprintf(shm[i], sizeof shm[i], "shm:/%s", path[i]);
        shm_unlink(path[i]);
    }
    at_once_as_rl_check(shm[0], shm[1]);
    for (int i = 0; i < 2; i++)
        shm_unlink(path[i]);
}
END_TEST

/* ---- one redis-server ------------------------------------------------------- */

/* Many checks in flight over many clients: exactly the limit each. */
static void many_in_flight(const char *store)
{
    enum { USERS = 40, PER = 15, N = USERS * PER };
    rl_limiter *lim = open_lim(store, "2000", "5");
    static job jobs[N];
    char names[USERS][16];
    rl_request req[USERS];
    tally t = {0};
    rl_async *a;

    ck_assert_int_eq(rl_async_new(lim, N, &a), RL_OK);
    for (int u = 0; u < USERS; u++) {
        snprintf(names[u], sizeof names[u], "user%d", u);
        req[u] = (rl_request){.size = sizeof(rl_request), .user = names[u], .cost = 1};
    }
    for (int i = 0; i < N; i++) {
        job_init(&jobs[i], &t);
        ck_assert_int_eq(rl_check_start(a, &req[i % USERS], &jobs[i].chk),
                         RL_OK);
    }
    ck_assert_uint_eq(rl_async_in_flight(a), N);
    drain(a, &t, N, 10000);
    ck_assert_int_eq(t.calls, N);
    ck_assert_int_eq(t.errors, 0);
    ck_assert_int_eq(t.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN), 0);
    ck_assert_int_eq(t.allowed, USERS * 10);
    rl_async_free(a);
    rl_limiter_free(lim);
}

/* A check that waits for Redis is started as without the flag (RL_OK,
 * called back from the descriptor); one no rule matches is answered at
 * once. */
START_TEST(redis_at_once_only_when_decided)
{
    rl_limiter *lim = open_lim(uri, "2000", "5");
    rl_request req = {.size = sizeof(rl_request), .user = "erin", .cost = 1};
    rl_request none = {.size = sizeof(rl_request), .endpoint = "/x",
                       .cost = 1};
    tally t = {0};
    job j, k;
    rl_async *a;

    ck_assert_int_eq(rl_async_new(lim, 4, &a), RL_OK);
    job_init(&j, &t);
    j.chk.flags = RL_ASYNC_NOW;
    ck_assert_int_eq(rl_check_start(a, &req, &j.chk), RL_OK);
    ck_assert_uint_eq(rl_async_in_flight(a), 1);
    job_init(&k, &t);
    k.chk.flags = RL_ASYNC_NOW;
    ck_assert_int_eq(rl_check_start(a, &none, &k.chk), RL_ASYNC_DONE);
    ck_assert_uint_eq(k.res.flags & RL_FLAG_NO_RULE, RL_FLAG_NO_RULE);
    drain(a, &t, 1, 5000);
    ck_assert_int_eq(t.calls, 1);
    ck_assert_int_eq(t.errors, 0);
    ck_assert_int_eq(j.res.allowed, 1);
    ck_assert_int_eq(j.res.remaining, 9);
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(redis_many_in_flight)
{
    many_in_flight(uri);
}
END_TEST

START_TEST(redis_all_or_nothing)
{
    all_or_nothing(uri);
}
END_TEST

/* A check started while the breaker is open is decided at once: its
 * completion is queued before rl_check_start returns (no network call).
 * The breaker's first wait is short (BREAKER_FIRST_OPEN_MS): a loaded
 * machine may reach the start after it, when the check is the breaker's
 * probe and waits for the hung server; each failed probe doubles the
 * wait, so a start within one comes after a few.  1 when one was. */
static int started_while_open(rl_async *a, const rl_request *r, job *late,
                              tally *tl)
{
    for (int i = 0; i < 10; i++) {
        int once;
        job_init(late, tl);
        ck_assert_int_eq(rl_check_start(a, r, &late->chk), RL_OK);
        once = readable(a);
        drain(a, tl, tl->calls + 1, 5000);
        ck_assert(late->res.flags & RL_FLAG_FAIL_OPEN);
        if (once)
            return 1;
    }
    return 0;
}

/* A hung server: every check completes by its deadline, decided by its
 * rule's failure mode; the three that time out together are one failure
 * to the breaker, two more a timeout apart open it, and checks then
 * complete with no wait at all. */
START_TEST(redis_deadline_failure_modes_breaker)
{
    rl_limiter *lim = open_lim(uri, "80", "3");
    rl_request open_r = {.size = sizeof(rl_request), .user = "dave", .cost = 1};
    rl_request closed_r = {.size = sizeof(rl_request), .ip = "10.1.1.1", .cost = 1};
    rl_request fb_r = {.size = sizeof(rl_request), .api_key = "k1", .cost = 1};
    job jobs[3], late;
    tally t = {0}, tl = {0};
    rl_stats st = RL_STATS_INIT;
    rl_async *a;

    ck_assert_int_eq(rl_async_new(lim, 8, &a), RL_OK);
    ck_assert_int_eq(rh_pause(&srv), 0);
    for (int i = 0; i < 3; i++)
        job_init(&jobs[i], &t);
    ck_assert_int_eq(rl_check_start(a, &open_r, &jobs[0].chk), RL_OK);
    ck_assert_int_eq(rl_check_start(a, &closed_r, &jobs[1].chk), RL_OK);
    ck_assert_int_eq(rl_check_start(a, &fb_r, &jobs[2].chk), RL_OK);
    drain(a, &t, 3, 5000);
    ck_assert_int_eq(t.calls, 3);
    ck_assert_int_eq(t.errors, 0);
    for (int i = 0; i < 3; i++) /* by the deadline, with slack for CI */
        ck_assert_msg(jobs[i].took >= 70 && jobs[i].took < 80 + 1000,
                      "check %d took %lld ms", i, (long long)jobs[i].took);
    ck_assert(jobs[0].res.allowed && (jobs[0].res.flags & RL_FLAG_FAIL_OPEN));
    ck_assert(!jobs[1].res.allowed &&
              (jobs[1].res.flags & RL_FLAG_FAIL_CLOSED));
    ck_assert(jobs[2].res.allowed && (jobs[2].res.flags & RL_FLAG_FALLBACK));
    rl_stats_get(lim, &st); /* one stall: one failure, still closed */
    ck_assert_int_eq(st.breaker_state, RL_BREAKER_CLOSED);
    for (int i = 0; i < 2; i++) { /* two more, a timeout apart: open */
        job_init(&late, &tl);
        ck_assert_int_eq(rl_check_start(a, &fb_r, &late.chk), RL_OK);
        drain(a, &tl, i + 1, 5000);
        ck_assert(late.res.flags & RL_FLAG_FALLBACK);
    }
    rl_stats_get(lim, &st);
    ck_assert_int_eq(st.breaker_state, RL_BREAKER_OPEN);
    ck_assert(started_while_open(a, &open_r, &late, &tl));
    ck_assert_int_eq(rh_resume(&srv), 0);
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

/* rl_async_free with checks in flight: it waits for them (by their
 * deadline) and calls none of their callbacks; the limiter is freed
 * after. */
START_TEST(redis_free_with_checks_in_flight)
{
    rl_limiter *lim = open_lim(uri, "200", "1000");
    rl_request req = {.size = sizeof(rl_request), .user = "erin", .cost = 1};
    job jobs[32];
    tally t = {0};
    rl_async *a;
    int64_t t0;

    ck_assert_int_eq(rl_async_new(lim, 32, &a), RL_OK);
    ck_assert_int_eq(rh_pause(&srv), 0);
    for (int i = 0; i < 32; i++) {
        job_init(&jobs[i], &t);
        ck_assert_int_eq(rl_check_start(a, &req, &jobs[i].chk), RL_OK);
    }
    t0 = now_ms();
    rl_async_free(a);
    ck_assert_int_lt(now_ms() - t0, 200 + 1500);
    ck_assert_int_eq(t.calls, 0);
    rl_limiter_free(lim);
    ck_assert_int_eq(rh_resume(&srv), 0);
}
END_TEST

/* Blocking callers and a loop context on one limiter share the limit. */
START_TEST(redis_async_and_blocking_share)
{
    rl_limiter *lim = open_lim(uri, "2000", "5");
    rl_request req = {.size = sizeof(rl_request), .user = "frank", .cost = 1};
    rl_result res = RL_RESULT_INIT;
    job jobs[8];
    tally t = {0};
    rl_async *a;
    int blocking = 0;

    ck_assert_int_eq(rl_async_new(lim, 8, &a), RL_OK);
    for (int i = 0; i < 8; i++) {
        job_init(&jobs[i], &t);
        ck_assert_int_eq(rl_check_start(a, &req, &jobs[i].chk), RL_OK);
    }
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        blocking += res.allowed;
    }
    drain(a, &t, 8, 5000);
    ck_assert_int_eq(t.calls, 8);
    ck_assert_int_eq(t.allowed + blocking, 10);
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

/* ---- a Redis Cluster ---------------------------------------------------------- */

START_TEST(cluster_many_in_flight)
{
    many_in_flight(curi);
}
END_TEST

/* The user's and the ip's counters live on different slots (different
 * masters, mostly): a denial refunds the group that passed. */
START_TEST(cluster_all_or_nothing)
{
    all_or_nothing(curi);
}
END_TEST

/* n async checks of name (cost 1; cost 0 with probe) through the loop;
 * how many were allowed, none degraded. */
static int async_round(rl_async *a, const char *name, int n, int cost,
                       rl_result *last)
{
    rl_request req = {.size = sizeof(rl_request), .user = name, .cost = cost};
    job jobs[8];
    tally t = {0};

    for (int i = 0; i < n; i++) {
        job_init(&jobs[i], &t);
        ck_assert_int_eq(rl_check_start(a, &req, &jobs[i].chk), RL_OK);
    }
    drain(a, &t, n, 5000);
    ck_assert_int_eq(t.calls, n);
    ck_assert_int_eq(t.errors, 0);
    ck_assert_msg(!(t.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN)),
                  "%s: decided without Redis (flags %x)", name, t.flags);
    *last = jobs[n - 1].res;
    return t.allowed;
}

static int other_master(int not)
{
    for (int i = 0; i < cl.n; i++)
        if (i != not && rh_cluster_is_master(&cl, i) == 1)
            return i;
    return -1;
}

/* A slot moves from its master to another while started checks go on:
 * ASK while it is half-moved (new keys created on the target, then every
 * key there), MOVED after (or the refreshed map); every check decided by
 * Redis, every count exact. */
START_TEST(cluster_reshard_follows_ask_and_moved)
{
    static const int rounds[4][2] = {{0, 4}, {0, 8}, {0, 8}, {0, 8}};
    static const int per[4] = {2, 2, 2, 3};
    char name[8][24], client[40];
    int charged[8] = {0}, src, to, n = 0;
    unsigned slot = 0;
    rl_limiter *lim = open_lim(curi, "2000", "5");
    store_redis_stats st, at_end = {0};
    rl_result last = RL_RESULT_INIT;
    rl_async *a;

    for (int k = 0, i = 0; i < 8; k++) { /* eight clients of one slot */
        snprintf(name[i], sizeof name[i], "mv%d", k);
        snprintf(client, sizeof client, "user:%s", name[i]);
        if (i == 0)
            slot = rh_key_slot(client, strlen(client));
        if (rh_key_slot(client, strlen(client)) == slot)
            i++;
    }
    src = rh_cluster_master_of(&cl, (int)slot);
    to = other_master(src);
    ck_assert_int_eq(rl_async_new(lim, 8, &a), RL_OK);
    for (int step = 0; step < 4; step++) {
        if (step == 1)
            ck_assert_int_eq(rh_cluster_migrate_begin(&cl, (int)slot, to), 0);
        if (step == 2)
            ck_assert_int_ge(rh_cluster_migrate_keys(&cl, (int)slot, 1000),
                             1);
        if (step == 3) {
            ck_assert_int_eq(rh_cluster_migrate_keys(&cl, (int)slot, 1000),
                             0);
            store_redis_stats_get(limiter_store(lim), &at_end);
            ck_assert_int_eq(rh_cluster_migrate_end(&cl, (int)slot, to), 0);
        }
        for (int i = rounds[step][0]; i < rounds[step][1]; i++) {
            n = async_round(a, name[i], per[step], 1, &last);
            ck_assert_int_eq(n, per[step]); /* all under the limit of 10 */
            charged[i] += per[step];
        }
    }
    for (int i = 0; i < 8; i++) { /* the counts, exact, on the new master */
        async_round(a, name[i], 1, 0, &last);
        ck_assert_int_eq(last.remaining, 10 - charged[i]);
    }
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_ge(st.asks, 1);
    /* MOVED is met unless the map's periodic refresh (every second) saw
     * the move before the first check after it, which a slow build (the
     * sanitizers) makes likely; the checks then went straight to the new
     * master, as the exact counts above show.  tests/check_cluster.c
     * meets MOVED for certain (a thread checking all along). */
    if (st.moved == 0)
        ck_assert_int_gt(st.refreshes, at_end.refreshes);
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("async");
    TCase *mem = tcase_create("memory");
    TCase *red = tcase_create("redis");
    TCase *clu = tcase_create("cluster");

    tcase_add_test(mem, memory_calls_back_from_process_only);
    tcase_add_test(mem, memory_errors_and_bounds);
    tcase_add_test(mem, memory_all_or_nothing);
    tcase_add_test(mem, memory_answers_at_once);
    tcase_add_test(mem, shm_answers_at_once);
    tcase_add_test(mem, memory_at_once_only_when_asked);
    tcase_add_test(mem, memory_at_once_as_rl_check);
    tcase_add_test(mem, shm_at_once_as_rl_check);
    suite_add_tcase(s, mem);
    if (rh_available()) {
        tcase_add_checked_fixture(red, srv_up, srv_down);
        tcase_set_timeout(red, 60);
        tcase_add_test(red, redis_many_in_flight);
        tcase_add_test(red, redis_at_once_only_when_decided);
        tcase_add_test(red, redis_all_or_nothing);
        tcase_add_test(red, redis_deadline_failure_modes_breaker);
        tcase_add_test(red, redis_free_with_checks_in_flight);
        tcase_add_test(red, redis_async_and_blocking_share);
        suite_add_tcase(s, red);
    }
    if (rh_cluster_available()) {
        tcase_add_checked_fixture(clu, cluster_up, cluster_down);
        tcase_set_timeout(clu, 120);
        tcase_add_test(clu, cluster_many_in_flight);
        tcase_add_test(clu, cluster_all_or_nothing);
        tcase_add_test(clu, cluster_reshard_follows_ask_and_moved);
        suite_add_tcase(s, clu);
    }
    return s;
}

int main(void)
{
    return run_suite(suite());
}
