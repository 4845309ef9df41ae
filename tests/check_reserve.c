/*
 * check_reserve.c -- rl_reserve() and rl_settle() on every store: memory://,
 * shm://, a real redis-server (plain and compact layouts) and a real Redis
 * Cluster.  Each store runs on a hand-driven clock (the test build of the
 * script takes its time from it), set well ahead of the wall clock so no
 * key Redis keeps expires by real time under the test: every figure is
 * exact.  Refunds give back exactly the difference, a debt denies exactly
 * what it owes, a second settle (the same struct, a copy) is refused and
 * changes nothing, a settle after the window moved on refunds nothing, a
 * bucket never passes its burst, threads reserving and settling at once
 * keep the exact count, and an unsettled reservation stays charged.  The
 * Redis kinds (the cluster too) run twice: by the script, and by
 * ratelimit.so (RL.CHECK, RL.SETTLE) on servers that loaded it.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "redis_harness.h"
#include "store_redis.h"
#include "testutil.h"

extern const char rl_lua_check_test[];
extern const size_t rl_lua_check_test_len;

static const char *rules =
    "[{\"rule_id\":\"fw\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
    "\"/fw\"},\"limit\":100,\"window_seconds\":60,\"algorithm\":"
    "\"fixed_window\"},"
    "{\"rule_id\":\"tb\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
    "\"/tb\"},\"limit\":100,\"window_seconds\":100,\"algorithm\":"
    "\"token_bucket\"},"
    "{\"rule_id\":\"gc\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
    "\"/gc\"},\"limit\":100,\"window_seconds\":100,\"algorithm\":\"gcra\"},"
    "{\"rule_id\":\"sw\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
    "\"/sw\"},\"limit\":100,\"window_seconds\":60},"
    "{\"rule_id\":\"big\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
    "\"/big\"},\"limit\":1000000,\"window_seconds\":60,\"algorithm\":"
    "\"fixed_window\"},"
    "{\"rule_id\":\"u2\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
    "\"/two\"},\"limit\":100,\"window_seconds\":60,\"algorithm\":"
    "\"fixed_window\"},"
    "{\"rule_id\":\"ip2\",\"dimension\":\"ip\",\"match\":{\"endpoint\":"
    "\"/two\"},\"limit\":80,\"window_seconds\":60,\"algorithm\":"
    "\"fixed_window\"},"
    "{\"rule_id\":\"lg\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
    "\"/log\"},\"limit\":10,\"window_seconds\":60,\"mode\":\"log\"}]";

/* The stores a test runs on (Check loop index). */
enum { K_MEMORY, K_SHM, K_REDIS, K_COMPACT, K_MODULE, K_MODULE_COMPACT,
       K_CLUSTER, K_MODULE_CLUSTER, K_N };
static const char *const kind_name[] = {
    "memory", "shm", "redis", "redis compact", "redis + ratelimit.so",
    "redis compact + ratelimit.so", "redis-cluster",
    "redis-cluster + ratelimit.so"};
#define ON_REDIS(k) ((k) >= K_REDIS && (k) < K_CLUSTER)
#define ON_CLUSTER(k) ((k) >= K_CLUSTER)
#define ON_MODULE(k)                                                         \
    ((k) == K_MODULE || (k) == K_MODULE_COMPACT || (k) == K_MODULE_CLUSTER)

static rh_server srv;
static rh_cluster cl;
static char shm_name[64];
static int kind;
static const char *timeout_ms = "2000";
static const char *connect_timeout_ms; /* NULL: the default */

/* A time 10-20 minutes ahead of the wall clock, at the start of a minute
 * that is also a multiple of 100 s (both windows begin there) + 1 s. */
static int64_t future_base(void)
{
    struct timespec ts;
    int64_t now;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return (now / 600000 + 2) * 600000 + 1000;
}

/* Start the store of kind k; 0 when it cannot run here (skip). */
static int up(int k)
{
    kind = k;
    if (k == K_SHM)
        snprintf(shm_name, sizeof shm_name, "rlrsv-%ld", (long)getpid());
    /* the module kinds: settles through RL.SETTLE (its test clock) */
    rh_loadmodule = ON_MODULE(k) ? RL_MODULE_PATH " testclock" : NULL;
    if (ON_REDIS(k) && (!rh_available() || rh_start(&srv, NULL) != 0))
        return 0;
    if (ON_CLUSTER(k) &&
        (!rh_cluster_available() || rh_cluster_start(&cl, 3, 0, 2000) != 0))
        return 0;
    store_redis_test_script = rl_lua_check_test;
    store_redis_test_script_len = rl_lua_check_test_len;
    clock_set(future_base());
    return 1;
}

static void down(void)
{
    char path[80];

    if (ON_REDIS(kind))
        rh_stop(&srv);
    if (ON_CLUSTER(kind))
        rh_cluster_stop(&cl);
    if (kind == K_SHM) {
        snprintf(path, sizeof path, "/%s", shm_name);
        shm_unlink(path);
    }
}

static rl_limiter *open_kind(void)
{
    char uri[1024];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc;

    if (kind == K_MEMORY)
        snprintf(uri, sizeof uri, "memory://");
    else if (kind == K_SHM)
        snprintf(uri, sizeof uri, "shm://%s", shm_name);
    else if (ON_CLUSTER(kind))
        ck_assert_ptr_nonnull(rh_cluster_uri(&cl, 0, uri, sizeof uri));
    else
        rh_uri(&srv, uri, sizeof uri);
    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", timeout_ms), RL_OK);
    if (connect_timeout_ms)
        ck_assert_int_eq(rl_config_set(cfg, "connect_timeout_ms",
                                       connect_timeout_ms), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "deny_cache", "0"), RL_OK);
    /* One limiter deciding alone: its fallback's share is the whole limit
     * (store_away reserves all of it), not the default's limit / N. */
    ck_assert_int_eq(rl_config_set(cfg, "fleet_size", "1"), RL_OK);
    /* the module kinds through it, the others not */
    if (ON_REDIS(kind) || ON_CLUSTER(kind))
        ck_assert_int_eq(rl_config_set(cfg, "redis_command",
                                       ON_MODULE(kind) ? "module" : "lua"),
                         RL_OK);
    if (kind == K_COMPACT || kind == K_MODULE_COMPACT)
        ck_assert_int_eq(rl_config_set(cfg, "redis_layout", "compact"),
                         RL_OK);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    if (kind == K_MEMORY)
        store_memory_set_clock(limiter_store(lim), test_clock, NULL);
    else
        limiter_store(lim)->vt->set_clock(limiter_store(lim), test_clock,
                                          NULL);
    return lim;
}

static rl_request req_of(const char *ep, const char *user, int64_t cost)
{
    return (rl_request){.size = sizeof(rl_request), .endpoint = ep,
                        .user = user, .ip = "10.0.0.9", .cost = cost};
}

/* Checks of cost 1 admitted until the first denial (at most max). */
static int drain(rl_limiter *lim, const char *ep, const char *user, int max)
{
    rl_request r = req_of(ep, user, 1);
    rl_result res = RL_RESULT_INIT;
    int n = 0;

    for (; n < max; n++) {
        ck_assert_msg(rl_check(lim, &r, &res) == RL_OK, "%s",
                      rl_errmsg(lim));
        if (!res.allowed)
            break;
    }
    return n;
}

static void reserve(rl_limiter *lim, const char *ep, const char *user,
                    int64_t estimate, rl_reservation *rsv)
{
    rl_request r = req_of(ep, user, estimate);
    rl_result res = RL_RESULT_INIT;

    *rsv = (rl_reservation)RL_RESERVATION_INIT;
    ck_assert_msg(rl_reserve(lim, &r, rsv, &res) == RL_OK, "%s",
                  rl_errmsg(lim));
    ck_assert_msg(res.allowed, "%s: reserve %lld on %s denied",
                  kind_name[kind], (long long)estimate, ep);
    ck_assert_uint_eq(res.flags & (RL_FLAG_FAIL_OPEN | RL_FLAG_FALLBACK), 0);
}

static int settle(rl_limiter *lim, const char *ep, const char *user,
                  rl_reservation *rsv, int64_t actual)
{
    rl_request r = req_of(ep, user, 0);

    return rl_settle(lim, &r, rsv, actual);
}

/* The module kinds: every check and settle went as RL.CHECK and
 * RL.SETTLE, none through the script. */
static long long calls(const char *command)
{
    long long n = 0;

    if (!ON_CLUSTER(kind))
        return rh_cmdstat_calls(&srv, command);
    for (int i = 0; i < cl.n; i++) /* a cluster: over its nodes */
        n += rh_cmdstat_calls(&cl.node[i], command);
    return n;
}

static void module_only(void)
{
    if (!ON_MODULE(kind))
        return;
    ck_assert_int_gt(calls("rl.check"), 0);
    ck_assert_int_gt(calls("rl.settle"), 0);
    ck_assert_int_eq(calls("fcall") + calls("evalsha") + calls("eval"), 0);
}

#define SETTLE_OK(lim, ep, user, rsv, actual)                                \
    ck_assert_msg(settle(lim, ep, user, rsv, actual) == RL_OK, "%s: %s",     \
                  kind_name[kind], rl_errmsg(lim))

/* ---- the tests ----------------------------------------------------------- */

/* Reserve 100 of 100, settle 30: exactly 70 more pass. */
START_TEST(refund_exact)
{
    const char *eps[] = {"/fw", "/sw", "/tb", "/gc"};

    if (!up(_i))
        return;
    rl_limiter *lim = open_kind();
    for (size_t e = 0; e < 4; e++) {
        rl_reservation rsv;
        reserve(lim, eps[e], "u1", 100, &rsv);
        ck_assert_int_eq(drain(lim, eps[e], "u1", 200), 0);
        SETTLE_OK(lim, eps[e], "u1", &rsv, 30);
        ck_assert_msg(drain(lim, eps[e], "u1", 200) == 70, "%s %s: %d",
                      kind_name[kind], eps[e],
                      drain(lim, eps[e], "u1", 200));
    }
    rl_limiter_free(lim);
    module_only();
    down();
}
END_TEST

/* Settle 130 of a 100 reservation on a bucket of 1 token a second: the
 * debt of 30 denies for 30 s past empty; the 31st second pays a token. */
START_TEST(debt_denies)
{
    const char *eps[] = {"/tb", "/gc"};

    if (!up(_i))
        return;
    rl_limiter *lim = open_kind();
    for (size_t e = 0; e < 2; e++) {
        rl_reservation rsv;
        int64_t t = test_clock(NULL);
        reserve(lim, eps[e], "u2", 100, &rsv);
        SETTLE_OK(lim, eps[e], "u2", &rsv, 130);
        clock_set(t + 30000);
        ck_assert_msg(drain(lim, eps[e], "u2", 10) == 0, "%s %s",
                      kind_name[kind], eps[e]);
        clock_set(t + 31000);
        ck_assert_int_eq(drain(lim, eps[e], "u2", 10), 1);
        clock_set(t);
    }
    /* A window counts a debt up to its limit: 40 reserved, 130 used. */
    {
        rl_reservation rsv;
        reserve(lim, "/fw", "u2", 40, &rsv);
        SETTLE_OK(lim, "/fw", "u2", &rsv, 130);
        ck_assert_int_eq(drain(lim, "/fw", "u2", 10), 0);
    }
    rl_limiter_free(lim);
    down();
}
END_TEST

/* A second settle -- the same struct, a copy made before the first -- is
 * refused and changes nothing. */
START_TEST(settle_once)
{
    rl_reservation rsv, copy;

    if (!up(_i))
        return;
    rl_limiter *lim = open_kind();
    reserve(lim, "/fw", "u3", 100, &rsv);
    copy = rsv;
    SETTLE_OK(lim, "/fw", "u3", &rsv, 30);
    ck_assert_int_eq(settle(lim, "/fw", "u3", &rsv, 0), RL_ESETTLED);
    ck_assert_int_eq(settle(lim, "/fw", "u3", &copy, 0), RL_ESETTLED);
    ck_assert_int_eq(settle(lim, "/fw", "u3", &copy, 200), RL_ESETTLED);
    ck_assert_int_eq(drain(lim, "/fw", "u3", 200), 70);
    /* A debt, likewise, is charged once. */
    reserve(lim, "/tb", "u3", 50, &rsv);
    copy = rsv;
    SETTLE_OK(lim, "/tb", "u3", &rsv, 60);
    ck_assert_int_eq(settle(lim, "/tb", "u3", &copy, 60), RL_ESETTLED);
    ck_assert_int_eq(drain(lim, "/tb", "u3", 200), 40);
    rl_limiter_free(lim);
    down();
}
END_TEST

/* A fixed window that moved on gives nothing back: the new window has its
 * 100, no more. */
START_TEST(window_moved_on)
{
    rl_reservation rsv;
    int64_t t;

    if (!up(_i))
        return;
    rl_limiter *lim = open_kind();
    t = test_clock(NULL);
    reserve(lim, "/fw", "u4", 100, &rsv);
    clock_set(t + 59000); /* the next window, while the charge counts */
    SETTLE_OK(lim, "/fw", "u4", &rsv, 0);
    ck_assert_int_eq(drain(lim, "/fw", "u4", 300), 100);
    /* Past the charge's life (one window): expired, refused. */
    reserve(lim, "/fw", "u5", 100, &rsv);
    clock_set(t + 59000 + 60001);
    ck_assert_int_eq(settle(lim, "/fw", "u5", &rsv, 0), RL_ESETTLED);
    rl_limiter_free(lim);
    down();
}
END_TEST

/* Never past the bounds: a bucket refunded more than it lacks is full, not
 * more; a GCRA arrival time moved back before now counts nothing. */
START_TEST(never_past_bounds)
{
    rl_reservation rsv;
    int64_t t;

    if (!up(_i))
        return;
    rl_limiter *lim = open_kind();
    reserve(lim, "/tb", "u6", 50, &rsv);
    SETTLE_OK(lim, "/tb", "u6", &rsv, 0);
    ck_assert_int_eq(drain(lim, "/tb", "u6", 300), 100);
    t = test_clock(NULL);
    reserve(lim, "/gc", "u6", 100, &rsv);
    clock_set(t + 100000); /* the bucket is full again */
    SETTLE_OK(lim, "/gc", "u6", &rsv, 0);
    ck_assert_int_eq(drain(lim, "/gc", "u6", 300), 100);
    /* Two reservations in one window, both refunded: back to zero. */
    {
        rl_reservation a, b;
        reserve(lim, "/sw", "u7", 60, &a);
        reserve(lim, "/sw", "u7", 40, &b);
        SETTLE_OK(lim, "/sw", "u7", &a, 0);
        SETTLE_OK(lim, "/sw", "u7", &b, 0);
        ck_assert_int_eq(drain(lim, "/sw", "u7", 300), 100);
    }
    rl_limiter_free(lim);
    down();
}
END_TEST

/* Left unsettled, a reservation stays charged. */
START_TEST(unsettled_stays)
{
    rl_reservation rsv;

    if (!up(_i))
        return;
    rl_limiter *lim = open_kind();
    reserve(lim, "/fw", "u8", 60, &rsv);
    ck_assert_int_eq(drain(lim, "/fw", "u8", 300), 40);
    rl_limiter_free(lim);
    down();
}
END_TEST

/* Two rules (on a cluster, two slots): both settled, each once. */
START_TEST(two_rules)
{
    rl_reservation rsv, copy;

    if (!up(_i))
        return;
    rl_limiter *lim = open_kind();
    reserve(lim, "/two", "u9", 50, &rsv);
    copy = rsv;
    SETTLE_OK(lim, "/two", "u9", &rsv, 10);
    ck_assert_int_eq(settle(lim, "/two", "u9", &copy, 10), RL_ESETTLED);
    /* ip2 (80) decides: 70 left; u2 (100) has 90. */
    ck_assert_int_eq(drain(lim, "/two", "u9", 300), 70);
    rl_limiter_free(lim);
    module_only();
    down();
}
END_TEST

typedef struct worker {
    rl_limiter *lim;
    int seed;
    int64_t used;
    int fails;
    char why[160]; /* the first failure: which call, what it said */
} worker;

#define THREADS 4
#define ROUNDS 150

static void *work(void *arg)
{
    worker *w = arg;

    for (int i = 0; i < ROUNDS; i++) {
        rl_reservation rsv = RL_RESERVATION_INIT;
        rl_request r = req_of("/big", "many", 10);
        rl_result res = RL_RESULT_INIT;
        int64_t actual = (i * 7 + w->seed) % 21;
        int rrc = rl_reserve(w->lim, &r, &rsv, &res), src = -1;
        if (rrc != RL_OK || !res.allowed ||
            (src = rl_settle(w->lim, &r, &rsv, actual)) != RL_OK) {
            if (!w->fails++)
                snprintf(w->why, sizeof w->why,
                         "round %d: reserve %d allowed %d flags %#x, "
                         "settle %d: %s", i, rrc, res.allowed,
                         (unsigned)res.flags, src, rl_errmsg(w->lim));
            continue;
        }
        w->used += actual;
    }
    return NULL;
}

/* Threads reserving and settling at once: the count is the sum of what
 * they used, exactly. */
START_TEST(concurrent_exact)
{
    pthread_t th[THREADS];
    worker w[THREADS];
    int64_t used = 0;
    rl_request r = req_of("/big", "many", 0);
    rl_result res = RL_RESULT_INIT;

    if (!up(_i))
        return;
    /* exactness needs every call answered: a deadline, and a silence
     * before a connection counts as stuck, that no busy host reaches (the
     * timeouts' own behaviour is check_deadline's and check_redis_timing's) */
    timeout_ms = connect_timeout_ms = "10000";
    rl_limiter *lim = open_kind();
    timeout_ms = "2000";
    connect_timeout_ms = NULL;
    for (int k = 0; k < THREADS; k++) {
        w[k] = (worker){.lim = lim, .seed = k * 5};
        ck_assert_int_eq(pthread_create(&th[k], NULL, work, &w[k]), 0);
    }
    for (int k = 0; k < THREADS; k++) {
        pthread_join(th[k], NULL);
        ck_assert_msg(w[k].fails == 0, "%d calls failed; the first, %s",
                      w[k].fails, w[k].why);
        used += w[k].used;
    }
    ck_assert_int_eq(rl_check(lim, &r, &res), RL_OK);
    ck_assert_int_eq(res.remaining, 1000000 - used);
    rl_limiter_free(lim);
    down();
}
END_TEST

/* What a reservation does beside the rules: none matched, mode log only,
 * equal costs, bad arguments. */
START_TEST(edges)
{
    rl_reservation rsv = RL_RESERVATION_INIT, zero = RL_RESERVATION_INIT;
    rl_request r = req_of("/none", "u10", 5);
    rl_result res = RL_RESULT_INIT;

    if (!up(_i))
        return;
    rl_limiter *lim = open_kind();
    ck_assert_int_eq(rl_reserve(lim, &r, &rsv, &res), RL_OK);
    ck_assert(res.allowed && (res.flags & RL_FLAG_NO_RULE));
    SETTLE_OK(lim, "/none", "u10", &rsv, 9);
    reserve(lim, "/log", "u10", 5, &rsv);
    SETTLE_OK(lim, "/log", "u10", &rsv, 1);
    reserve(lim, "/fw", "u10", 5, &rsv);
    SETTLE_OK(lim, "/fw", "u10", &rsv, 5); /* no store call */
    ck_assert_int_eq(settle(lim, "/fw", "u10", &rsv, 5), RL_ESETTLED);
    ck_assert_int_eq(drain(lim, "/fw", "u10", 300), 95);
    ck_assert_int_eq(settle(lim, "/fw", "u10", &zero, 1), RL_EINVAL);
    reserve(lim, "/fw", "u11", 5, &rsv);
    ck_assert_int_eq(settle(lim, "/fw", "u11", &rsv, -1), RL_EINVAL);
    ck_assert_int_eq(settle(lim, "/fw", "u11", &rsv, RL_COST_MAX + 1),
                     RL_EINVAL);
    rsv.size = 8;
    ck_assert_int_eq(settle(lim, "/fw", "u11", &rsv, 1), RL_EINVAL);
    ck_assert_int_eq(rl_reserve(lim, &r, &rsv, &res), RL_EINVAL);
    ck_assert_int_eq(rl_settle(lim, NULL, &zero, 1), RL_EINVAL);
    /* A denied reserve leaves nothing to settle. */
    rsv = (rl_reservation)RL_RESERVATION_INIT;
    r = req_of("/fw", "u10", 50);
    ck_assert_int_eq(rl_reserve(lim, &r, &rsv, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_int_eq(settle(lim, "/fw", "u10", &rsv, 0), RL_EINVAL);
    rl_limiter_free(lim);
    down();
}
END_TEST

/* ---- the stores agree ----------------------------------------------------- */

#define LOCKSTEP 5   /* memory, redis plain and compact, each by the
                        script and by ratelimit.so                  */
#define LIVE_MAX 8   /* reservations held at once           */

static uint64_t rnd_state;

static uint64_t rnd(uint64_t n)
{
    rnd_state = rnd_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (rnd_state >> 33) % n;
}

/* One step of the random walk on every limiter: a check, a reserve, a
 * settle, or time passing.  The answers must be the same everywhere. */
static void step(rl_limiter **lim, rl_reservation (*live)[LIVE_MAX],
                 const char **live_ep, int *nlive, int s)
{
    static const char *const eps[] = {"/fw", "/sw", "/tb", "/gc"};
    /* the module's limiters on keys of their own (the same layouts) */
    static const char *const who[LOCKSTEP] = {"walk", "walk", "walk",
                                              "walkm", "walkm"};
    const char *ep = eps[rnd(4)];
    uint64_t what = rnd(10);
    rl_result res[LOCKSTEP];
    int rc[LOCKSTEP];

    if (what < 2) {
        clock_add((int64_t)rnd(8000));
        return;
    }
    if (what >= 7 && *nlive > 0) {
        int k = (int)rnd((uint64_t)*nlive);
        int64_t actual = (int64_t)rnd(90);
        for (int j = 0; j < LOCKSTEP; j++)
            rc[j] = settle(lim[j], live_ep[k], who[j], &live[j][k], actual);
        for (int j = 1; j < LOCKSTEP; j++)
            ck_assert_msg(rc[j] == rc[0], "step %d: settle %s rc %d vs %d "
                          "(%s)", s, live_ep[k], rc[j], rc[0],
                          rl_errmsg(lim[j]));
        for (int j = 0; j < LOCKSTEP; j++)
            live[j][k] = live[j][*nlive - 1];
        live_ep[k] = live_ep[--*nlive];
        return;
    }
    for (int j = 0; j < LOCKSTEP; j++) {
        rl_request r = req_of(ep, who[j], (int64_t)rnd(1) + (what < 5 ? 1 : 30));
        res[j] = (rl_result)RL_RESULT_INIT;
        if (what < 5 || *nlive == LIVE_MAX) {
            rc[j] = rl_check(lim[j], &r, &res[j]);
        } else {
            live[j][*nlive] = (rl_reservation)RL_RESERVATION_INIT;
            rc[j] = rl_reserve(lim[j], &r, &live[j][*nlive], &res[j]);
        }
        ck_assert_msg(rc[j] == RL_OK, "%s", rl_errmsg(lim[j]));
    }
    for (int j = 1; j < LOCKSTEP; j++)
        ck_assert_msg(res[j].allowed == res[0].allowed &&
                          res[j].remaining == res[0].remaining &&
                          res[j].reset_at_ms == res[0].reset_at_ms,
                      "step %d %s: store %d says %d/%lld/%lld, memory "
                      "%d/%lld/%lld", s, ep, j, res[j].allowed,
                      (long long)res[j].remaining,
                      (long long)res[j].reset_at_ms, res[0].allowed,
                      (long long)res[0].remaining,
                      (long long)res[0].reset_at_ms);
    if (what >= 5 && *nlive < LIVE_MAX && res[0].allowed)
        live_ep[(*nlive)++] = ep;
}

/* A random walk of checks, reserves, refunds, debts and time on the
 * memory store and on Redis in both layouts, by the script and by
 * ratelimit.so, in lockstep: every answer the same (the C maths,
 * lua/settle.lua and RL.SETTLE agree). */
START_TEST(stores_agree)
{
    static const int kinds[LOCKSTEP] = {K_MEMORY, K_REDIS, K_COMPACT,
                                        K_MODULE, K_MODULE_COMPACT};
    rl_limiter *lim[LOCKSTEP];
    rl_reservation live[LOCKSTEP][LIVE_MAX];
    const char *live_ep[LIVE_MAX];
    int nlive = 0;

    if (!up(K_MODULE))
        return;
    for (int j = 0; j < LOCKSTEP; j++) {
        kind = kinds[j];
        lim[j] = open_kind();
    }
    kind = K_REDIS; /* settle() asserts nothing per call here */
    rnd_state = getenv("RSV_SEED") ? strtoull(getenv("RSV_SEED"), NULL, 10) : 20261202;
    for (int s = 0; s < (getenv("RSV_STEPS") ? atoi(getenv("RSV_STEPS")) : 1500); s++)
        step(lim, live, live_ep, &nlive, s);
    ck_assert_int_gt(rh_cmdstat_calls(&srv, "rl.settle"), 0);
    for (int j = 0; j < LOCKSTEP; j++)
        rl_limiter_free(lim[j]);
    down();
}
END_TEST

/* ---- the store away ------------------------------------------------------- */

/* Until a check of cost 0 is answered by Redis again (at most 10 s). */
static void wait_up(rl_limiter *lim)
{
    rl_request r = req_of("/big", "probe", 0);
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 1000; i++) {
        ck_assert_int_eq(rl_check(lim, &r, &res), RL_OK);
        if (!(res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN)))
            return;
        usleep(10000);
    }
    ck_abort_msg("Redis did not come back");
}

/* Redis stopped (SIGSTOP): a reserve follows the rule's failure mode and
 * leaves nothing to settle; a settle fails with RL_ESTORE and, called
 * again once Redis is back, settles once -- or finds the first call
 * applied after all (RL_ESETTLED): either way the refund counts once. */
START_TEST(store_away)
{
    rl_reservation rsv, degraded = RL_RESERVATION_INIT;
    rl_request r = req_of("/fw", "u12", 100);
    rl_result res = RL_RESULT_INIT;
    int rc = RL_ESTORE;

    timeout_ms = "1000";
    if (!up(K_REDIS))
        return;
    rl_limiter *lim = open_kind();
    reserve(lim, "/fw", "u12", 100, &rsv);
    ck_assert_int_eq(rh_pause(&srv), 0);
    ck_assert_int_eq(rl_reserve(lim, &r, &degraded, &res), RL_OK);
    ck_assert(res.allowed && (res.flags & RL_FLAG_FALLBACK));
    SETTLE_OK(lim, "/fw", "u12", &degraded, 0); /* nothing to settle */
    ck_assert_int_eq(settle(lim, "/fw", "u12", &rsv, 30), RL_ESTORE);
    ck_assert_int_eq(rh_resume(&srv), 0);
    wait_up(lim);
    for (int i = 0; i < 100 && rc == RL_ESTORE; i++)
        if ((rc = settle(lim, "/fw", "u12", &rsv, 30)) == RL_ESTORE)
            usleep(20000);
    ck_assert_msg(rc == RL_OK || rc == RL_ESETTLED, "%d: %s", rc,
                  rl_errmsg(lim));
    ck_assert_int_eq(drain(lim, "/fw", "u12", 300), 70);
    rl_limiter_free(lim);
    down();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reserve");
    TCase *tc = tcase_create("stores");

    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, refund_exact, 0, K_N);
    tcase_add_loop_test(tc, debt_denies, 0, K_CLUSTER);
    tcase_add_loop_test(tc, settle_once, 0, K_N);
    tcase_add_loop_test(tc, window_moved_on, 0, K_CLUSTER);
    tcase_add_loop_test(tc, never_past_bounds, 0, K_CLUSTER);
    tcase_add_loop_test(tc, unsettled_stays, 0, K_CLUSTER);
    tcase_add_loop_test(tc, two_rules, 0, K_N);
    tcase_add_loop_test(tc, concurrent_exact, 0, K_N);
    tcase_add_loop_test(tc, edges, 0, K_CLUSTER);
    tcase_add_test(tc, stores_agree);
    tcase_add_test(tc, store_away);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
