/*
 * check_harness.c -- proof that the redis test harness does what the Redis
 * store's tests will lean on: a server that answers, AUTH, an EMPTY
 * restart on the same port after a clean stop or a crash, a pause that
 * makes commands time out rather than fail, INFO numbers, the unix socket,
 * a stop that leaves nothing behind, and servers that die with the process
 * that started them.  One server is shared through an unchecked fixture;
 * the tests that break servers start their own.  The same for Redis
 * Cluster is check_harness_cluster.c; harness_fixture.h is what both
 * share.  Exits 77 (skip) where redis-server cannot run.
 */
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness_fixture.h"
#include "redis_harness.h"
#include "timeutil.h"
#include "testutil.h"

static rh_server shared;

static void shared_up(void)
{
    ck_assert_msg(rh_start(&shared, NULL) == 0, "rh_start: see stderr");
}

static void shared_down(void)
{
    rh_stop(&shared);
}

/* Has pid exited and been reaped? */
static int pid_gone(pid_t pid)
{
    char path[64];

    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    return access(path, F_OK) != 0;
}

/* Reap pid, an orphan handed to us as subreaper, within ms: its wait
 * status, or -1 if it was not ours to reap, -2 if it is still running. */
static int reap_within(pid_t pid, long ms)
{
    long long deadline = now_ms() + ms;
    int status;

    do {
        pid_t r = waitpid(pid, &status, WNOHANG);

        if (r == pid)
            return status;
        if (r < 0)
            return pid_gone(pid) ? -1 : -2;
        usleep(10000);
    } while (now_ms() < deadline);
    return -2;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* ---- the shared server -------------------------------------------------- */

START_TEST(ping_set_get)
{
    redisContext *c = must_connect(&shared);

    expect_status(c, redisCommand(c, "PING"), "PONG");
    expect_status(c, redisCommand(c, "SET harness:k v1"), "OK");
    expect_get(c, "harness:k", "v1");
    /* enable-debug-command took: the store tests fake slowness with it. */
    expect_status(c, redisCommand(c, "DEBUG SLEEP 0"), "OK");
    redisFree(c);
}
END_TEST

START_TEST(info_numbers)
{
    ck_assert_int_gt(rh_info_int(&shared, "memory", "used_memory"), 0);
    ck_assert_int_eq(rh_info_int(&shared, "server", "process_id"), shared.pid);
    ck_assert_int_eq(rh_info_int(&shared, "server", "tcp_port"), shared.port);
    ck_assert_int_eq(rh_info_int(&shared, NULL, "tcp_port"), shared.port);
    ck_assert_int_eq(rh_info_int(&shared, "memory", "no_such_field"), -1);
    /* "1.02M" is not an integer. */
    ck_assert_int_eq(rh_info_int(&shared, "memory", "used_memory_human"), -1);
}
END_TEST

START_TEST(unix_socket)
{
    struct stat st;
    redisContext *c = redisConnectUnix(shared.unix_path);

    ck_assert_msg(c != NULL && c->err == 0, "unix %s: %s", shared.unix_path,
                  c ? c->errstr : "oom");
    expect_status(c, redisCommand(c, "PING"), "PONG");
    redisFree(c);
    ck_assert_int_eq(stat(shared.unix_path, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0700);
    ck_assert_int_eq(strncmp(shared.unix_path, shared.dir,
                             strlen(shared.dir)), 0);
}
END_TEST

START_TEST(uri_without_password)
{
    char want[64], buf[64];

    snprintf(want, sizeof want, "redis://127.0.0.1:%d/0", shared.port);
    ck_assert_str_eq(rh_uri(&shared, buf, sizeof buf), want);
    ck_assert_ptr_null(rh_uri(&shared, buf, strlen(want))); /* no room */
}
END_TEST

/* ---- servers of their own ----------------------------------------------- */

START_TEST(password_requires_auth)
{
    /* A space, a quote and an '@' test config quoting and the URI. */
    const char *pw = "s3 cr\"t@x";
    rh_server s;
    char want[128], buf[128];
    struct timeval tv = {1, 0};
    redisContext *c;
    redisReply *r;

    ck_assert_int_eq(rh_start(&s, pw), 0);
    ck_assert_str_eq(s.password, pw);
    c = redisConnectWithTimeout("127.0.0.1", s.port, tv);
    ck_assert(c != NULL && c->err == 0);
    r = redisCommand(c, "GET k");
    ck_assert(r != NULL && r->type == REDIS_REPLY_ERROR);
    ck_assert_msg(strncmp(r->str, "NOAUTH", 6) == 0, "got %s", r->str);
    freeReplyObject(r);
    r = redisCommand(c, "AUTH wrong");
    ck_assert(r != NULL && r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    redisFree(c);

    c = must_connect(&s);
    expect_status(c, redisCommand(c, "SET k v"), "OK");
    expect_get(c, "k", "v");
    redisFree(c);
    snprintf(want, sizeof want, "redis://:s3%%20cr%%22t%%40x@127.0.0.1:%d/0",
             s.port);
    ck_assert_str_eq(rh_uri(&s, buf, sizeof buf), want);
    ck_assert_int_eq(rh_stop(&s), 0);
}
END_TEST

START_TEST(restart_is_empty)
{
    rh_server s;
    redisContext *c;
    pid_t old;
    int port;

    ck_assert_int_eq(rh_start(&s, NULL), 0);
    old = s.pid;
    port = s.port;
    c = must_connect(&s);
    expect_status(c, redisCommand(c, "SET k v"), "OK");
    /* A dump on disk must not bring k back. */
    expect_status(c, redisCommand(c, "SAVE"), "OK");
    redisFree(c);

    ck_assert_int_eq(rh_restart(&s), 0);
    ck_assert_int_eq(s.port, port);
    ck_assert_int_ne(s.pid, old);
    ck_assert_int_gt(s.pid, 0);
    c = must_connect(&s);
    expect_get(c, "k", "(nil)");
    redisFree(c);
    ck_assert_int_eq(rh_info_int(&s, "server", "process_id"), s.pid);
    ck_assert_int_eq(rh_stop(&s), 0);
}
END_TEST

START_TEST(kill_then_restart)
{
    rh_server s;
    redisContext *c;
    pid_t old;
    int port;

    ck_assert_int_eq(rh_start(&s, "pw"), 0);
    old = s.pid;
    port = s.port;
    c = must_connect(&s);
    expect_status(c, redisCommand(c, "SET k v"), "OK");
    redisFree(c);

    ck_assert_int_eq(rh_kill(&s), 0);
    ck_assert_int_eq(s.pid, 0);
    ck_assert(pid_gone(old));
    ck_assert(port_refuses(port));
    ck_assert_int_eq(access(s.dir, F_OK), 0);   /* kept for the restart */
    ck_assert_int_eq(rh_kill(&s), -1);          /* nothing left to kill */

    ck_assert_int_eq(rh_restart(&s), 0);
    ck_assert_int_eq(s.port, port);
    ck_assert_str_eq(s.password, "pw");
    c = must_connect(&s);
    expect_get(c, "k", "(nil)");
    redisFree(c);
    c = redisConnectUnix(s.unix_path); /* the crash left a stale socket */
    ck_assert(c != NULL && c->err == 0);
    expect_status(c, redisCommand(c, "AUTH pw"), "OK");
    expect_status(c, redisCommand(c, "PING"), "PONG");
    redisFree(c);
    ck_assert_int_eq(rh_stop(&s), 0);
}
END_TEST

START_TEST(pause_times_out_resume_recovers)
{
    struct timeval tv = {0, 200 * 1000};
    rh_server s;
    redisContext *c;
    redisReply *r;
    long long t0, took;

    ck_assert_int_eq(rh_start(&s, NULL), 0);
    c = must_connect(&s);
    expect_status(c, redisCommand(c, "SET k v"), "OK");
    ck_assert_int_eq(redisSetTimeout(c, tv), REDIS_OK);

    ck_assert_int_eq(rh_pause(&s), 0);
    t0 = now_ms();
    r = redisCommand(c, "PING");
    took = now_ms() - t0;
    ck_assert_ptr_null(r);
    ck_assert_int_ne(c->err, 0);          /* a timeout, not a refusal: */
    ck_assert_int_ge(took, 150);          /* it waited                 */
    ck_assert_int_lt(took, 1000);
    ck_assert(!port_refuses(s.port));     /* and still accepts         */
    redisFree(c);

    ck_assert_int_eq(rh_resume(&s), 0);
    c = must_connect(&s);
    expect_get(c, "k", "v");              /* same server, same data    */
    redisFree(c);
    ck_assert_int_eq(rh_stop(&s), 0);
}
END_TEST

START_TEST(stop_refuses_and_removes_dir)
{
    rh_server s;
    pid_t pid;
    int rc, err;

    ck_assert_int_eq(rh_start(&s, NULL), 0);
    pid = s.pid;
    ck_assert_int_eq(access(s.dir, F_OK), 0);
    ck_assert_int_eq(rh_stop(&s), 0);
    ck_assert_int_eq(s.pid, 0);
    ck_assert(pid_gone(pid));
    ck_assert(port_refuses(s.port));
    rc = access(s.dir, F_OK);
    err = errno;
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(err, ENOENT);
    ck_assert_int_eq(rh_stop(&s), 0); /* twice is harmless */
    ck_assert_int_eq(rh_restart(&s), -1);
}
END_TEST

START_TEST(paused_server_still_stops)
{
    rh_server s;

    ck_assert_int_eq(rh_start(&s, NULL), 0);
    ck_assert_int_eq(rh_pause(&s), 0);
    ck_assert_int_eq(rh_stop(&s), 0);
    ck_assert(port_refuses(s.port));
}
END_TEST

static void *start_in_thread(void *arg)
{
    rh_server s;

    *(int *)arg = rh_start(&s, NULL);
    return NULL;
}

START_TEST(helper_thread_is_refused)
{
    pthread_t th;
    int rc = 0;

    ck_assert_int_eq(pthread_create(&th, NULL, start_in_thread, &rc), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(rc, -1);
}
END_TEST

/*
 * A process starts a server and ends without stopping it: by exit(), when
 * the atexit handler stops it and removes the dir, or by _exit(), when no
 * handler runs: the death signal kills it (we adopt the orphan as
 * subreaper to see how it died) and the dir stays, for us to remove.
 */
START_TEST(server_dies_with_its_process)
{
    int fds[2], status;
    rh_server s;
    pid_t child;

    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    if ((child = fork()) == 0) {
        close(fds[0]);
        if (rh_start(&s, NULL) != 0 ||
            write(fds[1], &s, sizeof s) != (ssize_t)sizeof s)
            _exit(1);
        if (_i == 0)
            exit(0);
        _exit(0);
    }
    ck_assert_int_gt(child, 0);
    close(fds[1]);
    ck_assert_int_eq(read(fds[0], &s, sizeof s), (ssize_t)sizeof s);
    close(fds[0]);
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    status = reap_within(s.pid, 2000);
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
    ck_assert(port_refuses(s.port));
    if (_i == 0) {
        ck_assert_int_eq(status, -1); /* reaped by its own process */
        ck_assert_int_eq(access(s.dir, F_OK), -1);
    } else {
        ck_assert_msg(status >= 0, "server %d outlived its process",
                      (int)s.pid);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        ck_assert_int_eq(access(s.dir, F_OK), 0);
        ck_assert_int_eq(nftw(s.dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
    }
}
END_TEST

int main(void)
{
    Suite *su = suite_create("harness");
    TCase *sh = tcase_create("shared");
    TCase *own = tcase_create("own");

    if (!rh_available()) {
        fprintf(stderr, "check_harness: SKIP: redis-server cannot be run "
                        "here (see above); the Redis tests need it\n");
        return 77;
    }
    tcase_add_unchecked_fixture(sh, shared_up, shared_down);
    tcase_add_test(sh, ping_set_get);
    tcase_add_test(sh, info_numbers);
    tcase_add_test(sh, unix_socket);
    tcase_add_test(sh, uri_without_password);
    tcase_add_test(own, password_requires_auth);
    tcase_add_test(own, restart_is_empty);
    tcase_add_test(own, kill_then_restart);
    tcase_add_test(own, pause_times_out_resume_recovers);
    tcase_add_test(own, stop_refuses_and_removes_dir);
    tcase_add_test(own, paused_server_still_stops);
    tcase_add_test(own, helper_thread_is_refused);
    tcase_add_loop_test(own, server_dies_with_its_process, 0, 2);
    /* Slow machines and valgrind: a start is ~10 ms here, not 4 s. */
    tcase_set_timeout(sh, 30);
    tcase_set_timeout(own, 30);
    suite_add_tcase(su, sh);
    suite_add_tcase(su, own);
    return run_suite(su);
}
