/*
 * check_cluster_failover.c -- the Redis Cluster store through failovers,
 * each on a cluster of its own: a master killed (its slots resume after
 * the failover, the others never stop), a hung master taken over (its
 * keys resume at once), planned failovers (READONLY followed; only the
 * write pause of Redis past timeout_ms degrades).  Apart from
 * check_cluster.c (routing, resharding, restarts, starts) because these
 * are timed against the cluster's own timeouts, so a slowed run
 * (tests/valgrind.sh) leaves this suite out whole; cluster_fixture.h is
 * what both share.  Exits 77 (skip) without redis-cli.
 */
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "store_cluster.h"
#include "store_redis.h"
#include "testutil.h"
#include "timeutil.h"

/* See check_faults.c: a 2-core VM delays a thread waking at its deadline
 * by tens of ms; sanitizer builds check memory and races, not time. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLACK_MS 2000
#else
#define SLACK_MS 250
#endif

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- failover --------------------------------------------------------- */

typedef struct watch {
    rl_limiter *lim;
    char user[32];
    _Atomic int stop;
    _Atomic long checks, degraded, slow;
    _Atomic long late;            /* degraded after timeout_us or more   */
    int64_t timeout_us;           /* the limiter's timeout_ms, in us     */
    _Atomic int64_t last_degraded_ms, max_us;
    _Atomic int64_t since_ms;     /* set: note the first check by Redis  */
    _Atomic int64_t first_ok_ms;  /* ... after since_ms                  */
} watch;

static void *watch_main(void *arg)
{
    watch *w = arg;
    rl_result res = RL_RESULT_INIT;

    while (!atomic_load(&w->stop)) {
        int64_t t0 = mono_us();
        ck_assert_int_eq(check_one(w->lim, "/big", w->user, &res), RL_OK);
        int64_t us = mono_us() - t0;
        if (us > atomic_load(&w->max_us))
            atomic_store(&w->max_us, us);
        if (res.flags & RL_FLAG_FALLBACK) {
            if (w->timeout_us && us >= w->timeout_us)
                atomic_fetch_add(&w->late, 1);
            atomic_fetch_add(&w->degraded, 1);
            atomic_store(&w->last_degraded_ms, mono_us() / 1000);
        } else if (atomic_load(&w->since_ms) &&
                   !atomic_load(&w->first_ok_ms)) {
            atomic_store(&w->first_ok_ms, mono_us() / 1000);
        }
        atomic_fetch_add(&w->checks, 1);
        sleep_ms(1);
    }
    return NULL;
}

/* Wait (up to 20 s) until w's checks have run 300 ms with none degraded:
 * on 2 busy cores a 50 ms deadline is now and then missed by scheduling
 * alone, so a test waits for a steady start instead of asserting one.
 * Returns w's degraded count then, the baseline for what follows. */
static long wait_steady(watch *w)
{
    int64_t t0 = mono_us() / 1000;

    for (;;) {
        int64_t now = mono_us() / 1000;
        int64_t last = atomic_load(&w->last_degraded_ms);
        if (atomic_load(&w->checks) > 10 && now - (last ? last : t0) > 300)
            return atomic_load(&w->degraded);
        ck_assert_msg(now - t0 < 20000, "never steady: checks degraded");
        sleep_ms(10);
    }
}

static void config_all(const char *name, const char *value)
{
    for (int i = 0; i < cl.n; i++) {
        redisContext *ctx = rh_connect(&cl.node[i]);
        redisReply *r = ctx ? redisCommand(ctx, "CONFIG SET %s %s", name,
                                           value) : NULL;
        ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "CONFIG SET %s",
                      name);
        freeReplyObject(r);
        redisFree(ctx);
    }
}

/* Kill a master: checks on its slots fall back (fast, once the breaker
 * opens) until its replica takes over, then resume on the new master;
 * checks on the other masters never notice.  That needs
 * cluster-require-full-coverage no: by default Redis stops serving EVERY
 * slot (CLUSTERDOWN) from the moment a master is marked failed until its
 * replica is promoted (~1 s here). */
START_TEST(failover_degrades_only_the_dead_masters_keys)
{
    watch a = {0}, b = {0};
    pthread_t ta, tb;
    int from = 0, victim, other, promoted;
    int64_t killed_ms, over_ms;
    long a0, b0;
    rl_limiter *lim;
    rl_stats rs = RL_STATS_INIT;

    up(1000);
    config_all("cluster-require-full-coverage", "no");
    victim = first_master(-1);
    other = first_master(victim);
    user_where(a.user, sizeof a.user, &from, -1, victim);
    user_where(b.user, sizeof b.user, &from, -1, other);
    lim = open_with(uri, "timeout_ms", "50", "breaker_cooldown_ms", "200");
    a.lim = b.lim = lim;
    ck_assert_int_eq(pthread_create(&ta, NULL, watch_main, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, watch_main, &b), 0);
    a0 = wait_steady(&a);
    b0 = wait_steady(&b);

    killed_ms = mono_us() / 1000;
    promoted = rh_cluster_failover_wait(&cl, victim, 20000);
    ck_assert_int_ge(promoted, 0);
    over_ms = mono_us() / 1000;
    /* the new master is found by the next refresh (<= 1 s) and its
     * connections come up in the background */
    for (int i = 0; i < 300; i++) {
        if (mono_us() / 1000 - atomic_load(&a.last_degraded_ms) > 500)
            break;
        sleep_ms(10);
    }
    atomic_store(&a.stop, 1);
    atomic_store(&b.stop, 1);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    rl_stats_get(lim, &rs);
    fprintf(stderr, "failover: killed -> promoted %lld ms; checks on the "
            "dead master's slots degraded until %lld ms after the kill; "
            "other master: %ld checks, %ld degraded, max %lld us\n",
            (long long)(over_ms - killed_ms),
            (long long)(atomic_load(&a.last_degraded_ms) - killed_ms),
            atomic_load(&b.checks), atomic_load(&b.degraded),
            (long long)atomic_load(&b.max_us));
    ck_assert_int_gt(atomic_load(&a.degraded), a0);
    ck_assert_int_lt(atomic_load(&a.last_degraded_ms) - over_ms, 2500);
    /* the other master's keys are not taken down with the dead one's: at
     * most 5 % of its checks past their 50 ms (scheduling on busy cores:
     * 1.3 % was seen under TSan at load 14), where a spread failure would
     * degrade all of its checks from the kill to the promotion (~1 s of
     * the ~2-3 s watched) */
    ck_assert_int_le(atomic_load(&b.degraded) - b0,
                     atomic_load(&b.checks) / 20);
    ck_assert_int_gt(atomic_load(&b.checks), 100);
    ck_assert_int_ge(rs.breaker_opens, 1);
    /* every check answered within its timeout plus scheduling slack */
    ck_assert_int_lt(atomic_load(&a.max_us), (50 + SLACK_MS) * 1000);
    ck_assert_int_lt(atomic_load(&b.max_us), (50 + SLACK_MS) * 1000);
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}
END_TEST

/* The 1-minute load average is over twice the online cores. */
static int busy_host(void)
{
    double load = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    if (!f)
        return 0;
    if (fscanf(f, "%lf", &load) != 1)
        load = 0;
    fclose(f);
    if (load > 2.0 * (double)(cores > 0 ? cores : 1)) {
        fprintf(stderr, "busy host: load %.1f on %ld cores\n", load, cores);
        return 1;
    }
    return 0;
}

/* A hung master (SIGSTOP: connections accepted, nothing answered), the
 * first in the store's table and the node its slot map last came from,
 * is taken over by its replica (CLUSTER FAILOVER TAKEOVER): the map's
 * refreshes do not wait on the hung node (a short deadline, then it is
 * asked last), so its keys resume on the new master within ~100 ms of
 * the promotion (before: a 1 s wait per refresh on the hung node, 379 to
 * 850 ms). */
START_TEST(hung_master_taken_over_resumes_fast)
{
    watch a = {0};
    pthread_t ta;
    int from = 0, victim, replica;
    int64_t stopped_ms, promoted_ms, resumed;
    long a0;
    rl_limiter *lim;
    redisContext *ctx;
    redisReply *r;

    up(1000);
    config_all("cluster-require-full-coverage", "no");
    victim = rh_cluster_master_of(&cl, 0); /* first in the table */
    replica = rh_cluster_replica_of(&cl, victim);
    ck_assert_int_ge(replica, 0);
    user_where(a.user, sizeof a.user, &from, -1, victim);
    lim = open_with(uri, "timeout_ms", "50", NULL, NULL);
    a.lim = lim;
    ck_assert_int_eq(pthread_create(&ta, NULL, watch_main, &a), 0);
    sleep_ms(1200); /* a periodic refresh: the map came from the victim */
    a0 = wait_steady(&a);

    stopped_ms = mono_us() / 1000;
    ck_assert_int_eq(rh_pause(&cl.node[victim]), 0);
    sleep_ms(400); /* its checks time out; the map is refreshed */
    ctx = rh_connect(&cl.node[replica]);
    ck_assert_ptr_nonnull(ctx);
    r = redisCommand(ctx, "CLUSTER FAILOVER TAKEOVER");
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "TAKEOVER");
    freeReplyObject(r);
    for (;;) { /* promoted: it says so itself */
        int master = 0;
        r = redisCommand(ctx, "ROLE");
        ck_assert_ptr_nonnull(r);
        master = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                 strcmp(r->element[0]->str, "master") == 0;
        freeReplyObject(r);
        if (master)
            break;
        ck_assert_msg(mono_us() / 1000 - stopped_ms < 10000, "no takeover");
        sleep_ms(1);
    }
    promoted_ms = mono_us() / 1000;
    redisFree(ctx);
    atomic_store(&a.since_ms, promoted_ms);
    while (!atomic_load(&a.first_ok_ms)) {
        ck_assert_msg(mono_us() / 1000 - promoted_ms < 10000,
                      "the keys never resumed");
        sleep_ms(1);
    }
    resumed = atomic_load(&a.first_ok_ms) - promoted_ms;
    atomic_store(&a.stop, 1);
    pthread_join(ta, NULL);
    fprintf(stderr, "hung master taken over: stopped -> promoted %lld ms; "
            "promoted -> its keys decided by Redis again %lld ms\n",
            (long long)(promoted_ms - stopped_ms), (long long)resumed);
    ck_assert_int_gt(atomic_load(&a.degraded), a0);
    /* The bound is the defect's measure (a refresh waiting 1 s on the hung
     * node).  On a host busier than twice its cores (513 ms seen at load
     * 15 on 2 cores) scheduling alone passes it: then it is only printed. */
    if (!busy_host())
        ck_assert_int_le(resumed, 100 + SLACK_MS);
    rl_limiter_free(lim);
    ck_assert_int_eq(rh_resume(&cl.node[victim]), 0);
    rh_cluster_stop(&cl);
}
END_TEST

/* Wait (up to 20 s) until replica i is in sync with its master, as an
 * operator does before a planned failover: its link up, no sync running,
 * and its offset the master's (a failover to a replica still loading
 * pauses the master's writes until it has caught up: seconds). */
static void wait_in_sync(int i, int master)
{
    int64_t t0 = mono_us() / 1000;

    for (;; sleep_ms(20)) {
        long long mo = -1, ro = -2;
        int up = 0;
        for (int k = 0; k < 2; k++) {
            redisContext *ctx = rh_connect(&cl.node[k ? i : master]);
            redisReply *r = ctx ? redisCommand(ctx, "INFO replication")
                                : NULL;
            const char *at;
            if (r && r->type == REDIS_REPLY_STRING) {
                if (k)
                    up = strstr(r->str, "master_link_status:up") &&
                         strstr(r->str, "master_sync_in_progress:0");
                if ((at = strstr(r->str, "master_repl_offset:")))
                    *(k ? &ro : &mo) = atoll(at + 19);
            }
            freeReplyObject(r);
            if (ctx)
                redisFree(ctx);
        }
        if (up && mo == ro)
            return;
        ck_assert_msg(mono_us() / 1000 - t0 < 20000, "replica never synced");
    }
}

/* A planned failover (CLUSTER FAILOVER on a replica, in sync) under
 * load, five times (back and forth), 8 threads checking: the demoted
 * master answers its old clients' calls with READONLY, and with MOVED once
 * keys are declared, both redirects, never failures, so no check
 * degrades for the library's sake and no breaker opens.  The timeout is
 * long enough that the master's write pause (from the failover's start
 * until it learns it was replaced: 34-119 ms measured here, longer on
 * busy cores) never times a check out: a READONLY taken for a failure
 * would degrade at once, whatever the timeout.  With timeout_ms 50 the
 * pause itself degrades a few checks per failover (0-16 seen; issue 23's
 * note): Redis's pause, not a redirect missed, and no bound on it holds on
 * a loaded machine.
 *
 * The demoted master also answers CLUSTERDOWN for ~150 ms as it turns
 * replica ("Cluster state changed: fail", then "ok", in its log alone,
 * no node failing): 4 to 142 checks of one round degraded so in 2 of 7
 * runs here (39 in the CI run that failed).  After its READONLY that is
 * no master's verdict, and the check follows the map to the slot's new
 * master (store_cluster.c); after a "not here" it cannot be told from a
 * master's, and counts as one below.
 *
 * Two causes of a degraded check are Redis's or the machine's, not the
 * library's, and each is counted where it happens instead of assumed
 * away: a master's CLUSTERDOWN (the store's `clusterdown`), whose
 * documented outcome is the failure modes (ratelimit(3), "Redirects"),
 * and a check that degraded only after its whole timeout.  A master
 * answers CLUSTERDOWN when Redis's failure detector, which a loaded
 * 2-core machine trips with this cluster-node-timeout of 1 s, marks a
 * node failing: every node then refuses keyed commands for ~1 s
 * ("Marking node ... as failing (quorum reached)", "Cluster state
 * changed: fail" in every node's log; 599 checks in one round under
 * ThreadSanitizer at load 18).  Any other degraded check fails the test:
 * an error reply not followed, a redirect ping-pong, a connection given
 * up. */
START_TEST(planned_failovers_degrade_nothing)
{
    enum { W = 8, ROUNDS = 5 };
    watch w[W];
    pthread_t th[W];
    int from = 0, victim, replica;
    long checks = 0, degraded = 0;
    int64_t t0, took[ROUNDS];
    rl_limiter *lim;
    rl_stats rs = RL_STATS_INIT;

    up(1000);
    victim = rh_cluster_master_of(&cl, 0);
    replica = rh_cluster_replica_of(&cl, victim);
    ck_assert_int_ge(replica, 0);
    lim = open_with(uri, "timeout_ms", "2000", NULL, NULL);
    for (int i = 0; i < W; i++) {
        w[i] = (watch){.lim = lim, .timeout_us = 2000 * 1000};
        /* six on the victim's keys, two elsewhere */
        user_where(w[i].user, sizeof w[i].user, &from, -1,
                   i < 6 ? victim : first_master(victim));
        ck_assert_int_eq(pthread_create(&th[i], NULL, watch_main, &w[i]), 0);
    }
    for (int k = 0; k < ROUNDS; k++) {
        long before = 0, late = 0, down;
        int done = 0, tmp;
        store_redis_stats s0, s1;
        redisContext *ctx;
        redisReply *r;
        wait_in_sync(replica, victim);
        /* a master votes for one failover of a given master per twice
         * the node timeout (2 s here): sooner, the failover waits for
         * votes with the master's writes paused (1.7 s once) */
        while (k && mono_us() / 1000 - t0 < 2500)
            sleep_ms(50);
        for (int i = 0; i < W; i++) {
            before += wait_steady(&w[i]);
            late -= atomic_load(&w[i].late);
        }
        store_redis_stats_get(limiter_store(lim), &s0);
        ctx = rh_connect(&cl.node[replica]);
        ck_assert_ptr_nonnull(ctx);
        r = redisCommand(ctx, "CLUSTER FAILOVER");
        ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "CLUSTER FAILOVER");
        freeReplyObject(r);
        redisFree(ctx);
        for (t0 = mono_us() / 1000; !done; sleep_ms(10)) {
            done = rh_cluster_is_master(&cl, replica) == 1 &&
                   rh_cluster_is_master(&cl, victim) == 0;
            ck_assert_msg(mono_us() / 1000 - t0 < 10000, "no failover");
        }
        took[k] = mono_us() / 1000 - t0;
        sleep_ms(500); /* the old clients meet the demoted master, move */
        for (int i = 0; i < W; i++) {
            before -= atomic_load(&w[i].degraded);
            late += atomic_load(&w[i].late);
        }
        store_redis_stats_get(limiter_store(lim), &s1);
        down = (long)(s1.clusterdown - s0.clusterdown);
        fprintf(stderr, "planned failover %d: %lld ms, %ld degraded (%ld "
                "by a master's CLUSTERDOWN, %ld after the whole timeout)\n", k,
                (long long)took[k], -before, down, late);
        ck_assert_msg(-before <= down + late, "failover %d: %ld checks "
                      "degraded in %lld ms, %ld by a master's CLUSTERDOWN, "
                      "%ld after the timeout", k, -before, (long long)took[k],
                      down, late);
        degraded += -before;
        tmp = victim; /* and back again */
        victim = replica;
        replica = tmp;
    }
    for (int i = 0; i < W; i++) {
        atomic_store(&w[i].stop, 1);
        pthread_join(th[i], NULL);
        checks += atomic_load(&w[i].checks);
    }
    rl_stats_get(lim, &rs);
    fprintf(stderr, "planned failovers: %d; %ld checks, %ld degraded, "
            "breaker opened %llu, store errors %llu\n", ROUNDS, checks,
            degraded, (unsigned long long)rs.breaker_opens,
            (unsigned long long)rs.store_errors);
    ck_assert_int_gt(checks, 100);
    ck_assert_int_eq(rs.breaker_opens, 0);
    /* what the test is about happened: old clients met a demoted master */
    {
        store_redis_stats st;
        store_redis_stats_get(limiter_store(lim), &st);
        fprintf(stderr, "planned failovers: READONLY met %lld, MOVED %lld\n",
                (long long)st.elsewhere, (long long)st.moved);
        ck_assert_int_gt(st.elsewhere + st.moved, 0);
    }
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cluster_failover");
    TCase *tc = tcase_create("failover");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, failover_degrades_only_the_dead_masters_keys);
    tcase_add_test(tc, hung_master_taken_over_resumes_fast);
    tcase_add_test(tc, planned_failovers_degrade_nothing);
    suite_add_tcase(s, tc);
    return s;
}


int main(void)
{
    if (!rh_cluster_available())
        return 77;
    return run_suite(suite());
}
