/*
 * check_rules_source_local.c -- live rules without a server: the option
 * rules_source on real files (writes and renames followed, the stat
 * backstop), the options' checks, rl_rules_status_get() on every path,
 * the log hook (stderr by default, NULL silences, refusals logged at a
 * bounded rate), and the rule-loading fixes that came with it (a FIFO, a
 * version at INT64_MAX, a huge file, the exact size cap).  Apart from
 * check_rules_source.c (the same option against real redis-servers)
 * because these need none; rules_source_fixture.h is what both share.
 * Every wait is for a condition, with a deadline.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dryrun_report.h"
#include "rules_load.h"
#include "rules_source_fixture.h"
#include "testutil.h"
#include "timeutil.h"

/* ---- file: ---------------------------------------------------------------- */

START_TEST(file_source_follows_writes_and_renames)
{
    char file[128], tmp[160], buf[512];
    rl_config *cfg;
    rl_limiter *lim;
    rl_rules_status st;
    int64_t took;

    snprintf(file, sizeof file, "%s/rules.json", tmpdir);
    snprintf(tmp, sizeof tmp, "%s/.rules.json.new", tmpdir);
    write_file(file, set_json(buf, sizeof buf, -1, 10)); /* no version */
    snprintf(buf, sizeof buf, "file:%s", file);
    cfg = source_config(buf);
    /* the stat backstop only hourly: changes must come through inotify */
    ck_assert_int_eq(rl_config_set(cfg, "rules_refresh_s", "3600"), RL_OK);
    lim = open_with(cfg);
    ck_assert_int_eq(rl_rules_version(lim), 1);
    ck_assert_int_eq(enforced(lim), 10);
    /* written in place */
    write_file(file, set_json(buf, sizeof buf, -1, 4));
    took = wait_enforced(lim, 4, now_ms(), 5000 * SLOW);
    printf("file: in-place write seen after %lld ms\n", (long long)took);
    ck_assert_int_ge(took, 0);
    ck_assert_int_eq(rl_rules_version(lim), 2); /* current + 1 */
    /* the same text again (a touch): nothing to take */
    write_file(file, set_json(buf, sizeof buf, -1, 4));
    /* replaced by rename, as editors do; with a version this time */
    write_file(tmp, set_json(buf, sizeof buf, 10, 3));
    ck_assert_int_eq(rename(tmp, file), 0);
    took = wait_enforced(lim, 3, now_ms(), 5000 * SLOW);
    printf("file: rename-replace seen after %lld ms\n", (long long)took);
    ck_assert_int_ge(took, 0);
    ck_assert_int_eq(rl_rules_version(lim), 10);
    /* an older version, then a broken file: refused, the set stays */
    write_file(file, set_json(buf, sizeof buf, 9, 1));
    wait_refusals(lim, 0, 1);
    write_file(file, "{\"version\": 11, ");
    wait_refusals(lim, 1, 1);
    st = status(lim);
    ck_assert_int_eq(st.version, 10);
    ck_assert_int_eq(st.loads, 3);
    ck_assert_int_eq(st.origin, RL_RULES_FROM_SOURCE);
    ck_assert_int_eq(enforced(lim), 3);
    rl_limiter_free(lim);
}
END_TEST

/* A write inotify cannot see (through a hard link in another directory:
 * the event goes to that directory) is found by the stat backstop. */
START_TEST(file_source_stat_backstop)
{
    char dir[128], file[160], alias[160], buf[512], src[200];
    rl_config *cfg;
    rl_limiter *lim;
    int64_t took;

    snprintf(dir, sizeof dir, "%s/watched", tmpdir);
    snprintf(file, sizeof file, "%s/rules.json", dir);
    snprintf(alias, sizeof alias, "%s/alias.json", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_file(file, set_json(buf, sizeof buf, 1, 10));
    ck_assert_int_eq(link(file, alias), 0);
    snprintf(src, sizeof src, "file:%s", file);
    cfg = source_config(src);
    ck_assert_int_eq(rl_config_set(cfg, "rules_refresh_s", "1"), RL_OK);
    lim = open_with(cfg);
    ck_assert_int_eq(enforced(lim), 10);
    write_file(alias, set_json(buf, sizeof buf, 2, 5)); /* same inode */
    took = wait_enforced(lim, 5, now_ms(), 5000 * SLOW);
    printf("file: a write inotify does not report, seen after %lld ms "
           "(stat every 1 s)\n", (long long)took);
    ck_assert_int_ge(took, 0);
    rl_limiter_free(lim);
}
END_TEST

/* ---- options, status, the log hook (no server) -------------------------------- */

START_TEST(options_are_checked)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_config_set(cfg, "rules_source", "file:"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "rules_source", "http://x"),
                     RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "rules_source",
                                   "redis-cluster://127.0.0.1:7000"),
                     RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "rules_key", "a b"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "rules_key", ""), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "rules_key", "fleet:rules"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules_refresh_s", "0"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "rules_refresh_s", "86401"),
                     RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "rules_refresh_s", "86400"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules_push", "2"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "rules_file_save", "1"), RL_OK);
    ck_assert_int_eq(rl_config_set_log(NULL, capture, NULL), RL_EINVAL);
    /* "store" on a memory store names no server */
    ck_assert_int_eq(rl_config_set(cfg, "rules_source", "store"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_EOPTION);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(NULL), "needs a redis://, "
                                                  "rediss:// or unix:// "
                                                  "store"));
    /* rules and a source: one or the other */
    ck_assert_int_eq(rl_config_set(cfg, "rules_source", "file:/nonexistent"),
                     RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", "[]"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_EOPTION);
    ck_assert_ptr_null(lim);
    rl_config_free(cfg);
}
END_TEST

START_TEST(status_counts_every_path_and_honours_size)
{
    rl_limiter *lim = NULL;
    rl_rules_status st;
    struct {
        rl_rules_status st;
        char more[32];
    } bigger;

    heard_reset();
    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    st = status(lim);
    ck_assert_int_eq(st.version, 0);
    ck_assert_int_eq(st.origin, RL_RULES_FROM_NONE);
    ck_assert_int_eq(st.source, RL_SOURCE_NONE);
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"version\": 4, "
                                               "\"rules\": []}"), RL_OK);
    ck_assert_int_eq(rl_rules_load_string(lim, "[{\"rule_id\": 1}]"),
                     RL_ERULE);
    st = status(lim);
    ck_assert_int_eq(st.version, 4);
    ck_assert_int_eq(st.origin, RL_RULES_FROM_STRING);
    ck_assert_int_eq(st.loads, 1);
    ck_assert_int_eq(st.refused_bad, 1);
    ck_assert_int_gt(st.last_load_ms, 1700000000000LL);
    ck_assert_ptr_nonnull(strstr(st.last_refusal, "rules: rules[0]"));
    /* the caller's own calls answer through their return value only */
    ck_assert_int_eq(heard.n, 0);
    st.size = sizeof st - 1;
    ck_assert_int_eq(rl_rules_status_get(lim, &st), RL_EINVAL);
    ck_assert_int_eq(rl_rules_status_get(lim, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_rules_status_get(NULL, &st), RL_EINVAL);
    memset(&bigger, 0x5a, sizeof bigger);
    bigger.st.size = sizeof bigger;
    ck_assert_int_eq(rl_rules_status_get(lim, &bigger.st), RL_OK);
    ck_assert_int_eq(bigger.st.size, sizeof bigger); /* left as set */
    ck_assert_int_eq(bigger.st.version, 4);
    ck_assert_int_eq((unsigned char)bigger.more[0], 0x5a); /* untouched */
    rl_limiter_free(lim);
}
END_TEST

/* The default hook writes to stderr; NULL silences. */
START_TEST(default_log_is_stderr_and_null_silences)
{
    char dir[64], file[128], src[160], got[4096];
    rl_config *cfg;
    rl_limiter *lim;
    int saved = dup(2), fd;

    strcpy(dir, "/tmp/rl_log_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/stderr", dir);
    snprintf(src, sizeof src, "file:%s/missing.json", dir);
    for (int silent = 0; silent <= 1; silent++) {
        cfg = rl_config_new();
        ck_assert_int_eq(rl_config_set(cfg, "rules_source", src), RL_OK);
        ck_assert_int_eq(rl_config_set(cfg, "degraded_start", "1"), RL_OK);
        if (silent)
            ck_assert_int_eq(rl_config_set_log(cfg, NULL, NULL), RL_OK);
        fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        fflush(stderr);
        dup2(fd, 2);
        close(fd);
        ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
        rl_limiter_free(lim);
        fflush(stderr);
        dup2(saved, 2);
        rl_config_free(cfg);
        ck_assert_int_ge(read_whole(file, got, sizeof got), 0);
        if (silent)
            ck_assert_str_eq(got, "");
        else
            ck_assert_msg(strstr(got, "libratelimit: rules source file ") &&
                              strstr(got, "starting with no rules"),
                          "stderr: %s", got);
    }
    close(saved);
    unlink(file);
    rmdir(dir);
}
END_TEST

/* ---- the rule-loading fixes -------------------------------------------------- */

/* A FIFO used to block rl_rules_load_file() forever (opened before the
 * regular-file check); the man page promises RL_EIO. */
START_TEST(fifo_is_refused_without_blocking)
{
    char dir[64], fifo[128];
    rl_limiter *lim = NULL;
    rl_config *cfg = rl_config_new();

    strcpy(dir, "/tmp/rl_fifo_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/rules.json", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    ck_assert_int_eq(rl_rules_load_file(lim, fifo), RL_EIO);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(lim), "not a regular file"));
    rl_limiter_free(lim);
    lim = NULL;
    ck_assert_int_eq(rl_config_set(cfg, "rules_file", fifo), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_EIO);
    rl_config_free(cfg);
    unlink(fifo);
    rmdir(dir);
}
END_TEST

/* A set at INT64_MAX, then one without a version, used to wrap the version
 * to INT64_MIN (undefined behaviour). */
START_TEST(version_cannot_count_past_int64_max)
{
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"version\": "
                                               "9223372036854775807, "
                                               "\"rules\": []}"), RL_OK);
    ck_assert_int_eq(rl_rules_version(lim), INT64_MAX);
    ck_assert_int_eq(rl_rules_load_string(lim, "[]"), RL_ERULE);
    ck_assert_msg(strstr(rl_errmsg(lim), "cannot be counted past"), "%s",
                  rl_errmsg(lim));
    ck_assert_int_eq(rl_rules_version(lim), INT64_MAX);
    /* a set that gives its own version still loads */
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"version\": 1, "
                                               "\"rules\": []}"), RL_OK);
    ck_assert_int_eq(rl_rules_version(lim), 1);
    rl_limiter_free(lim);
}
END_TEST

static long max_rss_kb(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* A 64 MiB file used to be read whole (64 MiB, and seconds of parsing)
 * before it was refused; now its size refuses it before any read. */
START_TEST(huge_file_is_refused_before_it_is_read)
{
    char path[64];
    rl_limiter *lim = NULL;
    long before;
    int fd;

    strcpy(path, "/tmp/rl_huge_XXXXXX");
    ck_assert_int_ge(fd = mkstemp(path), 0);
    ck_assert_int_eq(ftruncate(fd, 64 << 20), 0); /* sparse: no disk */
    close(fd);
    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    before = max_rss_kb();
    ck_assert_int_eq(rl_rules_load_file(lim, path), RL_EIO);
    ck_assert_msg(max_rss_kb() - before < 8 * 1024, "grew %ld KiB",
                  max_rss_kb() - before);
    ck_assert_msg(strstr(rl_errmsg(lim), "more than the 16 MiB"), "%s",
                  rl_errmsg(lim));
    ck_assert_int_eq(status(lim).refused_bad, 1);
    unlink(path);
    rl_limiter_free(lim);
}
END_TEST

/* Exactly RL_RULES_TEXT_MAX bytes load; one more does not, from a file
 * or from a string. */
START_TEST(size_cap_is_exact)
{
    const char *set = "{\"version\": 3, \"rules\": []}";
    size_t cap = RL_RULES_TEXT_MAX;
    char path[64], *text = malloc(cap + 2);
    rl_limiter *lim = NULL;
    int fd;

    memset(text, ' ', cap + 1);
    memcpy(text, set, strlen(set));
    text[cap] = '\0';
    strcpy(path, "/tmp/rl_cap_XXXXXX");
    ck_assert_int_ge(fd = mkstemp(path), 0);
    ck_assert_int_eq(write(fd, text, cap), (ssize_t)cap);
    close(fd);
    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    ck_assert_msg(rl_rules_load_file(lim, path) == RL_OK, "%s",
                  rl_errmsg(lim));
    ck_assert_int_eq(rl_rules_load_string(lim, text), RL_OK);
    fd = open(path, O_WRONLY | O_APPEND);
    ck_assert_int_eq(write(fd, " ", 1), 1);
    close(fd);
    ck_assert_int_eq(rl_rules_load_file(lim, path), RL_EIO);
    text[cap] = ' ';
    text[cap + 1] = '\0';
    ck_assert_int_eq(rl_rules_load_string(lim, text), RL_EINVAL);
    ck_assert_int_eq(status(lim).refused_bad, 2);
    unlink(path);
    free(text);
    rl_limiter_free(lim);
}
END_TEST

/* The log hears of refused sets 10 at once, then one a second; the line
 * after a quiet spell counts those it left out; the status counts all. */
START_TEST(refusals_are_logged_at_a_bounded_rate)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim;
    swap_how how = {.origin = RL_RULES_FROM_SOURCE, .log = 1,
                    .what = "the test"};
    int64_t start, took;
    int logged;
    char want[64];

    ck_assert_int_eq(rl_config_set_log(cfg, capture, &heard), RL_OK);
    lim = open_with(cfg);
    heard_reset();
    start = now_ms();
    for (int i = 0; i < 25; i++)
        rules_refused(lim, &how, 1, "version 1 is older than the version 2 "
                      "in force");
    took = now_ms() - start;
    logged = heard_count(RL_LOG_WARN, "refused, version");
    ck_assert_int_ge(logged, 10);
    ck_assert_int_le(logged, 10 + 1 + (int)(took / 1000)); /* refilled */
    ck_assert_uint_eq(status(lim).refused_stale, 25);
    /* a second later: logged, with the count of those left out */
    while (now_ms() - start < took + 1100)
        sleep_ms(20);
    rules_refused(lim, &how, 1, "again");
    ck_assert_int_eq(heard_count(RL_LOG_WARN, "refused, version"), logged + 1);
    snprintf(want, sizeof want, "(%d more refused since the last line)",
             25 - logged);
    ck_assert_msg(heard_count(RL_LOG_WARN, want) == 1, "%s: %s", want,
                  heard.lines[heard.n - 1]);
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rules_source_local");
    TCase *local = tcase_create("local");

    pthread_mutex_init(&heard.mu, NULL);
    tcase_set_timeout(local, 60);
    tcase_add_test(local, options_are_checked);
    tcase_add_test(local, status_counts_every_path_and_honours_size);
    tcase_add_test(local, default_log_is_stderr_and_null_silences);
    tcase_add_test(local, fifo_is_refused_without_blocking);
    tcase_add_test(local, version_cannot_count_past_int64_max);
    tcase_add_test(local, refusals_are_logged_at_a_bounded_rate);
    tcase_add_test(local, huge_file_is_refused_before_it_is_read);
    tcase_add_test(local, size_cap_is_exact);
    tcase_add_checked_fixture(local, local_setup, remove_tmpdir);
    tcase_add_test(local, file_source_follows_writes_and_renames);
    tcase_add_test(local, file_source_stat_backstop);
    suite_add_tcase(s, local);
    return run_suite(s);
}
