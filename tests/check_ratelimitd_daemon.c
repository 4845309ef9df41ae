/*
 * check_ratelimitd_daemon.c -- ratelimitd, rlctl and the gateway as an
 * operator runs them, with the real binaries: SIGHUP reads ratelimitd's
 * token file again and reopens its --log-file (a file moved away by
 * logrotate is left behind) and the service keeps serving; SIGTERM stops
 * it with status 0; a token file that became unreadable keeps the tokens
 * it had; `--version` on each program prints its version and exits 0;
 * /metrics counts requests by route and status, publishes and their
 * failures, the versions and whether Redis is up; rlctl prints no control
 * byte a server sent (a canned answer: ratelimitd itself refuses them).  Every wait is for a
 * condition, with a deadline.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ratelimit.h"
#include "redis_harness.h"
#include "rld_harness.h"
#include "testutil.h"
#include "timeutil.h"

#define WAIT_MS 15000
#define CAROL_TOKEN "carol-00112233445566778899-token"
#define BODY "{\"dimension\":\"user\",\"limit\":5,\"window_seconds\":60}"

static long put(const rld *d, const char *token)
{
    rld_resp r;
    long st = rld_http(d, "PUT", "/v1/rules/r", token, NULL, BODY,
                       strlen(BODY), &r);

    rld_resp_free(&r);
    return st;
}

/* Wait until the file holds needle; its text into buf. */
static void wait_file(const char *path, const char *needle, char *buf,
                      size_t len)
{
    int64_t start = now_ms();

    for (;; sleep_ms(20)) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, len - 1, f) : 0;
        buf[n] = '\0';
        if (f)
            fclose(f);
        if (strstr(buf, needle))
            return;
        ck_assert_msg(now_ms() - start < WAIT_MS, "%s: no \"%s\" in: %s",
                      path, needle, buf);
    }
}

static void write_tokens(const rld *d, const char *text)
{
    char path[320];
    FILE *f;

    snprintf(path, sizeof path, "%s/tokens", d->dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, 0600), 0);
}

START_TEST(sighup_reloads_tokens_and_reopens_the_log)
{
    rld d = {0};
    char log[400], moved[400], buf[8192], tokens[320];
    const char *args[] = {"--log-file", log, NULL};

    ck_assert_int_eq(rld_start(&d, NULL), 0); /* makes the dir */
    ck_assert_int_eq(rld_stop(&d), 0);
    snprintf(log, sizeof log, "%s/file.log", d.dir);
    snprintf(moved, sizeof moved, "%s/file.log.1", d.dir);
    ck_assert_int_eq(rld_start(&d, args), 0);
    wait_file(log, "listening on", buf, sizeof buf);
    ck_assert_int_eq(put(&d, RLD_ALICE_TOKEN), 200);
    ck_assert_int_eq(put(&d, CAROL_TOKEN), 403);

    /* logrotate moves the file; the tokens change: alice out, carol in */
    ck_assert_int_eq(rename(log, moved), 0);
    write_tokens(&d, RLD_BOB ":" RLD_BOB_TOKEN "\ncarol:" CAROL_TOKEN "\n");
    ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
    wait_file(log, "tokens read again", buf, sizeof buf);
    ck_assert_msg(strstr(buf, "reopened"), "%s", buf);
    ck_assert_int_eq(put(&d, CAROL_TOKEN), 200);
    ck_assert_int_eq(put(&d, RLD_ALICE_TOKEN), 403);
    wait_file(log, "put rule r", buf, sizeof buf); /* the new file logs */

    /* a token file that cannot be read now: the tokens stay */
    snprintf(tokens, sizeof tokens, "%s/tokens", d.dir);
    ck_assert_int_eq(chmod(tokens, 0644), 0); /* others may read it */
    ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
    wait_file(log, "tokens stay as they were", buf, sizeof buf);
    ck_assert_int_eq(put(&d, CAROL_TOKEN), 200);

    /* SIGTERM: a clean stop */
    ck_assert_int_eq(rld_stop(&d), 0);
    wait_file(log, "stopped", buf, sizeof buf);
    rld_cleanup(&d);
}
END_TEST

/* `PROGRAM --version`: its first line into buf, its exit status. */
static int version_of(const char *env, const char *fallback, char *buf,
                      size_t len)
{
    char cmd[600];
    const char *bin = getenv(env);
    FILE *p;
    int st;

    snprintf(cmd, sizeof cmd, "'%s' --version 2>&1",
             bin && *bin ? bin : fallback);
    ck_assert_ptr_nonnull(p = popen(cmd, "r"));
    if (!fgets(buf, (int)len, p))
        buf[0] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(every_program_says_its_version)
{
    char line[256], want[64];

    snprintf(want, sizeof want, "(libratelimit) %s\n", rl_version_string());
    ck_assert_int_eq(version_of("RATELIMITD", "tools/ratelimitd/ratelimitd",
                                line, sizeof line), 0);
    ck_assert_msg(!strncmp(line, "ratelimitd ", 11) && strstr(line, want),
                  "%s", line);
    ck_assert_int_eq(version_of("RLCTL", "tools/rlctl/rlctl", line,
                                sizeof line), 0);
    ck_assert_msg(!strncmp(line, "rlctl ", 6) && strstr(line, want), "%s",
                  line);
    /* the gateway is built with libmicrohttpd and libcurl only */
    if (!getenv("GATEWAY") && access("examples/gateway", X_OK) != 0)
        return;
    ck_assert_int_eq(version_of("GATEWAY", "examples/gateway", line,
                                sizeof line), 0);
    ck_assert_msg(!strncmp(line, "gateway ", 8) && strstr(line, want), "%s",
                  line);
}
END_TEST

/* GET /metrics into buf: its status. */
static long metrics(const rld *d, char *buf, size_t len)
{
    rld_resp r;
    long st = rld_http(d, "GET", "/metrics", NULL, NULL, NULL, 0, &r);

    snprintf(buf, len, "%s", r.body ? r.body : "");
    ck_assert_msg(st != 200 || strstr(r.content_type, "text/plain"), "%s",
                  r.content_type);
    rld_resp_free(&r);
    return st;
}

#define FAILURES "\nratelimitd_publish_failures_total "

static void wait_metric(const rld *d, const char *line)
{
    char buf[16384] = "";
    int64_t start = now_ms();

    while (metrics(d, buf, sizeof buf) != 200 || !strstr(buf, line))
        ck_assert_msg(now_ms() - start < WAIT_MS, "no \"%s\" in:\n%s", line,
                      buf);
}

START_TEST(metrics_count_requests_publishes_and_redis)
{
    rh_server redis;
    char uri[256];
    const char *args[] = {"--redis", uri, "--redis-grace-ms", "0", NULL};
    rld d = {0};
    rld_resp r;
    char buf[16384];
    const char *f;

    ck_assert_int_eq(rh_start(&redis, NULL), 0);
    ck_assert_ptr_nonnull(rh_uri(&redis, uri, sizeof uri));
    ck_assert_int_eq(rld_start(&d, args), 0);
    ck_assert_int_eq(put(&d, RLD_ALICE_TOKEN), 200);
    ck_assert_int_eq(put(&d, RLD_ALICE_TOKEN), 200);
    ck_assert_int_eq(put(&d, "not-a-token-of-this-service"), 403);
    ck_assert_int_eq(rld_http(&d, "GET", "/nope", NULL, NULL, NULL, 0, &r),
                     404);
    rld_resp_free(&r);
    wait_metric(&d, "ratelimitd_requests_total{route=\"rule\",status=\"200\"}"
                    " 2\n");
    wait_metric(&d, "ratelimitd_requests_total{route=\"rule\",status=\"403\"}"
                    " 1\n");
    wait_metric(&d, "ratelimitd_requests_total{route=\"unknown\","
                    "status=\"404\"} 1\n");
    wait_metric(&d, "\nratelimitd_rules_version 2\n");
    wait_metric(&d, "\nratelimitd_published_version 2\n");
    wait_metric(&d, "\nratelimitd_redis_up 1\n");
    wait_metric(&d, "\nratelimitd_healthy 1\n");
    wait_metric(&d, "# TYPE ratelimitd_publishes_total counter\n"
                    "ratelimitd_publishes_total ");
    /* Redis away: down, failures counted, unhealthy (no grace) */
    ck_assert_int_eq(rh_stop(&redis), 0);
    wait_metric(&d, "\nratelimitd_redis_up 0\n");
    wait_metric(&d, "\nratelimitd_healthy 0\n");
    ck_assert_int_eq(metrics(&d, buf, sizeof buf), 200);
    ck_assert_ptr_nonnull(f = strstr(buf, FAILURES));
    ck_assert_int_ge(atoll(f + strlen(FAILURES)), 1);
    ck_assert_int_eq(rld_stop(&d), 0);
    rld_cleanup(&d);
}
END_TEST

/* A server that is not ratelimitd (an older one, or a hostile one):
 * answers every connection with `reply`, until the test ends. */
static const char *canned;

static void *serve_canned(void *arg)
{
    int lfd = *(int *)arg;
    char buf[4096];

    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        if (read(fd, buf, sizeof buf) > 0 &&
            write(fd, canned, strlen(canned)) < 0)
            break;
        close(fd);
    }
    return NULL;
}

/* rlctl prints nothing a server sent as a control byte, whether raw in
 * the body or escaped in its JSON strings. */
START_TEST(rlctl_prints_no_control_byte_from_the_server)
{
    static char reply[2048];
    static const char body[] =
        "{\"version\":3,\"rules\":[{\"rule_id\":\"r\\u001b]0;pwned\\u0007\","
        "\"dimension\":\"user\",\"match\":{\"tier\":\"a\\u001b[2Jb\"},"
        "\"limit\":5,\"window_seconds\":60,\"algorithm\":\"sliding_window\","
        "\"mode\":\"enforce\",\"failure_mode\":\"fallback\",\"version\":3}]}"
        "\x1b[31m\n";
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    pthread_t t;
    char cmd[512], out[8192];
    const char *bin = getenv("RLCTL");
    size_t n;
    FILE *p;

    snprintf(reply, sizeof reply, "HTTP/1.1 200 OK\r\nContent-Type: "
             "application/json\r\nContent-Length: %zu\r\nConnection: "
             "close\r\n\r\n%s", strlen(body), body);
    canned = reply;
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(lfd, 8), 0);
    ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, serve_canned, &lfd), 0);
    for (int json = 0; json < 2; json++) {
        snprintf(cmd, sizeof cmd, "'%s' --server http://127.0.0.1:%d %s list",
                 bin && *bin ? bin : "tools/rlctl/rlctl", ntohs(a.sin_port),
                 json ? "--json" : "");
        ck_assert_ptr_nonnull(p = popen(cmd, "r"));
        n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        ck_assert_int_eq(pclose(p), 0);
        ck_assert_msg(n > 0 && strchr(out, 'r'), "%s", out);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg((unsigned char)out[i] >= 0x20 || out[i] == '\n',
                          "byte 0x%02x at %zu of: %s", out[i], i, out);
    }
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    pthread_join(t, NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("daemon");
    TCase *t = tcase_create("daemon");

    tcase_set_timeout(t, 120);
    tcase_add_test(t, sighup_reloads_tokens_and_reopens_the_log);
    tcase_add_test(t, every_program_says_its_version);
    tcase_add_test(t, rlctl_prints_no_control_byte_from_the_server);
    if (rh_available())
        tcase_add_test(t, metrics_count_requests_publishes_and_redis);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    if (!rld_available())
        return 77;
    return run_suite(suite());
}
