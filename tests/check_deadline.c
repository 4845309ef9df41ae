/*
 * check_deadline.c -- a blocking check returns by its own deadline even
 * when the I/O thread is late.  Checking threads call rl_allow against a
 * SIGSTOPped server (every call waits out its whole timeout) while CPU
 * hogs (2 per core, in this process) keep the cores busy and the I/O
 * thread runs at the lowest priority (SCHED_IDLE, found by its name): it is
 * runnable but not run for a long while, as seen on busy machines
 * (check_faults with the cores loaded: the I/O thread's schedstat run
 * delay up to 1.3 s across one epoll_wait), but here for certain rather
 * than now and then.  The I/O thread used to be the only one to end a
 * caller's wait; now a caller ends it itself at its deadline + a grace.
 *
 * The server is hung with the connection's batch out, as it is a moment
 * after any SIGSTOP; the calls wait in the queue until their deadlines.
 *
 * What is measured is the time a call spent not waiting for a CPU: its
 * wall time less the calling thread's own run delay over the call (the
 * kernel's schedstat: time runnable but not running, which no library can
 * give back).  That must stay within the timeout plus BOUND_MS.  Without
 * /proc/thread-self/schedstat the wall time is used (and a busy machine
 * may then fail it for reasons of its own).
 */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

#define TIMEOUT_MS 20
/* On top of the timeout: the caller's grace (RIO_GRACE_MS, 5 ms) and the
 * futex timer's wake-up.  Not measured here: a caller also waits out the
 * I/O thread's claim of its job (the microseconds in which it reads the
 * job's ops to encode a batch, or writes its answer; redis_ticket.h),
 * and an I/O thread preempted inside one holds that job's caller until
 * it runs again.  Against a hung connection nothing is encoded or
 * answered: the calls wait in the queue, and a timeout claims nothing.
 * Sanitizer builds are 2-15x slower everywhere: there only a hang counts. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define BOUND_MS 2000
#else
#define BOUND_MS 100
#endif
#define CHECKERS 8
#define TIMEOUTS_EACH 25     /* timed-out calls each checker must see      */
#define FAULT_MAX_MS 8000    /* the condition's bound                      */

static rh_server srv;

typedef struct run {
    rl_limiter *lim;
    _Atomic int stop;
    _Atomic int64_t worst_ms, calls, redis_calls;
    _Atomic int done_checkers;
} run;

/* The calling thread's run delay so far, ns; -1 when the kernel does not
 * say. */
static int64_t run_delay_ns(void)
{
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    long long cpu, delay;
    int ok;

    if (!f)
        return -1;
    ok = fscanf(f, "%lld %lld", &cpu, &delay) == 2;
    fclose(f);
    return ok ? delay : -1;
}

/* The library's I/O threads (named "rl-io") to SCHED_IDLE; how many. */
static int renice_io_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    char path[300], comm[32];
    struct sched_param idle = {0};
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        FILE *f;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        if (fgets(comm, sizeof comm, f) && strcmp(comm, "rl-io\n") == 0 &&
            sched_setscheduler(atoi(e->d_name), SCHED_IDLE, &idle) == 0)
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

static void *hog(void *arg)
{
    run *r = arg;
    volatile uint64_t x = 0;

    while (!atomic_load_explicit(&r->stop, memory_order_relaxed))
        x++;
    return NULL;
}

static void note_worst(run *r, int64_t ms)
{
    int64_t w = atomic_load(&r->worst_ms);

    while (ms > w && !atomic_compare_exchange_weak(&r->worst_ms, &w, ms))
        ;
}

static void *checker(void *arg)
{
    run *r = arg;
    rl_result res = RL_RESULT_INIT;
    int timeouts = 0, counted = 0;

    while (!atomic_load(&r->stop)) {
        int64_t rd0 = run_delay_ns(), t0 = now_ms(), rd1, took;
        ck_assert_int_eq(rl_allow(r->lim, "user:d", "fb", 0, &res), RL_OK);
        took = now_ms() - t0;
        rd1 = run_delay_ns();
        if (rd0 >= 0 && rd1 >= rd0)
            took -= (rd1 - rd0) / 1000000;
        note_worst(r, took);
        atomic_fetch_add(&r->calls, 1);
        if (!(res.flags & RL_FLAG_FALLBACK))
            atomic_fetch_add(&r->redis_calls, 1);
        else if (++timeouts == TIMEOUTS_EACH && !counted++)
            atomic_fetch_add(&r->done_checkers, 1);
    }
    return NULL;
}

static rl_limiter *open_limiter(const char *uri)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    char t[16];

    snprintf(t, sizeof t, "%d", TIMEOUT_MS);
    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules",
                                   "[{\"rule_id\":\"fb\",\"dimension\":\"user\","
                                   "\"limit\":1000000,\"window_seconds\":60}]"),
                     RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", t), RL_OK);
    /* Every call goes to the I/O thread: the breaker does not open, and
     * the hung connection is not replaced while the test runs. */
    ck_assert_int_eq(rl_config_set(cfg, "breaker_failures", "1000"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "connect_timeout_ms", "20000"),
                     RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "redis_connections", "1"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    rl_config_free(cfg);
    return lim;
}

START_TEST(blocking_calls_keep_their_deadline_on_busy_cores)
{
    char uri[256];
    int nhogs = 2 * (int)sysconf(_SC_NPROCESSORS_ONLN);
    pthread_t hogs[64], th[CHECKERS];
    run r = {0};
    rl_result res = RL_RESULT_INIT;
    int64_t t0;

    nhogs = nhogs < 2 ? 2 : nhogs > 64 ? 64 : nhogs;
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    rh_uri(&srv, uri, sizeof uri);
    r.lim = open_limiter(uri);
    ck_assert_int_eq(rl_allow(r.lim, "user:d", "fb", 0, &res), RL_OK);
    ck_assert_int_eq(res.flags & RL_FLAG_FALLBACK, 0); /* Redis answers */
    ck_assert_int_eq(rh_pause(&srv), 0);
    /* The hang's steady state: the connection has a batch out that will
     * never be answered (any of these calls', sent while the I/O thread
     * still runs at will), so every later call waits in the queue. */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_allow(r.lim, "user:d", "fb", 0, &res), RL_OK);
        ck_assert(res.flags & RL_FLAG_FALLBACK);
    }
    ck_assert_int_eq(renice_io_threads(), 1);
    for (int i = 0; i < nhogs; i++)
        ck_assert_int_eq(pthread_create(&hogs[i], NULL, hog, &r), 0);
    for (int i = 0; i < CHECKERS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, checker, &r), 0);
    t0 = now_ms();
    while (atomic_load(&r.done_checkers) < CHECKERS &&
           now_ms() - t0 < FAULT_MAX_MS)
        sleep_ms(10);
    atomic_store(&r.stop, 1);
    for (int i = 0; i < CHECKERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < nhogs; i++)
        pthread_join(hogs[i], NULL);
    ck_assert_int_eq(rh_resume(&srv), 0);
    fprintf(stderr, "  %d hogs, %lld calls (%lld by Redis), worst %lld ms "
            "not waiting for a CPU (timeout %d ms)%s\n", nhogs,
            (long long)r.calls, (long long)r.redis_calls,
            (long long)r.worst_ms, TIMEOUT_MS,
            run_delay_ns() < 0 ? ", no schedstat: wall time" : "");
    /* The fault was real: every checker saw its calls time out. */
    ck_assert_int_eq(atomic_load(&r.done_checkers), CHECKERS);
    ck_assert_int_le(atomic_load(&r.worst_ms), TIMEOUT_MS + BOUND_MS);
    rl_limiter_free(r.lim);
    rh_stop(&srv);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("deadline");
    TCase *tc = tcase_create("deadline");

    if (!rh_available()) {
        fprintf(stderr, "check_deadline: redis-server not available\n");
        return 77;
    }
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, blocking_calls_keep_their_deadline_on_busy_cores);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
