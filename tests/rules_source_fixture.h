/*
 * rules_source_fixture.h -- what the suites of live rules share
 * (check_rules_source.c: the option rules_source against real
 * redis-servers; check_rules_source_local.c: files, options, status, the
 * log hook and the rule-loading fixes): the log hook's capture of what a
 * limiter logged, a one-rule set, the limit a limiter enforces and the
 * waits for it and for refusals, a limiter on a source, files in a
 * per-test temporary directory, and SLOW, the sanitizer builds' stretch
 * of every deadline.
 */
#ifndef RL_TESTS_RULES_SOURCE_FIXTURE_H
#define RL_TESTS_RULES_SOURCE_FIXTURE_H

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ratelimit.h"
#include "testutil.h"
#include "timeutil.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW 4 /* sanitizer builds: check memory and races, not time */
#else
#define SLOW 1
#endif

/* What the log hook heard. */
typedef struct logcap {
    pthread_mutex_t mu;
    int n;
    int levels[64];
    char lines[64][512];
} logcap;

static logcap heard;

static inline void capture(void *arg, int level, const char *msg)
{
    logcap *c = arg;

    pthread_mutex_lock(&c->mu);
    if (c->n < 64) {
        c->levels[c->n] = level;
        snprintf(c->lines[c->n++], sizeof c->lines[0], "%s", msg);
    }
    pthread_mutex_unlock(&c->mu);
}

static inline void heard_reset(void)
{
    pthread_mutex_lock(&heard.mu);
    heard.n = 0;
    pthread_mutex_unlock(&heard.mu);
}

/* How many lines the hook heard contain needle (at `level`, 0: any). */
static inline int heard_count(int level, const char *needle)
{
    int found = 0;

    pthread_mutex_lock(&heard.mu);
    for (int i = 0; i < heard.n; i++)
        found += (!level || heard.levels[i] == level) &&
                 strstr(heard.lines[i], needle) != NULL;
    pthread_mutex_unlock(&heard.mu);
    return found;
}

/* A one-rule set: rule "r" per user, `limit` per minute. */
static inline const char *set_json(char *buf, size_t len, long long version,
                                   int limit)
{
    if (version < 0)
        snprintf(buf, len, "{\"rules\":[{\"rule_id\":\"r\",\"dimension\":"
                 "\"user\",\"limit\":%d,\"window_seconds\":60}]}", limit);
    else
        snprintf(buf, len, "{\"version\":%lld,\"rules\":[{\"rule_id\":\"r\","
                 "\"dimension\":\"user\",\"limit\":%d,\"window_seconds\":60}]}",
                 version, limit);
    return buf;
}

/* The limit lim enforces for rule "r" now (a look: cost 0), -1 if none. */
static inline int64_t enforced(rl_limiter *lim)
{
    rl_result res = RL_RESULT_INIT;

    return rl_allow(lim, "someone", "r", 0, &res) == RL_OK ? res.limit : -1;
}

/* Wait until lim enforces `limit`; the ms it took, or -1 at the
 * deadline. */
static inline int64_t wait_enforced(rl_limiter *lim, int64_t limit,
                                    int64_t start, int deadline_ms)
{
    while (now_ms() - start < deadline_ms) {
        if (enforced(lim) == limit)
            return now_ms() - start;
        sleep_ms(1);
    }
    return -1;
}

static inline rl_rules_status status(rl_limiter *lim)
{
    rl_rules_status st = {.size = sizeof st};

    ck_assert_int_eq(rl_rules_status_get(lim, &st), RL_OK);
    return st;
}

/* Wait until the status says at least `bad` / `stale` refusals. */
static inline void wait_refusals(rl_limiter *lim, uint64_t bad,
                                 uint64_t stale)
{
    int64_t start = now_ms();
    rl_rules_status st;

    do {
        st = status(lim);
        if (st.refused_bad >= bad && st.refused_stale >= stale)
            return;
        sleep_ms(2);
    } while (now_ms() - start < 5000 * SLOW);
    ck_abort_msg("refusals: bad %llu (want %llu), stale %llu (want %llu)",
                 (unsigned long long)st.refused_bad, (unsigned long long)bad,
                 (unsigned long long)st.refused_stale,
                 (unsigned long long)stale);
}

static inline rl_config *source_config(const char *source)
{
    rl_config *cfg = rl_config_new();

    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(rl_config_set(cfg, "rules_source", source), RL_OK);
    ck_assert_int_eq(rl_config_set_log(cfg, capture, &heard), RL_OK);
    return cfg;
}

static inline rl_limiter *open_with(rl_config *cfg)
{
    rl_limiter *lim = NULL;
    int rc = rl_limiter_new(&lim, cfg);

    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    rl_config_free(cfg);
    return lim;
}

static inline void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* The whole of a file, in buf (NUL-terminated); -1 if it cannot be read. */
static inline ssize_t read_whole(const char *path, char *buf,
                                 size_t len)
{
    int fd = open(path, O_RDONLY);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read(fd, buf, len - 1);
    close(fd);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

static char tmpdir[64];

static inline void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/rl_source_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static inline void remove_tmpdir(void)
{
    char cmd[128];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static inline void local_setup(void)
{
    heard_reset();
    make_tmpdir();
}

#endif
