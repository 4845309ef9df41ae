/*
 * check_faults.c -- the limiter under real server faults, with 8 threads
 * checking throughout: kill -9, SIGSTOP (a hang, not a refusal), CLIENT
 * PAUSE, DEBUG SLEEP, a restart with nothing in it, and a TCP proxy that
 * blackholes traffic.  For each: no crash, no hung thread, every check
 * answers within its timeout plus scheduling slack, the breaker opens (when the fault outlasts its bound),
 * the fallback keeps to its share of the limit, and after recovery the
 * breaker closes again.  Run by `make faults` (and .ci/run), not by
 * `make check`: each fault takes a few seconds.
 */
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "breaker.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

#define THREADS 8
#define TIMEOUT_MS 20
/* On top of the timeout: a 2-core VM running 8 checking threads, Redis
 * and often a compiler next door delays a thread that wakes at its
 * deadline by tens of ms, and by a second or more on a machine as busy
 * as CI's: a thread preempted in mid-check by 20 others waits its turn
 * (seen at load 23 on 2 cores: 516 ms with 800 ms faults, 1436 ms with
 * 3 s ones, once 2974 ms with 4 s ones; a 250 ms slack failed 5 of 8
 * tests in one run).  The bound catches what matters, a check hanging
 * on a dead server: each fault that could hang one lasts FAULT_MS, well
 * past the bound, so a check that waited for the server and not its
 * timeout takes about that long.  (How close to its deadline a blocking
 * check returns, less the time it waited for a CPU, is check_deadline's
 * to prove.)  The worst seen is printed.  Sanitizer builds (2-15x
 * slower) have the same bound. */
#define SLACK_MS 3000
#define FAULT_MS 6000
_Static_assert(FAULT_MS >= TIMEOUT_MS + SLACK_MS + 900,
               "a hung check must be told from a late one");
/* The breaker's cooldown (the connector's reconnect backoff is capped
 * at half of it, store_redis.c: a longer one slows recovery from a long
 * fault by that much). */
#define COOLDOWN_MS 200
#define BREAKER_FAILURES 5
/* The limiter's connect_timeout_ms (its default).  A blackhole's end may
 * find the connector inside a handshake that the hole swallowed, which
 * ends only at this timeout; the next one succeeds (recovery seen at
 * 2.9 s under load with a 2 s slack, before this allowance). */
#define HANDSHAKE_MS 1000

static rh_server srv;

static const char *rules =
    "[{\"rule_id\":\"fb\",\"dimension\":\"user\",\"limit\":1000000,"
    "\"window_seconds\":60},"
    " {\"rule_id\":\"share\",\"dimension\":\"user\",\"limit\":400,"
    "\"window_seconds\":3600}]";

typedef struct load {
    rl_limiter *lim;
    _Atomic int stop;
    _Atomic int64_t checks, worst_ms, errors;
    int64_t async_checks, async_worst_ms, async_errors; /* its thread's */
} load;

static void *hammer(void *arg)
{
    load *l = arg;
    rl_result res = RL_RESULT_INIT;
    char key[32];
    unsigned n = 0;

    while (!atomic_load(&l->stop)) {
        int64_t t = now_ms(), took;
        snprintf(key, sizeof key, "user:%u", n++ % 1000);
        if (rl_allow(l->lim, key, "fb", 1, &res) != RL_OK)
            atomic_fetch_add(&l->errors, 1);
        took = now_ms() - t;
        int64_t w = atomic_load(&l->worst_ms);
        while (took > w && !atomic_compare_exchange_weak(&l->worst_ms, &w, took))
            ;
        atomic_fetch_add(&l->checks, 1);
    }
    return NULL;
}

/* ---- the event loop: asynchronous checks, 32 always in flight ---------- */

#define ASYNC_IN_FLIGHT 32

typedef struct aslot {
    rl_async_check chk;
    rl_result res;
    rl_request req;
    char user[16];
    int64_t t0;
    load *l;
    rl_async *a;
} aslot;

static void async_start(aslot *s)
{
    s->t0 = now_ms();
    if (rl_check_start(s->a, &s->req, &s->chk) != RL_OK)
        s->l->async_errors++;
}

static void async_done(rl_async_check *chk, int rc)
{
    aslot *s = chk->data;
    int64_t took = now_ms() - s->t0;

    s->l->async_checks++;
    if (rc != RL_OK)
        s->l->async_errors++;
    if (took > s->l->async_worst_ms)
        s->l->async_worst_ms = took;
    if (!atomic_load(&s->l->stop))
        async_start(s);
}

static void *async_loop(void *arg)
{
    load *l = arg;
    aslot s[ASYNC_IN_FLIGHT];
    rl_async *a;

    ck_assert_int_eq(rl_async_new(l->lim, ASYNC_IN_FLIGHT, &a), RL_OK);
    for (int i = 0; i < ASYNC_IN_FLIGHT; i++) {
        s[i] = (aslot){.chk = RL_ASYNC_CHECK_INIT, .l = l, .a = a};
        snprintf(s[i].user, sizeof s[i].user, "%d", 5000 + i);
        s[i].req = (rl_request){.size = sizeof(rl_request), .user = s[i].user, .cost = 1};
        s[i].chk.cb = async_done;
        s[i].chk.data = &s[i];
        s[i].res = (rl_result)RL_RESULT_INIT;
        s[i].chk.result = &s[i].res;
        async_start(&s[i]);
    }
    while (!atomic_load(&l->stop)) {
        struct pollfd p = {.fd = rl_async_fd(a), .events = POLLIN};
        poll(&p, 1, 50);
        rl_async_process(a);
    }
    rl_async_free(a); /* the last ones are waited for, not called back */
    return NULL;
}

static rl_limiter *open_limiter(const char *store)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    char t[16], c[16], k[16], h[16];

    snprintf(t, sizeof t, "%d", TIMEOUT_MS);
    snprintf(c, sizeof c, "%d", COOLDOWN_MS);
    ck_assert_int_eq(rl_config_set(cfg, "store", store), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", t), RL_OK);
    snprintf(k, sizeof k, "%d", BREAKER_FAILURES);
    ck_assert_int_eq(rl_config_set(cfg, "breaker_failures", k), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "breaker_cooldown_ms", c), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "fleet_size", "4"), RL_OK);
    snprintf(h, sizeof h, "%d", HANDSHAKE_MS);
    ck_assert_int_eq(rl_config_set(cfg, "connect_timeout_ms", h), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    rl_config_free(cfg);
    return lim;
}

/* Wait (bounded) until a check is decided by Redis and the breaker is
 * closed; returns how long that took. */
static int64_t await_recovery(rl_limiter *lim)
{
    int64_t start = now_ms();
    rl_result res = RL_RESULT_INIT;
    rl_stats st = RL_STATS_INIT;

    for (;;) {
        ck_assert_int_eq(rl_allow(lim, "user:probe", "fb", 0, &res), RL_OK);
        rl_stats_get(lim, &st);
        if (!(res.flags & RL_FLAG_FALLBACK) &&
            st.breaker_state == RL_BREAKER_CLOSED)
            return now_ms() - start;
        ck_assert_msg(now_ms() - start < 2 * (COOLDOWN_MS + SLACK_MS),
                      "no recovery within %d ms",
                      2 * (COOLDOWN_MS + SLACK_MS));
        sleep_ms(5);
    }
}

typedef void (*fault_fn)(void *arg);

/* Run the load, inject the fault for `ms`, end it, and check the rules of
 * conduct.  recovery_ms: what the fault's end may take besides the
 * cooldown (0 but for the blackhole, below). */
static void under_fault(const char *store, fault_fn start, fault_fn stop,
                        void *arg, int ms, int64_t recovery_ms)
{
    load l = {.lim = open_limiter(store)};
    pthread_t th[THREADS], loop;
    rl_stats before = RL_STATS_INIT, during = RL_STATS_INIT;
    int64_t recovered;

    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, hammer, &l);
    pthread_create(&loop, NULL, async_loop, &l);
    sleep_ms(200);
    rl_stats_get(l.lim, &before);
    start(arg);
    sleep_ms(ms);
    rl_stats_get(l.lim, &during);
    stop(arg); /* returns when the server answers again */
    recovered = await_recovery(l.lim);
    atomic_store(&l.stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_join(loop, NULL);

    fprintf(stderr, "  %lld checks, worst %lld ms (timeout %d), breaker "
            "opened %llu, recovered in %lld ms; async %lld, worst %lld ms\n",
            (long long)l.checks, (long long)l.worst_ms, TIMEOUT_MS,
            (unsigned long long)during.breaker_opens,
            (long long)recovered, (long long)l.async_checks,
            (long long)l.async_worst_ms);
    ck_assert_int_eq(atomic_load(&l.errors), 0);
    ck_assert_int_eq(l.async_errors, 0);
    ck_assert_int_gt(l.async_checks, 0);
    ck_assert_int_le(l.async_worst_ms, TIMEOUT_MS + SLACK_MS);
    /* Back within one cooldown of the server answering again. */
    ck_assert_int_le(recovered, COOLDOWN_MS + recovery_ms + SLACK_MS);
    ck_assert_int_le(atomic_load(&l.worst_ms), TIMEOUT_MS + SLACK_MS);
    /* A fault longer than the breaker's bound (breaker.h) is an outage. */
    if (ms > (BREAKER_FAILURES - 1) * BREAKER_SLICE_MS)
        ck_assert_int_ge(during.breaker_opens, before.breaker_opens + 1);
    ck_assert_int_gt(during.fallback, before.fallback);
    rl_limiter_free(l.lim);
}

static void do_kill(void *a) { ck_assert_int_eq(rh_kill(a), 0); }
static void do_restart(void *a) { ck_assert_int_eq(rh_restart(a), 0); }
static void do_pause(void *a) { ck_assert_int_eq(rh_pause(a), 0); }
static void do_resume(void *a) { ck_assert_int_eq(rh_resume(a), 0); }

/* The end of a fault the server ends by itself (CLIENT PAUSE, DEBUG
 * SLEEP): the moment it answers a PING again.  Recovery is timed from
 * there, not from a moment the server may still be paused at. */
static void await_answer(void *a)
{
    int64_t start = now_ms();

    (void)a;
    for (;;) {
        redisContext *c = rh_connect(&srv);
        redisReply *r = NULL;
        int ok;

        if (c) {
            redisSetTimeout(c, (struct timeval){0, 50000});
            r = redisCommand(c, "PING");
        }
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r)
            freeReplyObject(r);
        if (c)
            redisFree(c);
        if (ok)
            return;
        ck_assert_msg(now_ms() - start < 10000, "the server never answered");
        sleep_ms(5);
    }
}

static void redis_cmd(const char *cmd)
{
    redisContext *c = rh_connect(&srv);
    redisReply *r;

    ck_assert_ptr_nonnull(c);
    redisSetTimeout(c, (struct timeval){0, 10000}); /* do not wait for it */
    r = redisCommand(c, cmd);
    if (r)
        freeReplyObject(r);
    redisFree(c);
}

/* Paused or asleep for FAULT_MS: the test reads its figures 200 ms
 * before the end, then waits for the server's answer. */
#define STR(x) #x
#define XSTR(x) STR(x)
static void do_client_pause(void *a)
{
    (void)a;
    redis_cmd("CLIENT PAUSE " XSTR(FAULT_MS) " ALL");
}

static void do_debug_sleep(void *a)
{
    char cmd[64];

    (void)a;
    snprintf(cmd, sizeof cmd, "DEBUG SLEEP %d.%03d", FAULT_MS / 1000,
             FAULT_MS % 1000);
    redis_cmd(cmd);
}

static void do_nothing(void *a) { (void)a; }

static char uri[256];

static void setup(void)
{
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    rh_uri(&srv, uri, sizeof uri);
}

static void teardown(void)
{
    rh_stop(&srv);
}

START_TEST(kill_9_under_load)
{
    under_fault(uri, do_kill, do_restart, &srv, FAULT_MS, 0);
}
END_TEST

START_TEST(sigstop_under_load)
{
    under_fault(uri, do_pause, do_resume, &srv, FAULT_MS, 0);
}
END_TEST

START_TEST(client_pause_under_load)
{
    under_fault(uri, do_client_pause, await_answer, NULL, FAULT_MS - 200, 0);
}
END_TEST

START_TEST(debug_sleep_under_load)
{
    under_fault(uri, do_debug_sleep, await_answer, NULL, FAULT_MS - 200, 0);
}
END_TEST

/* A restart with nothing in it: counters and the script are gone.  100 ms
 * is below the breaker's bound: it need not open. */
START_TEST(restart_empty_under_load)
{
    under_fault(uri, do_kill, do_restart, &srv, 100, 0);
}
END_TEST

/* ---- a TCP proxy that can swallow traffic ---------------------------------- */

typedef struct proxy {
    int listen_fd, port, upstream;
    _Atomic int blackhole, stop;
    pthread_t th;
} proxy;

static int connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Serves every connection in one loop.  In blackhole mode it stops reading
 * altogether, so TCP stalls as across a network partition: the client
 * sees a silent peer, not a refusal, and nothing is lost or reordered. */
static void *proxy_main(void *arg)
{
    proxy *p = arg;
    struct pollfd fds[1 + 2 * 16];
    int peer[1 + 2 * 16], n = 1;
    char buf[65536];

    fds[0] = (struct pollfd){p->listen_fd, POLLIN, 0};
    while (!atomic_load(&p->stop)) {
        if (atomic_load(&p->blackhole)) {
            sleep_ms(10);
            continue;
        }
        if (poll(fds, (nfds_t)n, 50) <= 0)
            continue;
        if ((fds[0].revents & POLLIN) && n + 2 <= 1 + 2 * 16) {
            int c = accept(p->listen_fd, NULL, NULL), u = connect_to(p->upstream);
            if (c >= 0 && u >= 0) {
                fds[n] = (struct pollfd){c, POLLIN, 0};
                peer[n++] = u;
                fds[n] = (struct pollfd){u, POLLIN, 0};
                peer[n++] = c;
            }
        }
        for (int i = 1; i < n; i++) {
            if (!(fds[i].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got > 0 &&
                send(peer[i], buf, (size_t)got, MSG_NOSIGNAL) < 0) {
                /* peer gone: a replaced connection */
            }
        }
    }
    for (int i = 1; i < n; i++)
        close(fds[i].fd);
    return NULL;
}

static void proxy_start(proxy *p, int upstream)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;

    p->upstream = upstream;
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(p->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(p->listen_fd, 16), 0);
    getsockname(p->listen_fd, (struct sockaddr *)&a, &len);
    p->port = ntohs(a.sin_port);
    pthread_create(&p->th, NULL, proxy_main, p);
}

static void hole_on(void *a) { atomic_store(&((proxy *)a)->blackhole, 1); }
static void hole_off(void *a) { atomic_store(&((proxy *)a)->blackhole, 0); }

START_TEST(blackhole_proxy_under_load)
{
    proxy p = {0};
    char via[128];

    proxy_start(&p, srv.port);
    snprintf(via, sizeof via, "redis://127.0.0.1:%d/0", p.port);
    /* FAULT_MS of silence: long enough for the connection to be declared
     * stuck and replaced; the breaker carries the checks meanwhile. */
    under_fault(via, hole_on, hole_off, &p, FAULT_MS, HANDSHAKE_MS);
    atomic_store(&p.stop, 1);
    pthread_join(p.th, NULL);
    close(p.listen_fd);
}
END_TEST

/* The fallback keeps to limit / fleet_size while Redis is away. */
START_TEST(fallback_keeps_its_share)
{
    rl_limiter *lim = open_limiter(uri);
    rl_result res = RL_RESULT_INIT;
    int ok = 0;

    ck_assert_int_eq(rh_kill(&srv), 0);
    for (int i = 0; i < 300; i++) {
        ck_assert_int_eq(rl_allow(lim, "user:share", "share", 1, &res), RL_OK);
        ck_assert(res.flags & RL_FLAG_FALLBACK);
        ok += res.allowed;
    }
    ck_assert_int_eq(ok, 100); /* 400 / fleet of 4 */
    ck_assert_int_eq(rh_restart(&srv), 0);
    rl_limiter_free(lim);
}
END_TEST

/* A Redis Cluster master killed under load (3 masters + 3 replicas, node
 * timeout 1 s, cluster-require-full-coverage no so the other masters keep
 * serving): checks on its slots time out until its breaker opens, then fall
 * back at once; its replica takes over and the store follows (the slot map
 * is refreshed as soon as checks fail); the breaker state, the worst among
 * masters that own slots, is closed again once the map has moved. */
typedef struct failover {
    rh_cluster *cl;
    int victim;
} failover;

static void do_failover(void *a)
{
    failover *f = a;

    ck_assert_int_ge(rh_cluster_failover_wait(f->cl, f->victim, 20000), 0);
}

START_TEST(cluster_master_killed_under_load)
{
    static rh_cluster cl; /* static: ~10 kB */
    char seeds[1024];
    failover f = {&cl, -1};

    ck_assert_int_eq(rh_cluster_start(&cl, 3, 1, 1000), 0);
    for (int i = 0; i < cl.n; i++) {
        redisContext *c = rh_connect(&cl.node[i]);
        ck_assert_ptr_nonnull(c);
        freeReplyObject(redisCommand(c, "CONFIG SET "
                                     "cluster-require-full-coverage no"));
        redisFree(c);
        if (f.victim < 0 && rh_cluster_is_master(&cl, i) == 1)
            f.victim = i;
    }
    ck_assert_ptr_nonnull(rh_cluster_uri(&cl, 0, seeds, sizeof seeds));
    under_fault(seeds, do_failover, do_nothing, &f, 0, 0);
    rh_cluster_stop(&cl);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");

    if (!rh_available()) {
        fprintf(stderr, "check_faults: redis-server not available\n");
        return 77;
    }
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, kill_9_under_load);
    tcase_add_test(tc, sigstop_under_load);
    tcase_add_test(tc, client_pause_under_load);
    tcase_add_test(tc, debug_sleep_under_load);
    tcase_add_test(tc, restart_empty_under_load);
    tcase_add_test(tc, blackhole_proxy_under_load);
    tcase_add_test(tc, fallback_keeps_its_share);
    if (rh_cluster_available())
        tcase_add_test(tc, cluster_master_killed_under_load);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
