/*
 * check_shm.c -- the shm://NAME store with real processes on one host:
 * four forked processes, each with its own limiter on one region, admit
 * exactly the limit one process would; a process killed (kill -9) while it
 * holds a segment's lock leaves the others deciding exactly (and a write
 * it was halfway through costs at most that one entry); a region that
 * does not match the opener's options, or is not a region at all, is
 * refused with the reason; a full region evicts as documented (expired
 * entries first, then counted evictions, never growing).  Every region is
 * named after the suite's pid and removed at the end, failed or not.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "limiter.h"
#include "store_shm.h"
#include "testutil.h"

#define NPROC 4
#define LIMIT 1000
/* Windows of 31 days: a bucket refills one token in 2678 s and a fixed
 * window's edge is weeks away, so nothing refills during a test. */
#define RULES                                                             \
    "[{\"rule_id\":\"fw\",\"dimension\":\"user\",\"limit\":1000,"         \
    "\"window_seconds\":2678400,\"algorithm\":\"fixed_window\"},"         \
    "{\"rule_id\":\"tb\",\"dimension\":\"user\",\"limit\":1000,"          \
    "\"window_seconds\":2678400,\"algorithm\":\"token_bucket\"},"         \
    "{\"rule_id\":\"short\",\"dimension\":\"user\",\"limit\":5,"          \
    "\"window_seconds\":1,\"algorithm\":\"fixed_window\"}]"

static char shm_name[64];
static pid_t run_pid; /* main's: the forked tests share it */
static const char *const regions[] = {"four", "kill", "torn", "mismatch",
                                      "full"};

static void name_region(const char *what)
{
    snprintf(shm_name, sizeof shm_name, "rltest-%ld-%s", (long)run_pid,
             what);
}

static void unlink_region(void)
{
    char path[80];

    snprintf(path, sizeof path, "/%s", shm_name);
    shm_unlink(path);
}

/* A limiter on shm://shm_name with RULES; NULL (and the message in msg)
 * if it cannot be made.  opt/val: one more option, or NULL. */
static rl_limiter *open_with(const char *opt, const char *val,
                             const char *opt2, const char *val2, char *msg,
                             size_t len)
{
    char uri[96];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc;

    snprintf(uri, sizeof uri, "shm://%s", shm_name);
    rc = rl_config_set(cfg, "store", uri);
    if (rc == RL_OK)
        rc = rl_config_set(cfg, "rules", RULES);
    if (rc == RL_OK && opt)
        rc = rl_config_set(cfg, opt, val);
    if (rc == RL_OK && opt2)
        rc = rl_config_set(cfg, opt2, val2);
    if (rc == RL_OK)
        rc = rl_limiter_new(&lim, cfg);
    if (rc != RL_OK && msg)
        snprintf(msg, len, "%s", rl_errmsg(NULL));
    rl_config_free(cfg);
    return rc == RL_OK ? lim : NULL;
}

static rl_limiter *open_shm(void)
{
    char msg[256];
    rl_limiter *lim = open_with(NULL, NULL, NULL, NULL, msg, sizeof msg);

    ck_assert_msg(lim != NULL, "%s", msg);
    return lim;
}

static int admit(rl_limiter *lim, const char *key, const char *rule,
                 rl_result *res)
{
    *res = (rl_result)RL_RESULT_INIT;
    if (rl_allow(lim, key, rule, 1, res) != RL_OK)
        return -1;
    return res->allowed;
}

/* A child: wait for the start (the pipe's end), open its own limiter,
 * try `tries` charges of (key, rule), report how many passed. */
static void child_charge(int start_fd, int out_fd, const char *rule,
                         int tries)
{
    char b;
    rl_limiter *lim;
    rl_result res;
    int n = 0;

    while (read(start_fd, &b, 1) > 0)
        ;
    if (!(lim = open_with(NULL, NULL, NULL, NULL, NULL, 0)))
        _exit(2);
    for (int i = 0; i < tries; i++) {
        int a = admit(lim, "k", rule, &res);
        if (a < 0)
            _exit(3);
        n += a;
    }
    rl_limiter_free(lim);
    _exit(write(out_fd, &n, sizeof n) == sizeof n ? 0 : 4);
}

/* NPROC processes, released together (they race to create the region
 * too), each trying LIMIT charges of one key: LIMIT pass in all. */
static void four_processes(const char *rule)
{
    int start[2], out[2], total = 0, n, status;
    pid_t pid[NPROC];

    ck_assert_int_eq(pipe(start), 0);
    ck_assert_int_eq(pipe(out), 0);
    for (int i = 0; i < NPROC; i++) {
        ck_assert_int_ge(pid[i] = fork(), 0);
        if (pid[i] == 0) {
            close(start[1]);
            child_charge(start[0], out[1], rule, LIMIT);
        }
    }
    close(start[0]);
    close(start[1]); /* go */
    close(out[1]);
    for (int i = 0; i < NPROC; i++) {
        ck_assert_int_eq(waitpid(pid[i], &status, 0), pid[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "child %d: status %d", i, status);
        ck_assert_int_eq(read(out[0], &n, sizeof n), (ssize_t)sizeof n);
        ck_assert_int_le(n, LIMIT);
        total += n;
    }
    close(out[0]);
    ck_assert_int_eq(total, LIMIT);
}

START_TEST(four_processes_admit_the_limit)
{
    rl_limiter *lim;
    rl_result res;

    name_region("four");
    four_processes("fw");
    four_processes("tb");
    /* a fifth process sees both spent */
    lim = open_shm();
    ck_assert_int_eq(admit(lim, "k", "fw", &res), 0);
    ck_assert_int_eq(admit(lim, "k", "tb", &res), 0);
    ck_assert_int_eq(admit(lim, "other", "fw", &res), 1);
    rl_limiter_free(lim);
    unlink_region();
}
END_TEST

/* A key other than "victim" in victim's segment. */
static void neighbour_of(rl_limiter *lim, char *buf, size_t len)
{
    rl_store *s = limiter_store(lim);
    unsigned seg = store_shm_segment_of(s, "victim", 6);

    for (int i = 0;; i++) {
        snprintf(buf, len, "n%d", i);
        if (store_shm_segment_of(s, buf, strlen(buf)) == seg)
            return;
    }
}

/* A child charges victim 10 times and its neighbour 5, takes their
 * segment's lock (torn: as if halfway through a write), and is killed
 * there; a second child is then blocked on that lock.  Returns the
 * second child's pid. */
static pid_t kill_holder(rl_limiter *lim, const char *nb, int torn)
{
    int ready[2];
    pid_t holder, waiter;
    char b = 0;
    rl_result res;

    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_ge(holder = fork(), 0);
    if (holder == 0) {
        rl_limiter *mine = open_with(NULL, NULL, NULL, NULL, NULL, 0);
        for (int i = 0; mine && i < 10; i++)
            admit(mine, "victim", "fw", &res);
        for (int i = 0; mine && i < 5; i++)
            admit(mine, nb, "fw", &res);
        store_shm_test_hold(limiter_store(mine),
                            store_shm_segment_of(limiter_store(mine),
                                                 "victim", 6), torn);
        if (write(ready[1], &b, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    ck_assert_int_eq(read(ready[0], &b, 1), 1); /* it holds the lock */
    ck_assert_int_ge(waiter = fork(), 0);
    if (waiter == 0) /* blocks on the held lock until the holder dies */
        _exit(admit(lim, "victim", "fw", &res) == 1 ? 0 : 1);
    kill(holder, SIGKILL);
    ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
    close(ready[0]);
    close(ready[1]);
    return waiter;
}

START_TEST(killed_holder_leaves_exact_limits)
{
    rl_limiter *lim;
    rl_result res;
    store_shm_stats st;
    char nb[32];
    int status, n = 0;
    pid_t waiter;

    name_region("kill");
    lim = open_shm();
    neighbour_of(lim, nb, sizeof nb);
    waiter = kill_holder(lim, nb, 0);
    ck_assert_int_eq(waitpid(waiter, &status, 0), waiter);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the waiter was not admitted: %d", status);
    /* 10 by the dead holder, 1 by the waiter: 989 left, exactly */
    while (admit(lim, "victim", "fw", &res) == 1)
        n++;
    ck_assert_int_eq(n, LIMIT - 11);
    ck_assert_int_eq(admit(lim, nb, "fw", &res), 1);
    ck_assert_int_eq(res.remaining, LIMIT - 6);
    store_shm_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.recoveries, 1);
    rl_limiter_free(lim);
    unlink_region();
}
END_TEST

/* Killed halfway through writing an entry: that one entry starts afresh,
 * every other keeps its count. */
START_TEST(torn_write_costs_one_entry)
{
    rl_limiter *lim;
    rl_result res;
    char nb[32];
    int status;
    int64_t victim_left, nb_left;
    pid_t waiter;

    name_region("torn");
    lim = open_shm();
    neighbour_of(lim, nb, sizeof nb);
    waiter = kill_holder(lim, nb, 1);
    ck_assert_int_eq(waitpid(waiter, &status, 0), waiter);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(admit(lim, "victim", "fw", &res), 1);
    victim_left = res.remaining;
    ck_assert_int_eq(admit(lim, nb, "fw", &res), 1);
    nb_left = res.remaining;
    /* victim: 10 + the waiter's 1 + this 1; neighbour: 5 + this 1; one
     * of the two was the torn entry and was dropped before the waiter */
    ck_assert_msg((victim_left == LIMIT - 2 && nb_left == LIMIT - 6) ||
                  (victim_left == LIMIT - 12 && nb_left == LIMIT - 1),
                  "victim %lld left, neighbour %lld", (long long)victim_left,
                  (long long)nb_left);
    rl_limiter_free(lim);
    unlink_region();
}
END_TEST

static void refused(const char *opt, const char *val, const char *opt2,
                    const char *val2, const char *needle)
{
    char msg[256];
    rl_limiter *lim = open_with(opt, val, opt2, val2, msg, sizeof msg);

    ck_assert_ptr_null(lim);
    ck_assert_msg(strstr(msg, needle) != NULL, "\"%s\" not in \"%s\"",
                  needle, msg);
}

#define KEY_A "000102030405060708090a0b0c0d0e0f"
#define KEY_B "ffeeddccbbaa99887766554433221100"

START_TEST(mismatched_region_refused)
{
    rl_limiter *a, *b;
    char path[80];
    int fd;

    name_region("mismatch");
    a = open_with("shm_size", "1M", "hash_key", KEY_A, NULL, 0);
    ck_assert_ptr_nonnull(a);
    refused("shm_size", "2M", "hash_key", KEY_A, "shm_size is 2097152");
    refused("shm_size", "1M", "hash_key", KEY_B, "another hash_key");
    /* without hash_key, the region's */
    b = open_with("shm_size", "1M", NULL, NULL, NULL, 0);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(store_shm_segment_of(limiter_store(a), "k", 1),
                      store_shm_segment_of(limiter_store(b), "k", 1));
    rl_limiter_free(b);
    rl_limiter_free(a);
    unlink_region();

    /* an object that is no region: never marked ready */
    snprintf(path, sizeof path, "/%s", shm_name);
    ck_assert_int_ge(fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600), 0);
    ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
    close(fd);
    refused("shm_size", "1M", NULL, NULL, "not initialised within");
    unlink_region();
}
END_TEST

START_TEST(bad_names_refused)
{
    static const char *const bad[] = {
        "shm://", "shm://a/b", "shm://.hidden", "shm://-x", "shm://a b",
        "shm://" "0123456789012345678901234567890123456789"
        "01234567890123456789012345"};
    rl_config *cfg = rl_config_new();

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(rl_config_set(cfg, "store", bad[i]) == RL_EOPTION,
                      "%s accepted", bad[i]);
    ck_assert_int_eq(rl_config_set(cfg, "store", "shm://nginx-rl_1.x"),
                     RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "shm_size", "512K"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "shm_size", "32G"), RL_EOPTION);
    rl_config_free(cfg);
}
END_TEST

/* n new clients of `rule`, each charged once. */
static void fill(rl_limiter *lim, const char *prefix, int n, const char *rule)
{
    char key[32];
    rl_result res;

    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s%d", prefix, i);
        ck_assert_int_eq(admit(lim, key, rule, &res), 1);
    }
}

START_TEST(full_region_evicts_as_documented)
{
    rl_limiter *lim;
    store_shm_stats st;
    int64_t cap_live;

    name_region("full");
    lim = open_with("shm_size", "1M", NULL, NULL, NULL, 0);
    ck_assert_ptr_nonnull(lim);
    clock_set(clock_wall_ms());
    limiter_store(lim)->vt->set_clock(limiter_store(lim), test_clock, NULL);
    store_shm_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.bytes, 1 << 20);
    cap_live = st.capacity / 256 * 85 / 100 * 256; /* 85 % per segment */

    /* Expired entries go first: 15000 short-lived clients (well under
     * any segment's mark), then 10 s on, 15000 others: no eviction. */
    fill(lim, "s", 15000, "short");
    clock_add(10000);
    fill(lim, "l", 15000, "fw");
    store_shm_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.evictions, 0);

    /* Live clients past the cap: each new one evicts one, counted. */
    fill(lim, "m", 40000, "fw");
    store_shm_stats_get(limiter_store(lim), &st);
    ck_assert_int_le(st.slots, cap_live);
    ck_assert_int_eq(st.slots + st.evictions, 15000 + 40000);
    ck_assert_int_gt(st.evictions, 40000 + 15000 - cap_live - 1);
    ck_assert_int_eq(st.bytes, 1 << 20);
    rl_limiter_free(lim);
    unlink_region();
}
END_TEST

static Suite *shm_suite(void)
{
    Suite *s = suite_create("shm");
    TCase *tc = tcase_create("shm");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, four_processes_admit_the_limit);
    tcase_add_test(tc, killed_holder_leaves_exact_limits);
    tcase_add_test(tc, torn_write_costs_one_entry);
    tcase_add_test(tc, mismatched_region_refused);
    tcase_add_test(tc, bad_names_refused);
    tcase_add_test(tc, full_region_evicts_as_documented);
    suite_add_tcase(s, tc);
    return s;
}

/* Every region, also those a failed test left behind. */
int main(void)
{
    int rc;

    run_pid = getpid();
    rc = run_suite(shm_suite());
    for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++) {
        name_region(regions[i]);
        unlink_region();
    }
    return rc;
}
