/*
 * check_messages.c -- what the library's messages may not carry (issue
 * 14), through the public API: a password, whatever the shape of the URI
 * that holds it (no colon, an '@', '/', '?' or ':' inside it, a scheme
 * mistyped, credentials after a socket path), in rl_errmsg(), in the log
 * hook's lines or in rlctl's output; and control bytes (CR, LF, ESC, DEL)
 * from a rule id, a JSON string, an option's value or a path, which
 * servers would write to their logs as they are.  And the URI grammar
 * that decides what a password is, against real redis-servers whose
 * passwords hold '@', '/', '?' and ':': written raw or percent-encoded,
 * over TCP and a unix socket, for the store and for the rules source.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ratelimit.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

/* Two halves of every planted password: neither may ever show. */
#define M1 "Mk1pw"
#define M2 "Nq2pw"

static const char one_rule[] =
    "[{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":3,"
    "\"window_seconds\":60}]";

/* ---- helpers ------------------------------------------------------------- */

/* What the log hook heard. */
static pthread_mutex_t heard_mu = PTHREAD_MUTEX_INITIALIZER;
static int heard_n;
static char heard[32][512];

static void capture(void *arg, int level, const char *msg)
{
    (void)arg;
    (void)level;
    pthread_mutex_lock(&heard_mu);
    if (heard_n < 32)
        snprintf(heard[heard_n++], sizeof heard[0], "%s", msg);
    pthread_mutex_unlock(&heard_mu);
}

/* msg holds no control byte, nor either half of a planted password. */
static void clean(const char *msg, const char *what)
{
    for (const char *p = msg; *p; p++)
        ck_assert_msg((unsigned char)*p >= 0x20 && *p != 0x7f,
                      "%s: control byte %#x in \"%s\"", what,
                      (unsigned char)*p, msg);
    ck_assert_msg(!strstr(msg, M1) && !strstr(msg, M2),
                  "%s: a password shows in \"%s\"", what, msg);
}

static void heard_clean(const char *what)
{
    pthread_mutex_lock(&heard_mu);
    for (int i = 0; i < heard_n; i++)
        clean(heard[i], what);
    heard_n = 0;
    pthread_mutex_unlock(&heard_mu);
}

/* rl_limiter_new with store and/or rules_source; rl_errmsg(NULL) checked
 * and returned in msg; the limiter freed.  The return code. */
static int open_clean(const char *store, const char *source, int degraded,
                      char *msg, size_t len)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc = RL_OK;

    ck_assert_int_eq(rl_config_set_log(cfg, capture, NULL), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "connect_timeout_ms", "500"), RL_OK);
    if (store && (rc = rl_config_set(cfg, "store", store)) != RL_OK)
        clean(rl_errmsg(NULL), "rl_config_set store");
    if (source && (rc = rl_config_set(cfg, "rules_source", source)) != RL_OK)
        clean(rl_errmsg(NULL), "rl_config_set rules_source");
    if (degraded)
        ck_assert_int_eq(rl_config_set(cfg, "degraded_start", "1"), RL_OK);
    if (rc == RL_OK) {
        rc = rl_limiter_new(&lim, cfg);
        clean(rl_errmsg(NULL), store ? store : source);
    }
    snprintf(msg, len, "%s", rc == RL_OK ? "" : rl_errmsg(NULL));
    rl_limiter_free(lim);
    rl_config_free(cfg);
    heard_clean(store ? store : source);
    return rc;
}

/* A limiter on `store` decides by Redis: three of four, no flag (a new
 * client each time). */
static void decides_by_redis(const char *store, const char *source)
{
    static int client;
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    rl_result res = RL_RESULT_INIT;
    char key[32];
    int ok = 0, rc;

    ck_assert_int_eq(rl_config_set(cfg, "store", store), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "1000"), RL_OK);
    if (source)
        ck_assert_int_eq(rl_config_set(cfg, "rules_source", source), RL_OK);
    else
        ck_assert_int_eq(rl_config_set(cfg, "rules", one_rule), RL_OK);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "%s: %s", store, rl_errmsg(NULL));
    snprintf(key, sizeof key, "user:grammar%d", client++);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(rl_allow(lim, key, "r", 1, &res), RL_OK);
        ck_assert_int_eq(res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN),
                         0);
        ok += res.allowed;
    }
    ck_assert_msg(ok == 3, "%s: %d of 4 allowed", store, ok);
    rl_limiter_free(lim);
}

static void redis_ok(redisReply *r)
{
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "redis: %s",
                  r ? r->str : "no reply");
    freeReplyObject(r);
}

/* ---- the grammar: special bytes in real passwords ------------------------- */

/* The default user's password holds '@', '/', '?' and ':'; so does the
 * password of an ACL user "app".  Each is accepted written as it is and
 * percent-encoded, over TCP and the unix socket, by the store and by the
 * rules source (which reads its set with them). */
START_TEST(passwords_with_at_slash_question_colon_authenticate)
{
    rh_server srv;
    redisContext *c;
    char u[12][700];
    int n = 0;

    ck_assert_int_eq(rh_start(&srv, "p@ss/w?rd:1"), 0);
    ck_assert_ptr_nonnull(c = rh_connect(&srv));
    redis_ok(redisCommand(c, "ACL SETUSER app on >a@b/c?d:e ~* &* +@all"));
    redis_ok(redisCommand(c, "SET rl:rules %s",
                          "{\"version\":1,\"rules\":[{\"rule_id\":\"r\","
                          "\"dimension\":\"user\",\"limit\":3,"
                          "\"window_seconds\":60}]}"));
    redisFree(c);
    snprintf(u[n++], sizeof u[0], "redis://:p@ss/w?rd:1@127.0.0.1:%d/0",
             srv.port);
    ck_assert_ptr_nonnull(rh_uri(&srv, u[n++], sizeof u[0])); /* %-encoded */
    snprintf(u[n++], sizeof u[0], "redis://app:a@b/c?d:e@127.0.0.1:%d",
             srv.port);
    snprintf(u[n++], sizeof u[0], "redis://app:a%%40b%%2Fc%%3Fd%%3Ae@"
             "127.0.0.1:%d/0", srv.port);
    snprintf(u[n++], sizeof u[0], "unix://:p@ss/w?rd:1@%s?db=2",
             srv.unix_path);
    snprintf(u[n++], sizeof u[0], "unix://app:a@b/c?d:e@%s", srv.unix_path);
    snprintf(u[n++], sizeof u[0], "unix://app:a%%40b%%2Fc%%3Fd%%3Ae@%s",
             srv.unix_path);
    for (int i = 0; i < n; i++)
        decides_by_redis(u[i], NULL);
    /* the rules source parses the same way (db 0: where the set is) */
    decides_by_redis(u[0], u[0]);
    decides_by_redis(u[2], u[5]);
    rh_stop(&srv);
}
END_TEST

/* ---- secrets ------------------------------------------------------------------ */

/* A wrong password holding an '@': the issue's "connect to TAIL@127.0.0.1"
 * named the password's tail as the host.  Now the server is named by its
 * address, the refusal is AUTH's, and neither half shows. */
START_TEST(a_wrong_password_with_an_at_names_the_server_only)
{
    rh_server srv;
    char bad[400], msg[512], addr[64];

    ck_assert_int_eq(rh_start(&srv, "the-right-one"), 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", srv.port);
    snprintf(bad, sizeof bad, "redis://app:" M1 "@" M2 "@%s/0", addr);
    ck_assert_int_eq(open_clean(bad, NULL, 0, msg, sizeof msg), RL_ESTORE);
    ck_assert_msg(strstr(msg, addr) && strstr(msg, "AUTH"), "%s", msg);
    ck_assert_msg(strstr(msg, "redis://***@127.0.0.1"), "%s", msg);
    /* the rules source: at start, then its log once degraded */
    ck_assert_int_eq(open_clean(NULL, bad, 0, msg, sizeof msg), RL_ESTORE);
    ck_assert_msg(strstr(msg, addr) && strstr(msg, "AUTH"), "%s", msg);
    ck_assert_int_eq(open_clean(NULL, bad, 1, msg, sizeof msg), RL_OK);
    snprintf(bad, sizeof bad, "unix://:" M1 "@" M2 "@%s", srv.unix_path);
    ck_assert_int_eq(open_clean(bad, NULL, 0, msg, sizeof msg), RL_ESTORE);
    ck_assert_msg(strstr(msg, srv.unix_path) && strstr(msg, "AUTH"), "%s",
                  msg);
    rh_stop(&srv);
}
END_TEST

/* Every shape a URI with a password can take, well formed or not: as the
 * store, as the rules source, and as a store the rules source follows
 * ("store"), started and degraded.  No message shows either half. */
START_TEST(no_shape_of_uri_shows_its_password)
{
    static const char *const shapes[] = {
        "redis://" M1 M2 "@127.0.0.1:1",          /* no colon */
        "unix://" M1 M2 "@/nonexistent/redis.sock",
        "redis-cluster://" M1 M2 "@127.0.0.1:1",
        "redis://:" M1 "@" M2 "@127.0.0.1:1",     /* an '@' inside */
        "unix://:" M1 "@" M2 "@/nonexistent/redis.sock",
        "redis-cluster://:" M1 "@" M2 "@127.0.0.1:1,127.0.0.1:2",
        "redis://app:" M1 "/" M2 "@127.0.0.1:1",  /* '/' and '?' inside */
        "redis://app:" M1 "?" M2 "@127.0.0.1:1/0",
        "redis-cluster://app:" M1 "/" M2 "@127.0.0.1:1",
        "unix:///:" M1 M2 "@/nonexistent/redis.sock", /* after the path */
        "unix://:" M1 M2 "@relative.sock",
        "rediss://:" M1 M2 "@127.0.0.1:1",         /* nothing listens */
        "redis:/:" M1 M2 "@127.0.0.1",             /* mistyped schemes */
        "Redis://:" M1 M2 "@127.0.0.1",
        "redis-clutser://:" M1 M2 "@127.0.0.1:1",
        M1 ":" M2 "@127.0.0.1:6379",               /* no scheme */
        "redis://:" M1 M2 "@",                     /* no host */
        "redis://:" M1 M2 "@127.0.0.1:99999",      /* bad port, db */
        "redis://:" M1 M2 "@127.0.0.1:1/x",
        "redis://:" M1 "%" M2 "@127.0.0.1:1",      /* a bad escape */
        "redis://:" M1 "\x1b[2J" M2 "@127.0.0.1:1", /* a control byte */
    };
    char msg[512];

    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        ck_assert_int_ne(open_clean(shapes[i], NULL, 0, msg, sizeof msg),
                         RL_OK);
        ck_assert_int_ne(open_clean(NULL, shapes[i], 0, msg, sizeof msg),
                         RL_OK);
        open_clean(NULL, shapes[i], 1, msg, sizeof msg);
        ck_assert_int_ne(open_clean(shapes[i], "store", 0, msg, sizeof msg),
                         RL_OK);
    }
}
END_TEST

/* rlctl, whose --server URL may carry user:password@ too, and whose
 * dryrun names a Redis server. */
static int rlctl(char *out, size_t len, const char *args)
{
    const char *bin = getenv("RLCTL");
    char cmd[1024];
    size_t n;
    FILE *p;
    int st;

    snprintf(cmd, sizeof cmd, "'%s' --timeout 2000 %s 2>&1",
             bin ? bin : "tools/rlctl/rlctl", args);
    ck_assert_ptr_nonnull(p = popen(cmd, "r"));
    n = fread(out, 1, len - 1, p);
    out[n] = 0;
    for (char *c = out; *c; c++) /* lines: each must be clean */
        if (*c == '\n')
            *c = ' ';
    st = pclose(p);
    ck_assert_msg(WIFEXITED(st), "rlctl %s: did not exit", args);
    return WEXITSTATUS(st);
}

START_TEST(rlctl_never_shows_a_password)
{
    const char *bin = getenv("RLCTL");
    char out[4096];

    if (access(bin ? bin : "tools/rlctl/rlctl", X_OK) != 0) {
        printf("rlctl not built: skipped\n");
        return;
    }
    ck_assert_int_eq(rlctl(out, sizeof out, "--server http://ops:" M1 "@"
                                            "127.0.0.1:1 list"), 3);
    clean(out, "rlctl --server http://...");
    ck_assert_msg(strstr(out, "http://***@127.0.0.1:1"), "%s", out);
    ck_assert_int_eq(rlctl(out, sizeof out, "--server ops:" M1 "@127.0.0.1:1"
                                            " list"), 2);
    clean(out, "rlctl --server without a scheme");
    ck_assert_int_eq(rlctl(out, sizeof out, "dryrun r --redis "
                                            "redis://:" M1 "@" M2
                                            "@127.0.0.1:1"), 3);
    clean(out, "rlctl dryrun");
    ck_assert_msg(strstr(out, "127.0.0.1:1/0"), "%s", out);
}
END_TEST

/* ---- control bytes ------------------------------------------------------------- */

static void no_control_bytes(const rl_limiter *lim, const char *what)
{
    const char *msg = rl_errmsg(lim);

    ck_assert_msg(msg[0] != '\0', "%s: no message", what);
    clean(msg, what);
}

/* Rule JSON: a rule id with ESC (raw, and as a JSON escape), CRLF in a
 * field name and in a value, DEL in a dimension; a rule id with ESC asked
 * of rl_allow(); a path with CRLF. */
START_TEST(rule_json_and_ids_bring_no_control_bytes)
{
    static const char *const sets[] = {
        "[{\"rule_id\":\"a\x1b[31mb\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":1}]",
        "[{\"rule_id\":\"a\\u001b[31mb\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":1}]",
        "[{\"rule_id\":\"ok\",\"dimension\":\"us\\u001b[2Jer\",\"limit\":1,"
        "\"window_seconds\":1}]",
        "[{\"rule_id\":\"ok\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":1,\"x\\r\\nX-Injected: 1\":1}]",
        "[{\"rule_id\":\"ok\",\"dimension\":\"us\\u007fer\",\"limit\":1,"
        "\"window_seconds\":1}]",
        "[{\"rule_id\":\"ok\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":1,\"match\":{\"tier\":1,\"endpoint\":"
        "\"/a\\r\\n\"}}]",
        "{\"version\":\"\\r\\n1\",\"rules\":[]}",
        "[{\"rule_id\":\"ok\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":1,\"updated_at\":\"2026\\r\\n\"}]",
        "[{\"rule_id\":\"ok\"\r\n,\x1b}]",
    };
    rl_limiter *lim = NULL;
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        ck_assert_int_ne(rl_rules_load_string(lim, sets[i]), RL_OK);
        no_control_bytes(lim, sets[i]);
    }
    ck_assert_int_eq(rl_allow(lim, "user:1", "no\x1b[2Jsuch\r\nrule", 1, &res),
                     RL_ENORULE);
    no_control_bytes(lim, "rl_allow rule id");
    ck_assert_int_ne(rl_allow(lim, "user:1\r\nX: y", "", 1, &res), RL_OK);
    no_control_bytes(lim, "rl_allow key");
    ck_assert_int_eq(rl_rules_load_file(lim, "/nonexistent\r\n\x1b[2J"),
                     RL_EIO);
    no_control_bytes(lim, "rl_rules_load_file path");
    rl_limiter_free(lim);
}
END_TEST

/* Option names and values with CRLF, ESC and DEL. */
START_TEST(option_values_bring_no_control_bytes)
{
    static const char *const opts[][2] = {
        {"timeout_ms", "5\r\nX-Injected: 1"},
        {"memory_max_bytes", "1\x1b[2JG"},
        {"fleet_size", "\x7f"},
        {"fleet_name", "a\r\nb"},
        {"redis_layout", "pl\r\nain"},
        {"rules_key", "rl:\x1brules"},
        {"rules_source", "file:"},
        {"rules_source", "nope\r\n://x"},
        {"na\x1b[2Jme", "1"},
        {"degraded_start", "1\r\n"},
    };
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        ck_assert_int_ne(rl_config_set(cfg, opts[i][0], opts[i][1]), RL_OK);
        no_control_bytes(NULL, opts[i][0]);
    }
    /* values kept for rl_limiter_new: a store and a rule set */
    ck_assert_int_eq(rl_config_set(cfg, "store", "nope\r\n\x1b://x"), RL_OK);
    ck_assert_int_ne(rl_limiter_new(&lim, cfg), RL_OK);
    no_control_bytes(NULL, "store");
    ck_assert_int_eq(rl_config_set(cfg, "store", "memory://"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", "[{\"rule_id\":\"\\u001b\"}]"),
                     RL_OK);
    ck_assert_int_ne(rl_limiter_new(&lim, cfg), RL_OK);
    no_control_bytes(NULL, "rules");
    rl_config_free(cfg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("messages");
    TCase *local = tcase_create("local"), *redis = tcase_create("redis");

    tcase_add_test(local, rule_json_and_ids_bring_no_control_bytes);
    tcase_add_test(local, option_values_bring_no_control_bytes);
    tcase_add_test(local, no_shape_of_uri_shows_its_password);
    tcase_add_test(local, rlctl_never_shows_a_password);
    tcase_set_timeout(local, 60);
    suite_add_tcase(s, local);
    if (rh_available()) {
        tcase_set_timeout(redis, 60);
        tcase_add_test(redis,
                       passwords_with_at_slash_question_colon_authenticate);
        tcase_add_test(redis, a_wrong_password_with_an_at_names_the_server_only);
        suite_add_tcase(s, redis);
    }
    return run_suite(s);
}
