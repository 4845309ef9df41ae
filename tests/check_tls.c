/*
 * check_tls.c -- TLS to Redis (rediss://, issue 14) against real
 * redis-servers started with a TLS port, on certificates made by the
 * openssl command at test time (tls_certs.h): the happy path decides
 * exactly as plain TCP does, by IP and by host name (SNI); a stranger CA,
 * a wrong name (IP and DNS), an expired certificate are each refused with
 * a message that says why and holds no password (and with degraded_start
 * the checks fall back); mutual TLS without a client certificate is
 * refused, with one it works; tls_verify=0 is the only way past a failed
 * verification; a connection killed by the server comes back resuming
 * its TLS session; the rules source (rules_source=rediss://) reads its
 * snapshot, follows a push and writes its dry-run reports over TLS,
 * gives way to rl_limiter_free() while the server hangs, and refuses a
 * stranger CA; a Redis Cluster over TLS (tls-cluster yes) decides through
 * its redirects.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dryrun_report.h"
#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "store_redis.h"
#include "testutil.h"
#include "timeutil.h"
#include "tls_certs.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW 4
#else
#define SLOW 1
#endif
#define WAIT_MS (15000 * SLOW)
#define PASSWORD "tls-secret-pw"
#define LIMIT 3

static const char rules[] =
    "[{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":3,"
    "\"window_seconds\":3600}]";

static char certs[64]; /* the runner's temp dir of certificates */

/* The last warning logged (the connector's thread). */
static pthread_mutex_t heard_mu = PTHREAD_MUTEX_INITIALIZER;
static char heard[512];

static void capture(void *arg, int level, const char *msg)
{
    (void)arg;
    pthread_mutex_lock(&heard_mu);
    if (level == RL_LOG_WARN)
        snprintf(heard, sizeof heard, "%s", msg);
    pthread_mutex_unlock(&heard_mu);
}

static int heard_says(const char *what)
{
    int yes;

    pthread_mutex_lock(&heard_mu);
    yes = strstr(heard, what) != NULL;
    pthread_mutex_unlock(&heard_mu);
    return yes;
}

static void make_certs(void)
{
    ck_assert_int_eq(tls_certs_make(certs, sizeof certs), 0);
}

static void remove_certs(void)
{
    tls_certs_remove(certs);
}

static const char *cert(const char *name)
{
    static char path[8][128];
    static int k;
    char *p = path[k++ % 8];

    snprintf(p, sizeof path[0], "%s/%s", certs, name);
    return p;
}

/* A TLS server with `server_cert` (key server.key), clients checked
 * against the CA when auth is "yes" or "optional". */
static void start_tls(rh_server *s, const char *server_cert, const char *auth)
{
    rh_tls t = {.cert_file = cert(server_cert), .key_file = cert("server.key"),
                .ca_file = cert("ca.crt"), .auth_clients = auth};

    ck_assert_int_eq(rh_start_tls(s, PASSWORD, &t), 0);
    ck_assert_int_gt(s->tls_port, 0);
}

/* rl_limiter_new on store with name/value pairs; RL_OK or its error,
 * the message into msg. */
static int open_limiter(rl_limiter **lim, const char *store,
                        const char *const *opts, char *msg, size_t len)
{
    rl_config *cfg = rl_config_new();
    int rc;

    ck_assert_int_eq(rl_config_set(cfg, "store", store), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "1000"), RL_OK);
    ck_assert_int_eq(rl_config_set_log(cfg, capture, NULL), RL_OK);
    for (int i = 0; opts && opts[i]; i += 2)
        ck_assert_msg(rl_config_set(cfg, opts[i], opts[i + 1]) == RL_OK,
                      "%s: %s", opts[i], rl_errmsg(NULL));
    *lim = NULL;
    rc = rl_limiter_new(lim, cfg);
    snprintf(msg, len, "%s", rc == RL_OK ? "" : rl_errmsg(NULL));
    rl_config_free(cfg);
    return rc;
}

static rl_limiter *must_open(const char *store, const char *const *opts)
{
    rl_limiter *lim;
    char msg[512];

    ck_assert_msg(open_limiter(&lim, store, opts, msg, sizeof msg) == RL_OK,
                  "%s", msg);
    return lim;
}

/* The store is refused, and the message says `why` (and no password). */
static void refused(const char *store, const char *const *opts,
                    const char *why)
{
    rl_limiter *lim;
    char msg[512];

    ck_assert_int_ne(open_limiter(&lim, store, opts, msg, sizeof msg), RL_OK);
    ck_assert_msg(strstr(msg, why), "\"%s\" does not say \"%s\"", msg, why);
    assert_clean_text(msg, PASSWORD);
}

/* Decided by Redis: 1 allowed, 0 denied. */
static int allow(rl_limiter *lim, const char *key)
{
    return allow_decided(lim, key, "r");
}

/* LIMIT allowed, then denied, as the rule says. */
static void limit_holds(rl_limiter *lim, const char *key)
{
    for (int i = 0; i < LIMIT; i++)
        ck_assert_msg(allow(lim, key) == 1, "%s: check %d denied", key, i);
    ck_assert_msg(allow(lim, key) == 0, "%s: over the limit allowed", key);
}

static void tls_uri(char *buf, size_t len, const char *host, int port)
{
    snprintf(buf, len, "rediss://:%s@%s:%d/0", PASSWORD, host, port);
}

/* The key's count in Redis, over plain TCP: the TLS checks were kept. */
static long long keys_in(const rh_server *s)
{
    redisContext *c = rh_connect(s);
    redisReply *r;
    long long n;

    ck_assert_ptr_nonnull(c);
    r = redisCommand(c, "DBSIZE");
    ck_assert_ptr_nonnull(r);
    n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* ---- the happy path ---------------------------------------------------- */

START_TEST(tls_decides_as_plain_tcp_does)
{
    rh_server s;
    char uri[256], plain[256];
    const char *opts[] = {"tls_ca_file", cert("ca.crt"), NULL};
    rl_limiter *tls, *byname, *tcp;
    store_redis_stats st;

    start_tls(&s, "server.crt", "no");
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    snprintf(plain, sizeof plain, "redis://:%s@127.0.0.1:%d/0", PASSWORD,
             s.port);
    tls = must_open(uri, opts);
    tcp = must_open(plain, NULL);
    limit_holds(tls, "user:over-tls");
    limit_holds(tcp, "user:over-tcp");
    /* One Redis: what one transport charged, the other sees. */
    ck_assert_int_eq(allow(tcp, "user:over-tls"), 0);
    ck_assert_int_eq(allow(tls, "user:over-tcp"), 0);
    ck_assert_int_ge(keys_in(&s), 2);
    store_redis_stats_get(limiter_store(tls), &st);
    ck_assert_int_ge(st.tls_handshakes, 1);
    store_redis_stats_get(limiter_store(tcp), &st);
    ck_assert_int_eq(st.tls_handshakes, 0);
    /* By name: SNI and the DNS name checked. */
    tls_uri(uri, sizeof uri, "localhost", s.tls_port);
    byname = must_open(uri, opts);
    limit_holds(byname, "user:by-name");
    rl_limiter_free(byname);
    rl_limiter_free(tls);
    rl_limiter_free(tcp);
    rh_stop(&s);
}
END_TEST

START_TEST(the_ca_can_be_a_directory)
{
    rh_server s;
    char uri[256], dir[128], cmd[600];
    rl_limiter *lim;

    /* OpenSSL's hashed-name layout, by `openssl rehash`. */
    snprintf(dir, sizeof dir, "%s/cadir", certs);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/ && openssl rehash "
             "%s 2>/dev/null", dir, cert("ca.crt"), dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    start_tls(&s, "server.crt", "no");
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    lim = must_open(uri, (const char *[]){"tls_ca_dir", dir, NULL});
    limit_holds(lim, "user:dir");
    rl_limiter_free(lim);
    rh_stop(&s);
}
END_TEST

/* ---- refusals ------------------------------------------------------------ */

START_TEST(a_stranger_ca_is_refused)
{
    rh_server s;
    char uri[256];
    const char *opts[] = {"tls_ca_file", cert("other.crt"), NULL};
    const char *off[] = {"tls_ca_file", cert("other.crt"), "tls_verify", "0",
                         NULL};
    const char *degraded[] = {"tls_ca_file", cert("other.crt"),
                              "degraded_start", "1", NULL};
    rl_limiter *lim;
    rl_result res = RL_RESULT_INIT;
    char want[128];

    start_tls(&s, "server.crt", "no");
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    snprintf(want, sizeof want, "TLS to 127.0.0.1:%d: certificate verify "
             "failed: self-signed certificate in certificate chain", s.tls_port);
    refused(uri, opts, want);
    /* degraded_start: it starts, every check falls back, and the log says
     * why. */
    lim = must_open(uri, degraded);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_allow(lim, "user:x", "r", 1, &res), RL_OK);
        ck_assert_msg(res.flags & DECIDED_ELSEWHERE, "decided by Redis");
    }
    for (int64_t start = now_ms(); !heard_says(want); sleep_ms(10))
        ck_assert_msg(now_ms() - start < WAIT_MS, "not logged: %s", want);
    ck_assert_msg(heard_says("not connected yet, checks follow the failure "
                             "modes"), "logged: %s", heard);
    ck_assert_msg(!heard_says(PASSWORD), "the password logged");
    rl_limiter_free(lim);
    /* The explicit opt-out, and only it, goes past. */
    lim = must_open(uri, off);
    limit_holds(lim, "user:unverified");
    rl_limiter_free(lim);
    rh_stop(&s);
}
END_TEST

START_TEST(a_wrong_name_is_refused)
{
    rh_server s;
    char uri[256], want[128];
    const char *opts[] = {"tls_ca_file", cert("ca.crt"), NULL};

    start_tls(&s, "wrongname.crt", "no");
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    snprintf(want, sizeof want, "TLS to 127.0.0.1:%d: certificate verify "
             "failed: IP address mismatch", s.tls_port);
    refused(uri, opts, want);
    tls_uri(uri, sizeof uri, "localhost", s.tls_port);
    snprintf(want, sizeof want, "TLS to localhost:%d: certificate verify "
             "failed: hostname mismatch", s.tls_port);
    refused(uri, opts, want);
    rh_stop(&s);
}
END_TEST

START_TEST(an_expired_certificate_is_refused)
{
    rh_server s;
    char uri[256], want[128];
    const char *opts[] = {"tls_ca_file", cert("ca.crt"), NULL};

    start_tls(&s, "expired.crt", "no");
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    snprintf(want, sizeof want, "TLS to 127.0.0.1:%d: certificate verify "
             "failed: certificate has expired", s.tls_port);
    refused(uri, opts, want);
    rh_stop(&s);
}
END_TEST

START_TEST(mutual_tls_needs_the_client_certificate)
{
    rh_server s;
    char uri[256], want[128], msg[512];
    const char *without[] = {"tls_ca_file", cert("ca.crt"), NULL};
    const char *with[] = {"tls_ca_file", cert("ca.crt"),
                          "tls_cert_file", cert("client.crt"),
                          "tls_key_file", cert("client.key"), NULL};
    const char *half[] = {"tls_ca_file", cert("ca.crt"),
                          "tls_cert_file", cert("client.crt"), NULL};
    rl_limiter *lim;

    start_tls(&s, "server.crt", "yes");
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    snprintf(want, sizeof want, "TLS to 127.0.0.1:%d: ", s.tls_port);
    refused(uri, without, want);
    /* The server's alert, or (when its reset came first) the hint. */
    ck_assert_int_ne(open_limiter(&lim, uri, without, msg, sizeof msg), RL_OK);
    ck_assert_msg(strstr(msg, "alert certificate required") ||
                  strstr(msg, "does the server require a client "
                         "certificate? tls_cert_file, tls_key_file"),
                  "\"%s\" does not say why", msg);
    refused(uri, half, "tls_cert_file and tls_key_file go together");
    lim = must_open(uri, with);
    limit_holds(lim, "user:mutual");
    rl_limiter_free(lim);
    rh_stop(&s);
}
END_TEST

START_TEST(files_that_cannot_be_read_are_named)
{
    char uri[] = "rediss://127.0.0.1:1/0";
    char want[512];

    /* the path and the errno, not OpenSSL 3's "unknown error" */
    refused(uri, (const char *[]){"tls_ca_file", "/nonexistent/ca.pem", NULL},
            "TLS: cannot load the CA file (tls_ca_file) "
            "\"/nonexistent/ca.pem\": No such file or directory");
    refused(uri, (const char *[]){"tls_ca_dir", "/nonexistent/certs", NULL},
            "TLS: cannot load the CA directory (tls_ca_dir) "
            "\"/nonexistent/certs\": No such file or directory");
    /* a file that opens but holds no certificate: OpenSSL's reason */
    snprintf(want, sizeof want, "cannot load the CA file (tls_ca_file) "
             "\"%s\": no certificate or crl found", cert("client.key"));
    refused(uri, (const char *[]){"tls_ca_file", cert("client.key"), NULL},
            want);
    refused(uri, (const char *[]){"tls_ca_file", cert("ca.crt"),
                                  "tls_cert_file", "/nonexistent/c.pem",
                                  "tls_key_file", cert("client.key"), NULL},
            "cannot load the client certificate (tls_cert_file) "
            "\"/nonexistent/c.pem\": No such file or directory");
    refused(uri, (const char *[]){"tls_ca_file", cert("ca.crt"),
                                  "tls_cert_file", cert("client.crt"),
                                  "tls_key_file", "/nonexistent/k.pem", NULL},
            "cannot use the client key (tls_key_file) "
            "\"/nonexistent/k.pem\": No such file or directory");
    snprintf(want, sizeof want, "cannot use the client key (tls_key_file) "
             "\"%s\": ", cert("server.key"));
    refused(uri, (const char *[]){"tls_ca_file", cert("ca.crt"),
                                  "tls_cert_file", cert("client.crt"),
                                  "tls_key_file", cert("server.key"), NULL},
            want);
}
END_TEST

/* ---- reconnects resume --------------------------------------------------- */

START_TEST(a_killed_connection_comes_back_resuming_its_session)
{
    rh_server s;
    char uri[256];
    const char *opts[] = {"tls_ca_file", cert("ca.crt"),
                          "redis_connections", "1",
                          "breaker_cooldown_ms", "50", NULL};
    rl_limiter *lim;
    store_redis_stats st;
    redisContext *c;
    rl_result res = RL_RESULT_INIT;
    int64_t start;

    start_tls(&s, "server.crt", "no");
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    lim = must_open(uri, opts);
    ck_assert_int_eq(allow(lim, "user:resume"), 1);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.tls_handshakes, 1);
    ck_assert_int_eq(st.tls_resumed, 0);
    c = rh_connect(&s);
    ck_assert_ptr_nonnull(c);
    freeReplyObject(redisCommand(c, "CLIENT KILL TYPE normal SKIPME yes"));
    redisFree(c);
    /* Back once the connector has handed a new connection over. */
    for (start = now_ms();; sleep_ms(10)) {
        store_redis_stats_get(limiter_store(lim), &st);
        if (st.tls_handshakes == 2)
            break;
        ck_assert_int_eq(rl_allow(lim, "user:look", "r", 0, &res), RL_OK);
        ck_assert_msg(now_ms() - start < WAIT_MS, "no reconnect");
    }
    ck_assert_int_eq(st.tls_resumed, 1);
    for (start = now_ms();; sleep_ms(10)) {
        ck_assert_int_eq(rl_allow(lim, "user:resume", "r", 0, &res), RL_OK);
        if (!(res.flags & DECIDED_ELSEWHERE))
            break;
        ck_assert_msg(now_ms() - start < WAIT_MS, "Redis never came back");
    }
    ck_assert_int_eq(allow(lim, "user:resume"), 1);
    ck_assert_int_eq(allow(lim, "user:resume"), 1);
    ck_assert_int_eq(allow(lim, "user:resume"), 0);
    rl_limiter_free(lim);
    rh_stop(&s);
}
END_TEST

/* ---- a cluster ------------------------------------------------------------- */

START_TEST(a_cluster_over_tls)
{
    rh_tls t = {.cert_file = cert("server.crt"), .key_file = cert("server.key"),
                .ca_file = cert("ca.crt"), .auth_clients = "no"};
    const char *opts[] = {"tls_ca_file", cert("ca.crt"), NULL};
    rh_cluster cl;
    char uri[512], key[32];
    size_t used;
    rl_limiter *lim;
    store_redis_stats st;
    int on[3] = {0};

    ck_assert_int_eq(rh_cluster_start_tls(&cl, 3, 0, 2000, &t), 0);
    used = (size_t)snprintf(uri, sizeof uri, "rediss-cluster://");
    for (int i = 0; i < cl.n; i++)
        used += (size_t)snprintf(uri + used, sizeof uri - used, "%s127.0.0.1:%d",
                                 i ? "," : "", cl.node[i].tls_port);
    lim = must_open(uri, opts);
    /* Keys on every master, each limit kept where its slot lives. */
    for (int k = 0; k < 12; k++) {
        snprintf(key, sizeof key, "user:%d", k);
        limit_holds(lim, key);
        on[rh_cluster_master_of(&cl, (int)rh_key_slot(key, strlen(key)))]++;
    }
    ck_assert_msg(on[0] && on[1] && on[2], "keys on %d, %d, %d masters",
                  on[0], on[1], on[2]);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_ge(st.tls_handshakes, 3);
    rl_limiter_free(lim);
    /* The same cluster's TLS ports without trusting its CA: refused. */
    refused(uri, NULL, "certificate verify failed");
    ck_assert_int_eq(rh_cluster_stop(&cl), 0);
}
END_TEST

/* ---- the rules source ------------------------------------------------------ */

/* The snapshot and its PUBLISH, written over the server's plain port
 * (contracts.md section 2: ratelimitd's part). */
static void publish_rules(const rh_server *s, long long version, int limit)
{
    redisContext *c = rh_connect(s);
    char text[256];
    redisReply *r;

    ck_assert_ptr_nonnull(c);
    snprintf(text, sizeof text, "{\"version\":%lld,\"rules\":[{\"rule_id\":"
             "\"r\",\"dimension\":\"user\",\"limit\":%d,"
             "\"window_seconds\":60}]}", version, limit);
    r = redisCommand(c, "SET rl:rules %s", text);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "SET failed");
    freeReplyObject(r);
    r = redisCommand(c, "PUBLISH rl:rules %lld", version);
    ck_assert_msg(r && r->type == REDIS_REPLY_INTEGER, "PUBLISH failed");
    freeReplyObject(r);
    redisFree(c);
}

/* A limiter on memory:// whose rules come from `source`. */
static int open_followed(rl_limiter **lim, const char *source,
                         const char *const *opts, char *msg, size_t len)
{
    rl_config *cfg = rl_config_new();
    int rc;

    ck_assert_int_eq(rl_config_set(cfg, "rules_source", source), RL_OK);
    /* an hour between timed reads: a change seen sooner came by push */
    ck_assert_int_eq(rl_config_set(cfg, "rules_refresh_s", "3600"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "connect_timeout_ms", "2000"), RL_OK);
    ck_assert_int_eq(rl_config_set_log(cfg, capture, NULL), RL_OK);
    for (int i = 0; opts && opts[i]; i += 2)
        ck_assert_msg(rl_config_set(cfg, opts[i], opts[i + 1]) == RL_OK,
                      "%s: %s", opts[i], rl_errmsg(NULL));
    *lim = NULL;
    rc = rl_limiter_new(lim, cfg);
    snprintf(msg, len, "%s", rc == RL_OK ? "" : rl_errmsg(NULL));
    rl_config_free(cfg);
    return rc;
}

/* rules_source=rediss://: the snapshot read at start over TLS, a pushed
 * change followed (SUBSCRIBE over TLS), the limit it sets enforced. */
START_TEST(the_rules_source_follows_a_tls_server)
{
    rh_server s;
    char uri[256], msg[512];
    const char *opts[] = {"tls_ca_file", cert("ca.crt"), NULL};
    rl_limiter *lim;
    rl_result res = RL_RESULT_INIT;
    int64_t start;

    start_tls(&s, "server.crt", "no");
    publish_rules(&s, 1, 1);
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    ck_assert_msg(open_followed(&lim, uri, opts, msg, sizeof msg) == RL_OK,
                  "%s", msg);
    ck_assert_int_eq(rl_rules_version(lim), 1);
    ck_assert_int_eq(rl_allow(lim, "user:a", "r", 1, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_int_eq(rl_allow(lim, "user:a", "r", 1, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0); /* limit 1 */
    publish_rules(&s, 2, 5);
    for (start = now_ms(); rl_rules_version(lim) != 2; sleep_ms(5))
        ck_assert_msg(now_ms() - start < WAIT_MS, "version 2 not taken");
    printf("rules source over TLS: a push taken after %lld ms\n",
           (long long)(now_ms() - start));
    ck_assert_int_eq(rl_allow(lim, "user:b", "r", 1, &res), RL_OK);
    ck_assert_int_eq(res.remaining, 4); /* limit 5 */
    rl_limiter_free(lim);
    rh_stop(&s);
}
END_TEST

/* A CA that did not sign the server's certificate: the limiter is not
 * made, and the message says why (no password); with degraded_start it
 * starts without rules and the log says why. */
START_TEST(the_rules_source_refuses_a_stranger_ca)
{
    rh_server s;
    char uri[256], msg[512], want[160];
    const char *opts[] = {"tls_ca_file", cert("other.crt"), NULL};
    const char *degraded[] = {"tls_ca_file", cert("other.crt"),
                              "degraded_start", "1", NULL};
    rl_limiter *lim;

    start_tls(&s, "server.crt", "no");
    publish_rules(&s, 1, 1);
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    snprintf(want, sizeof want, "TLS to 127.0.0.1:%d: certificate verify "
             "failed: self-signed certificate in certificate chain", s.tls_port);
    ck_assert_int_eq(open_followed(&lim, uri, opts, msg, sizeof msg),
                     RL_ESTORE);
    ck_assert_msg(strstr(msg, want), "\"%s\" does not say \"%s\"", msg, want);
    ck_assert_msg(!strstr(msg, PASSWORD), "the password in \"%s\"", msg);
    ck_assert_int_eq(open_followed(&lim, uri, degraded, msg, sizeof msg),
                     RL_OK);
    ck_assert_msg(heard_says(want), "logged: %s", heard);
    ck_assert_msg(!heard_says(PASSWORD), "the password logged");
    ck_assert_int_eq(rl_rules_version(lim), 0);
    rl_limiter_free(lim);
    rh_stop(&s);
}
END_TEST

/* The source's tick writes the dry-run report of a rule in mode log on
 * its TLS connection (rr_replies), and it reads in Redis as counted. */
START_TEST(the_rules_source_reports_dry_runs_over_tls)
{
    rh_server s;
    char uri[256], msg[512], err[200];
    const char *opts[] = {"tls_ca_file", cert("ca.crt"), NULL};
    const char *set = "{\"version\":1,\"rules\":[{\"rule_id\":\"r\","
                      "\"dimension\":\"user\",\"limit\":1,"
                      "\"window_seconds\":60,\"mode\":\"log\"}]}";
    rl_limiter *lim;
    rl_result res = RL_RESULT_INIT;
    dryrun_report rep;
    redisContext *c;
    redisReply *r;
    int64_t start;

    start_tls(&s, "server.crt", "no");
    c = rh_connect(&s);
    ck_assert_ptr_nonnull(c);
    r = redisCommand(c, "SET rl:rules %s", set);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "SET failed");
    freeReplyObject(r);
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    ck_assert_msg(open_followed(&lim, uri, opts, msg, sizeof msg) == RL_OK,
                  "%s", msg);
    for (int k = 0; k < 3; k++) { /* mode log: all allowed, 2 would deny */
        ck_assert_int_eq(rl_allow(lim, "user:a", "r", 1, &res), RL_OK);
        ck_assert_int_eq(res.allowed, 1);
    }
    for (start = now_ms(); now_ms() - start < WAIT_MS; sleep_ms(50)) {
        ck_assert_int_eq(dryrun_fetch(c, "r", &rep, err, sizeof err), RL_OK);
        if (rep.limiters == 1)
            break;
    }
    ck_assert_int_eq(rep.limiters, 1);
    ck_assert_int_eq(rep.checks, 3);
    ck_assert_int_eq(rep.would_deny, 2);
    redisFree(c);
    rl_limiter_free(lim);
    rh_stop(&s);
}
END_TEST

/* A read over TLS waiting on a hung server gives way to
 * rl_limiter_free() at once. */
START_TEST(the_rules_source_frees_promptly_while_tls_hangs)
{
    rh_server s;
    char uri[256], msg[512];
    const char *opts[] = {"tls_ca_file", cert("ca.crt"), "connect_timeout_ms",
                          "10000", "rules_refresh_s", "1", NULL};
    rl_limiter *lim;
    int64_t start, took;

    start_tls(&s, "server.crt", "no");
    publish_rules(&s, 1, 1);
    tls_uri(uri, sizeof uri, "127.0.0.1", s.tls_port);
    ck_assert_msg(open_followed(&lim, uri, opts, msg, sizeof msg) == RL_OK,
                  "%s", msg);
    ck_assert_int_eq(rh_pause(&s), 0);
    sleep_ms(1500); /* a pull is now waiting on the hung server */
    start = now_ms();
    rl_limiter_free(lim);
    took = now_ms() - start;
    printf("rules source over TLS: free while Redis hangs: %lld ms\n",
           (long long)took);
    ck_assert_msg(took < 500 * SLOW, "rl_limiter_free took %lld ms",
                  (long long)took);
    ck_assert_int_eq(rh_resume(&s), 0);
    rh_stop(&s);
}
END_TEST

START_TEST(the_rules_source_takes_rediss)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "rules_source",
                                   "rediss://:" PASSWORD "@127.0.0.1:1/0"),
                     RL_OK);
    rl_config_free(cfg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tls");
    TCase *one = tcase_create("server"), *opts = tcase_create("options");

    tcase_add_unchecked_fixture(opts, make_certs, remove_certs);
    tcase_add_test(opts, files_that_cannot_be_read_are_named);
    tcase_add_test(opts, the_rules_source_takes_rediss);
    suite_add_tcase(s, opts);
    if (rh_available()) {
        tcase_set_timeout(one, 60 * SLOW);
        tcase_add_unchecked_fixture(one, make_certs, remove_certs);
        tcase_add_test(one, tls_decides_as_plain_tcp_does);
        tcase_add_test(one, the_ca_can_be_a_directory);
        tcase_add_test(one, a_stranger_ca_is_refused);
        tcase_add_test(one, a_wrong_name_is_refused);
        tcase_add_test(one, an_expired_certificate_is_refused);
        tcase_add_test(one, mutual_tls_needs_the_client_certificate);
        tcase_add_test(one, a_killed_connection_comes_back_resuming_its_session);
        tcase_add_test(one, the_rules_source_follows_a_tls_server);
        tcase_add_test(one, the_rules_source_refuses_a_stranger_ca);
        tcase_add_test(one, the_rules_source_reports_dry_runs_over_tls);
        tcase_add_test(one, the_rules_source_frees_promptly_while_tls_hangs);
        suite_add_tcase(s, one);
    }
    if (rh_cluster_available()) {
        TCase *cluster = tcase_create("cluster");
        tcase_set_timeout(cluster, 120 * SLOW);
        tcase_add_unchecked_fixture(cluster, make_certs, remove_certs);
        tcase_add_test(cluster, a_cluster_over_tls);
        suite_add_tcase(s, cluster);
    }
    return run_suite(s);
}
