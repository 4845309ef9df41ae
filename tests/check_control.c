/*
 * check_control.c -- the control path end to end, with every part real: a
 * redis-server, ratelimitd on it, two limiter processes whose rules come
 * from it (rules_source), and rlctl, the operator's command line, making
 * the changes.  What an operator does reaches the fleet: a PUT is
 * enforced by both limiters by the push (how fast: bench/swapbench's
 * put_push, docs/BENCHMARKS.md), within the refresh interval by the pull
 * alone; a DELETE stops enforcement; a stale
 * --if-match changes nothing; a rule dry-run in mode log is reported
 * fleet-wide (rlctl dryrun) and then enforced (rlctl mode); rlctl's exit
 * codes are what rlctl(1) promises.  The same again with each part as
 * the least-privileged Redis ACL user docs/REDIS.md gives it (ratelimitd, the
 * limiters, rlctl dryrun's reader; tests/acl_rules.h), whose passwords
 * hold '@' and '/' as they are; ratelimitd's log shows none of them.
 * And again over TLS only (rediss://: ratelimitd publishes, the limiters
 * read and subscribe, all verifying the server against a CA made by
 * openssl at test time); ratelimitd told a stranger CA says why it cannot
 * publish.
 *
 * The limiters are child processes (a limiter per process, as in a
 * fleet), driven over pipes by a line protocol: "allow KEY RULE COST"
 * answers "<rc> <allowed> <remaining> <flags>", "errors" the rules
 * source's failed reads (rl_rules_status_get), "version" the rule set's
 * version, "quit" ends it.  Every wait is for a condition, with a deadline.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acl_rules.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "rld_harness.h"
#include "timeutil.h"
#include "tls_certs.h"
#include "testutil.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW 4 /* sanitizer builds: check memory and races, not time */
#else
#define SLOW 1
#endif
#define WAIT_MS 15000

typedef struct worker {
    pid_t pid;
    FILE *to, *from;
} worker;

static rh_server redis;
static rld service;
static char token_file[320];
static char uri[256];        /* the limiters' store and rules source */
static char rld_uri[256];    /* ratelimitd's --redis                 */
static char report_uri[256]; /* rlctl dryrun's --redis              */
static char certs[128];      /* the TLS case: the certificates' dir  */
static char ca_file[200];    /*   the CA every party trusts ("": plain) */

#define RLD_PASSWORD "rld@pw/1"
#define LIMITER_PASSWORD "lim@pw/2"
#define REPORT_PASSWORD "rep@pw/3"

/* ---- helpers ------------------------------------------------------------- */

/* rlctl with these arguments against the service; its exit status, its
 * standard output into out (may be NULL). */
static int rlctl(char *out, size_t len, const char *args)
{
    const char *bin = getenv("RLCTL");
    char cmd[2048], buf[4096];
    size_t n = 0, got;
    FILE *p;
    int st;

    snprintf(cmd, sizeof cmd, "RLCTL_TOKEN_FILE=%s '%s' --server %s %s "
             "2>&1", token_file, bin ? bin : "tools/rlctl/rlctl",
             service.url, args);
    ck_assert_ptr_nonnull(p = popen(cmd, "r"));
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) {
        if (out && n + got < len) {
            memcpy(out + n, buf, got);
            n += got;
        }
    }
    if (out)
        out[n] = 0;
    st = pclose(p);
    ck_assert_msg(WIFEXITED(st), "rlctl %s: did not exit", args);
    return WEXITSTATUS(st);
}

static void rlctl_ok(const char *args)
{
    char out[4096];
    int rc = rlctl(out, sizeof out, args);

    ck_assert_msg(rc == 0, "rlctl %s: exit %d:\n%s", args, rc, out);
}

/* ---- the limiter processes ------------------------------------------------ */

/* The child: a limiter on Redis with its rules from it, answering lines
 * until its input ends. */
static void worker_main(int in, int out, const char *const *opts)
{
    FILE *from = fdopen(in, "r"), *to = fdopen(out, "w");
    rl_config *cfg = rl_config_new();
    rl_limiter *lim;
    char line[512], key[300], rule[80];
    long long cost;
    rl_result res = RL_RESULT_INIT;

    rl_config_set(cfg, "store", uri);
    rl_config_set(cfg, "rules_source", uri);
    rl_config_set(cfg, "timeout_ms", "1000");
    for (int i = 0; opts && opts[i]; i += 2)
        rl_config_set(cfg, opts[i], opts[i + 1]);
    if (ca_file[0])
        rl_config_set(cfg, "tls_ca_file", ca_file);
    if (rl_limiter_new(&lim, cfg) != RL_OK) {
        fprintf(to, "error %s\n", rl_errmsg(NULL));
        fflush(to);
        _exit(1);
    }
    rl_config_free(cfg);
    fprintf(to, "ready\n");
    fflush(to);
    while (fgets(line, sizeof line, from) && strcmp(line, "quit\n") != 0) {
        if (sscanf(line, "allow %299s %79s %lld", key, rule, &cost) == 3) {
            int rc = rl_allow(lim, key, rule, cost, &res);
            fprintf(to, "%d %d %lld %u\n", rc, res.allowed,
                    (long long)res.remaining, res.flags);
        } else if (strcmp(line, "errors\n") == 0) {
            rl_rules_status st = RL_RULES_STATUS_INIT;
            rl_rules_status_get(lim, &st);
            fprintf(to, "%llu\n", (unsigned long long)st.source_errors);
        } else {
            fprintf(to, "%lld\n", (long long)rl_rules_version(lim));
        }
        fflush(to);
    }
    rl_limiter_free(lim);
    _exit(0);
}

/* opts: NULL-terminated name, value pairs of more options. */
static long long version_of(worker *w);

/* The limiter runs a rule set from the source (the service put one at
 * setup): its first read may finish after rl_limiter_new() returned (a
 * slow one, under a sanitizer: ASan once saw RL_ENORULE). */
static void worker_has_rules(worker *w)
{
    int64_t start = now_ms();

    while (version_of(w) < 1) {
        ck_assert_msg(now_ms() - start < WAIT_MS, "no rule set read");
        sleep_ms(5);
    }
}

static void worker_start(worker *w, const char *const *opts)
{
    int down[2], up[2];
    char line[512];

    ck_assert_int_eq(pipe(down), 0);
    ck_assert_int_eq(pipe(up), 0);
    fflush(NULL);
    ck_assert_int_ge(w->pid = fork(), 0);
    if (w->pid == 0) {
        close(down[1]);
        close(up[0]);
        worker_main(down[0], up[1], opts);
    }
    close(down[0]);
    close(up[1]);
    w->to = fdopen(down[1], "w");
    w->from = fdopen(up[0], "r");
    ck_assert_ptr_nonnull(fgets(line, sizeof line, w->from));
    ck_assert_msg(strcmp(line, "ready\n") == 0, "limiter: %s", line);
    worker_has_rules(w);
}

static void worker_stop(worker *w)
{
    int st;

    /* "quit", not EOF: a sibling forked later holds our pipe's write end */
    fputs("quit\n", w->to);
    fclose(w->to);
    fclose(w->from);
    ck_assert_int_eq(waitpid(w->pid, &st, 0), w->pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "limiter exit");
}

static void ask(worker *w, const char *q, char *a, size_t len)
{
    fprintf(w->to, "%s\n", q);
    fflush(w->to);
    ck_assert_ptr_nonnull(fgets(a, (int)len, w->from));
}

static long long version_of(worker *w)
{
    char a[64];

    ask(w, "version", a, sizeof a);
    return atoll(a);
}

/* The rules source's failed reads in the limiter: each is followed by a
 * reconnect, whose first step is a read of the set (a pull). */
static long long source_errors_of(worker *w)
{
    char a[64];

    ask(w, "errors", a, sizeof a);
    return atoll(a);
}

/* rl_allow in the limiter: 1 allowed, 0 denied; rc and flags out. */
static int allow(worker *w, const char *key, const char *rule, int *rc,
                 unsigned *flags)
{
    char q[400], a[128];
    int allowed = -1;
    long long remaining;

    snprintf(q, sizeof q, "allow %s %s 1", key, rule);
    ask(w, q, a, sizeof a);
    ck_assert_int_eq(sscanf(a, "%d %d %lld %u", rc, &allowed, &remaining,
                            flags), 4);
    return allowed;
}

static int allowed(worker *w, const char *key, const char *rule)
{
    unsigned flags;
    int rc, ok = allow(w, key, rule, &rc, &flags);

    ck_assert_int_eq(rc, RL_OK);
    return ok;
}

/* Wait until the limiter runs version v or later: the ms it took, or -1. */
static int64_t wait_version(worker *w, long long v, int64_t start)
{
    while (now_ms() - start < WAIT_MS) {
        if (version_of(w) >= v)
            return now_ms() - start;
        sleep_ms(1);
    }
    return -1;
}

/* The set version the service holds now. */
static long long service_version(void)
{
    char out[4096];
    long long v = -1;

    ck_assert_int_eq(rlctl(out, sizeof out, "list"), 0);
    ck_assert_int_eq(sscanf(out, "rule set version %lld", &v), 1);
    return v;
}

/* ---- fixture ----------------------------------------------------------------- */

/* Redis, then ratelimitd on it (as rld_uri), rlctl's token, and a first
 * rule put. */
static void start_all(void)
{
    const char *args[] = {"--redis", rld_uri, ca_file[0] ? "--tls-ca-file"
                          : NULL, ca_file, NULL};
    FILE *f;

    memset(&service, 0, sizeof service);
    ck_assert_msg(rld_available(), "ratelimitd not built");
    ck_assert_int_eq(rld_start(&service, args), 0);
    snprintf(token_file, sizeof token_file, "%s/rlctl-token", service.dir);
    ck_assert_ptr_nonnull(f = fopen(token_file, "w"));
    fprintf(f, "%s\n", RLD_ALICE_TOKEN);
    fclose(f);
    /* the service's first snapshot (version 0, empty) is in Redis */
    rlctl_ok("put r --dimension user --limit 3 --window 60");
}

static void setup(void)
{
    ck_assert_int_eq(rh_start(&redis, NULL), 0);
    ck_assert_ptr_nonnull(rh_uri(&redis, uri, sizeof uri));
    strcpy(rld_uri, uri);
    strcpy(report_uri, uri);
    start_all();
}

/* Each part as its own ACL user, created from docs/REDIS.md's lines. */
static void acl_setup(void)
{
    ck_assert_int_eq(rh_start(&redis, NULL), 0);
    acl_create(&redis, "ratelimit", LIMITER_PASSWORD);
    acl_create(&redis, "ratelimitd", RLD_PASSWORD);
    acl_create(&redis, "rl-report", REPORT_PASSWORD);
    snprintf(uri, sizeof uri, "redis://ratelimit:" LIMITER_PASSWORD
             "@127.0.0.1:%d/0", redis.port);
    snprintf(rld_uri, sizeof rld_uri, "redis://ratelimitd:" RLD_PASSWORD
             "@127.0.0.1:%d/0", redis.port);
    snprintf(report_uri, sizeof report_uri, "redis://rl-report:"
             REPORT_PASSWORD "@127.0.0.1:%d/0", redis.port);
    start_all();
}

/* Redis over TLS only (its plaintext port is the harness's own), every
 * party on rediss:// with the CA. */
static void tls_setup(void)
{
    rh_tls t = {.auth_clients = "no"};
    char cert[200], key[200];

    ck_assert_int_eq(tls_certs_make(certs, sizeof certs), 0);
    snprintf(ca_file, sizeof ca_file, "%s/ca.crt", certs);
    snprintf(cert, sizeof cert, "%s/server.crt", certs);
    snprintf(key, sizeof key, "%s/server.key", certs);
    t.cert_file = cert;
    t.key_file = key;
    t.ca_file = ca_file;
    ck_assert_int_eq(rh_start_tls(&redis, NULL, &t), 0);
    snprintf(uri, sizeof uri, "rediss://127.0.0.1:%d/0", redis.tls_port);
    strcpy(rld_uri, uri);
    start_all();
}

static void teardown(void)
{
    rld_cleanup(&service);
    rh_stop(&redis);
    if (certs[0])
        tls_certs_remove(certs);
    certs[0] = ca_file[0] = '\0';
}

/* ---- tests -------------------------------------------------------------------- */

/* A PUT reaches both limiters by the push: their pull is an hour away,
 * and neither lost its connection (a reconnect reads the set too), so
 * the new set came by the message.  How fast is a figure, measured by
 * bench/swapbench (put_push: ms at p50 and p99 against the PUT's own
 * time), not a bound raced here: on two busy cores a limiter process
 * can wait past any such bound for its turn. */
START_TEST(put_is_enforced_by_both_by_the_push)
{
    const char *opts[] = {"rules_refresh_s", "3600", NULL}; /* push only */
    worker a, b;
    int64_t start, ta, tb;
    long long v, ea, eb, subs = 0;

    worker_start(&a, opts);
    worker_start(&b, opts);
    v = service_version();
    ck_assert_int_eq(version_of(&a), v);
    ck_assert_int_eq(version_of(&b), v);
    /* one limit for the fleet: 3 in all */
    ck_assert_int_eq(allowed(&a, "user:1", "r"), 1);
    ck_assert_int_eq(allowed(&b, "user:1", "r"), 1);
    ck_assert_int_eq(allowed(&a, "user:1", "r"), 1);
    ck_assert_int_eq(allowed(&b, "user:1", "r"), 0);
    ck_assert_int_eq(allowed(&a, "user:1", "r"), 0);
    /* both subscribed before the change (the pull is an hour away) */
    for (start = now_ms(); subs != 2; sleep_ms(5)) {
        redisContext *c = rh_connect(&redis);
        redisReply *r = redisCommand(c, "PUBSUB NUMSUB rl:rules");
        subs = r && r->elements == 2 ? r->element[1]->integer : 0;
        freeReplyObject(r);
        redisFree(c);
        ck_assert_msg(subs == 2 || now_ms() - start < WAIT_MS,
                      "%lld limiters subscribed", subs);
    }
    ea = source_errors_of(&a);
    eb = source_errors_of(&b);
    rlctl_ok("put r --dimension user --limit 5 --window 60");
    start = now_ms();
    ta = wait_version(&a, v + 1, start);
    tb = wait_version(&b, v + 1, start);
    printf("push: after rlctl put returned, limiter a ran the new set in "
           "%lld ms, b in %lld ms\n", (long long)ta, (long long)tb);
    ck_assert_msg(ta >= 0, "a never ran the new set");
    ck_assert_msg(tb >= 0, "b never ran the new set");
    ck_assert_int_eq(source_errors_of(&a), ea); /* no reconnect's read */
    ck_assert_int_eq(source_errors_of(&b), eb);
    /* a raised limit applies at once to the window's count: 2 more */
    ck_assert_int_eq(allowed(&b, "user:1", "r"), 1);
    ck_assert_int_eq(allowed(&a, "user:1", "r"), 1);
    ck_assert_int_eq(allowed(&b, "user:1", "r"), 0);
    worker_stop(&a);
    worker_stop(&b);
}
END_TEST

START_TEST(pull_alone_follows_within_the_refresh_interval)
{
    const char *opts[] = {"rules_push", "0", "rules_refresh_s", "1", NULL};
    worker a, b;
    int64_t start, ta, tb;
    long long v;

    worker_start(&a, opts);
    worker_start(&b, opts);
    v = service_version();
    rlctl_ok("put r --dimension user --limit 1 --window 60");
    start = now_ms();
    ta = wait_version(&a, v + 1, start);
    tb = wait_version(&b, v + 1, start);
    printf("pull (1 s, no push): a in %lld ms, b in %lld ms\n",
           (long long)ta, (long long)tb);
    /* a pull every second: within one interval and one read */
    ck_assert_msg(ta >= 0 && ta < 1500 * SLOW, "a: %lld ms", (long long)ta);
    ck_assert_msg(tb >= 0 && tb < 1500 * SLOW, "b: %lld ms", (long long)tb);
    ck_assert_int_eq(allowed(&a, "user:2", "r"), 1);
    ck_assert_int_eq(allowed(&b, "user:2", "r"), 0);
    worker_stop(&a);
    worker_stop(&b);
}
END_TEST

START_TEST(delete_stops_enforcement)
{
    worker a, b;
    unsigned flags;
    int rc;
    long long v;

    worker_start(&a, NULL);
    worker_start(&b, NULL);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(allowed(i % 2 ? &a : &b, "user:3", "r"), 1);
    ck_assert_int_eq(allowed(&a, "user:3", "r"), 0);
    v = service_version();
    rlctl_ok("delete r");
    ck_assert_int_ge(wait_version(&a, v + 1, now_ms()), 0);
    ck_assert_int_ge(wait_version(&b, v + 1, now_ms()), 0);
    /* the rule is gone from both: nothing limits user:3 by it */
    allow(&a, "user:3", "r", &rc, &flags);
    ck_assert_int_eq(rc, RL_ENORULE);
    allow(&b, "user:3", "r", &rc, &flags);
    ck_assert_int_eq(rc, RL_ENORULE);
    worker_stop(&a);
    worker_stop(&b);
}
END_TEST

START_TEST(stale_if_match_changes_nothing)
{
    char out[4096], args[128];
    long long v = service_version();
    worker a;

    worker_start(&a, NULL);
    rlctl_ok("put r --dimension user --limit 4 --window 60"); /* v + 1 */
    ck_assert_int_ge(wait_version(&a, v + 1, now_ms()), 0);
    /* an operator who read version v writes: refused, nothing changes */
    snprintf(args, sizeof args, "put r --dimension user --limit 50 "
             "--window 60 --if-match %lld", v);
    ck_assert_int_eq(rlctl(out, sizeof out, args), 1);
    ck_assert_msg(strstr(out, "412"), "%s", out);
    ck_assert_int_eq(service_version(), v + 1);
    ck_assert_int_eq(rlctl(out, sizeof out, "get r"), 0);
    ck_assert_msg(strstr(out, "\"limit\": 4"), "%s", out);
    sleep_ms(200);
    ck_assert_int_eq(version_of(&a), v + 1);
    /* with the version it has now, the same write goes through */
    snprintf(args, sizeof args, "put r --dimension user --limit 50 "
             "--window 60 --if-match %lld", v + 1);
    rlctl_ok(args);
    ck_assert_int_ge(wait_version(&a, v + 2, now_ms()), 0);
    worker_stop(&a);
}
END_TEST

/* A rule in mode log: every request passes, flagged; the fleet's report
 * says what it would have rejected; rlctl mode ... enforce then makes
 * both limiters reject. */
START_TEST(dry_run_then_enforce)
{
    char out[4096], args[512];
    unsigned flags;
    worker a, b;
    long long v;
    int rc;

    rlctl_ok("put login --dimension ip --endpoint /login --limit 2 "
             "--window 60 --mode log --failure-mode closed");
    worker_start(&a, NULL);
    worker_start(&b, NULL);
    /* 3 clients, 4 tries each, across both: 2 of each would be denied */
    for (int i = 0; i < 12; i++) {
        char key[32];
        snprintf(key, sizeof key, "ip:10.0.0.%d", i % 3);
        ck_assert_int_eq(allow(i % 2 ? &a : &b, key, "login", &rc, &flags),
                         1);
        ck_assert_int_eq(rc, RL_OK);
        ck_assert_int_eq(!!(flags & RL_FLAG_SOFT), i >= 6);
    }
    /* the reports reach Redis on the limiters' next 5 s tick; a report is
     * a limiter's counts at its last tick, which may have come while the
     * checks ran: wait for the totals, then judge */
    snprintf(args, sizeof args, "dryrun login --redis '%s'", report_uri);
    for (int64_t t = now_ms(); now_ms() - t < 12000 * SLOW; sleep_ms(200)) {
        ck_assert_int_eq(rlctl(out, sizeof out, args), 0);
        if (strstr(out, "from 2 limiters") && strstr(out, "12 checks"))
            break;
    }
    printf("%s", out);
    ck_assert_msg(strstr(out, "12 checks, 6 would have been denied, about 3 "
                              "distinct clients; from 2 limiters"), "%s", out);
    v = service_version();
    rlctl_ok("mode login enforce");
    ck_assert_int_ge(wait_version(&a, v + 1, now_ms()), 0);
    ck_assert_int_ge(wait_version(&b, v + 1, now_ms()), 0);
    ck_assert_int_eq(allowed(&a, "ip:10.0.0.0", "login"), 0);
    ck_assert_int_eq(allowed(&b, "ip:10.0.0.9", "login"), 1);
    ck_assert_int_eq(rlctl(out, sizeof out, "get login"), 0);
    ck_assert_msg(strstr(out, "\"mode\": \"enforce\"") &&
                  strstr(out, "\"failure_mode\": \"closed\""), "%s", out);
    worker_stop(&a);
    worker_stop(&b);
}
END_TEST

/* Wait (WAIT_MS at most) until file `path` holds `want`; its text into
 * out.  1 if it came. */
static int wait_file(const char *path, const char *want, char *out,
                     size_t len)
{
    for (int64_t t = now_ms(); now_ms() - t < WAIT_MS; sleep_ms(20)) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(out, 1, len - 1, f) : 0;
        if (f)
            fclose(f);
        out[n] = 0;
        if (strstr(out, want))
            return 1;
    }
    return 0;
}

START_TEST(rlctl_exit_codes_and_output)
{
    char out[8192], args[1024];
    long long v = service_version();

    ck_assert_int_eq(rlctl(out, sizeof out, "get r"), 0);
    ck_assert_msg(strstr(out, "\"rule_id\": \"r\""), "%s", out);
    ck_assert_int_eq(rlctl(out, sizeof out, "list"), 0);
    ck_assert_msg(strstr(out, "1 rule\n") && strstr(out, "sliding_window"),
                  "%s", out);
    ck_assert_int_eq(rlctl(out, sizeof out, "history r"), 0);
    ck_assert_msg(strstr(out, "\"by\": \"alice\""), "%s", out);
    /* refused: no such rule, a rule the library refuses */
    ck_assert_int_eq(rlctl(out, sizeof out, "get nope"), 1);
    ck_assert_int_eq(rlctl(out, sizeof out, "put r --dimension user "
                                            "--limit 0 --window 60"), 1);
    ck_assert_msg(strstr(out, "limit"), "%s", out);
    /* usage: a bad id, a missing argument, an unknown command */
    ck_assert_int_eq(rlctl(out, sizeof out, "get ../x"), 2);
    ck_assert_int_eq(rlctl(out, sizeof out, "put"), 2);
    ck_assert_int_eq(rlctl(out, sizeof out, "frobnicate"), 2);
    ck_assert_int_eq(service_version(), v); /* none of that changed it */
    /* check: the rule set from the service, the key charged in Redis */
    snprintf(args, sizeof args, "check user:9 r --store '%s'", uri);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rlctl(out, sizeof out, args), 0);
    ck_assert_int_eq(rlctl(out, sizeof out, args), 1);
    ck_assert_msg(strstr(out, "denied") && strstr(out, "Retry-After"),
                  "%s", out);
    /* watch: the version now, then one made meanwhile */
    snprintf(args, sizeof args, "RLCTL_TOKEN_FILE=%s '%s' --server %s watch "
             "--interval 50 --count 2 > %s/watch.out 2>&1 &", token_file,
             getenv("RLCTL") ? getenv("RLCTL") : "tools/rlctl/rlctl",
             service.url, service.dir);
    ck_assert_int_eq(system(args), 0);
    snprintf(args, sizeof args, "%s/watch.out", service.dir);
    /* the change only once watch has told the version it started at (a
     * slow start, under a sanitizer, would read the new one first) */
    ck_assert_msg(wait_file(args, " rules", out, sizeof out), "%s", out);
    rlctl_ok("put w --dimension ip --limit 9 --window 1");
    ck_assert_msg(wait_file(args, "+w", out, sizeof out), "%s", out);
    ck_assert_msg(strstr(out, "2 rules +w"), "%s", out);
    /* unreachable: the service stopped */
    ck_assert_int_eq(rld_stop(&service), 0);
    ck_assert_int_eq(rlctl(out, sizeof out, "list"), 3);
    ck_assert_msg(strstr(out, "did not answer"), "%s", out);
}
END_TEST

/* rlctl put's flags on a rule that exists change only what they name
 * (the README's "rlctl put ID --limit 300" keeps the endpoint), under
 * If-Match on the version read; usage errors exit 2. */
START_TEST(rlctl_put_flags_change_only_what_they_name)
{
    char out[8192], args[256];

    rlctl_ok("put p --dimension user --limit 5 --window 60 --algorithm "
             "token_bucket --burst 8 --endpoint /api/** --tier free");
    rlctl_ok("put p --limit 300");
    ck_assert_int_eq(rlctl(out, sizeof out, "get p"), 0);
    ck_assert_msg(strstr(out, "\"limit\": 300") &&
                  strstr(out, "\"endpoint\": \"/api/**\"") &&
                  strstr(out, "\"tier\": \"free\"") &&
                  strstr(out, "\"burst\": 8") &&
                  strstr(out, "\"algorithm\": \"token_bucket\""), "%s", out);
    rlctl_ok("put p --tier pro");
    ck_assert_int_eq(rlctl(out, sizeof out, "get p"), 0);
    ck_assert_msg(strstr(out, "\"endpoint\": \"/api/**\"") &&
                  strstr(out, "\"tier\": \"pro\"") &&
                  strstr(out, "\"limit\": 300"), "%s", out);
    /* a stale --if-match still refuses, a created rule needs its flags */
    ck_assert_int_eq(rlctl(out, sizeof out, "put p --limit 7 --if-match 1"),
                     1);
    ck_assert_int_eq(rlctl(out, sizeof out, "put q --limit 7"), 1);
    ck_assert_msg(strstr(out, "dimension"), "%s", out);
    /* usage: an unknown flag, a flag without its value, a bad --timeout */
    ck_assert_int_eq(rlctl(out, sizeof out, "put p --colour red"), 2);
    ck_assert_int_eq(rlctl(out, sizeof out, "put p --limit"), 2);
    ck_assert_int_eq(rlctl(out, sizeof out, "--timeout 0 list"), 2);
    ck_assert_int_eq(rlctl(out, sizeof out, "list --frob"), 2);
    /* check on an shm:// region that is not there: said, not made */
    snprintf(args, sizeof args, "check user:1 p --store shm://rl-none-%d",
             (int)getpid());
    ck_assert_int_eq(rlctl(out, sizeof out, args), 3);
    ck_assert_msg(strstr(out, "no such region"), "%s", out);
    snprintf(args, sizeof args, "/dev/shm/rl-none-%d", (int)getpid());
    ck_assert_int_ne(access(args, F_OK), 0);
}
END_TEST

/* rlctl check on a rediss:// store takes the TLS options. */
START_TEST(rlctl_check_takes_the_tls_options)
{
    char out[8192], args[1024];

    snprintf(args, sizeof args, "check user:tls r --store '%s' "
             "--tls-ca-file '%s'", uri, ca_file);
    ck_assert_msg(rlctl(out, sizeof out, args) == 0, "%s", out);
    ck_assert_msg(strstr(out, "allowed"), "%s", out);
    /* without the CA, the server's certificate is not trusted */
    snprintf(args, sizeof args, "check user:tls r --store '%s'", uri);
    ck_assert_int_eq(rlctl(out, sizeof out, args), 3);
}
END_TEST

/* The Redis client line of ratelimitd's connection (CLIENT LIST, as the
 * admin) into buf; "" if none. */
static void rld_client(char *buf, size_t len)
{
    redisContext *c = rh_connect(&redis);
    redisReply *r = redisCommand(c, "CLIENT LIST");
    const char *line = r && r->str ? strstr(r->str, "user=ratelimitd ") : NULL;
    const char *start = line;

    while (start && start > r->str && start[-1] != '\n')
        start--;
    snprintf(buf, len, "%.*s", start ? (int)strcspn(start, "\n") : 0,
             start ? start : "");
    freeReplyObject(r);
    redisFree(c);
}

/* As its ACL user, ratelimitd publishes (the rule put at setup reached
 * the limiters' key) and keeps its heartbeat (PING) going, and its log
 * names Redis without the password. */
START_TEST(ratelimitd_as_its_user_logs_no_password)
{
    char tail[4096], line[1024];
    long long v = service_version();
    int64_t start = now_ms();
    redisContext *c;
    redisReply *r;

    /* the heartbeat, a second after the last publish */
    for (rld_client(line, sizeof line); !strstr(line, " cmd=ping");
         rld_client(line, sizeof line)) {
        ck_assert_msg(now_ms() - start < WAIT_MS, "no PING: %s", line);
        sleep_ms(20);
    }
    /* a change after it: published in a later round than the PING's */
    rlctl_ok("put r --dimension user --limit 4 --window 60");
    ck_assert_ptr_nonnull(c = rh_connect(&redis));
    for (;; sleep_ms(20)) {
        long long held = -1;
        r = redisCommand(c, "GET rl:rules");
        if (r && r->type == REDIS_REPLY_STRING)
            sscanf(r->str, "{\"version\":%lld", &held);
        freeReplyObject(r);
        if (held == v + 1)
            break;
        ck_assert_msg(now_ms() - start < WAIT_MS, "version %lld not "
                      "published", v + 1);
    }
    redisFree(c);
    rld_log_tail(&service, tail, sizeof tail);
    ck_assert_msg(strstr(tail, "redis redis://***@127.0.0.1"), "%s", tail);
    ck_assert_msg(!strstr(tail, "down"), "%s", tail);
    ck_assert_msg(!strstr(tail, "rld@") && !strstr(tail, "pw/1"), "%s",
                  tail);
}
END_TEST

/* A limiter writing rejection events (events_redis) and rlctl events
 * reading them: each denial one line, the key's backslash escaped. */
START_TEST(rlctl_events_shows_rejections)
{
    const char *opts[] = {"events_redis", uri, "events_key", "plain", NULL};
    char out[4096], args[600], *line;
    worker a;
    int64_t start = now_ms();
    int n = 0, store = 0, cache = 0;

    worker_start(&a, opts);
    for (int i = 0; i < 5; i++) /* limit 3: 2 denials */
        allowed(&a, "user:x\\y", "r");
    for (;; sleep_ms(20)) {
        redisContext *c = rh_connect(&redis);
        redisReply *r = redisCommand(c, "XLEN rl:events");
        long long len = r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
        freeReplyObject(r);
        redisFree(c);
        if (len == 2)
            break;
        ck_assert_msg(now_ms() - start < WAIT_MS, "XLEN %lld", len);
    }
    snprintf(args, sizeof args, "events --redis '%s' --count 5", uri);
    ck_assert_int_eq(rlctl(out, sizeof out, args), 0);
    for (line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), n++) {
        ck_assert_msg(strstr(line, " rule=r key=user:x\\x5cy ts=") &&
                      strstr(line, " mode=enforce "), "%s", line);
        store += strstr(line, " decided=store ") != NULL;
        cache += strstr(line, " decided=cache ") != NULL;
    }
    /* Redis's denial, then the deny cache's repeat of it */
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(store, 1);
    ck_assert_int_eq(cache, 1);
    worker_stop(&a);
}
END_TEST

/* ratelimitd given a CA that did not sign the server's certificate: it
 * starts (Redis may come later), stores the change, publishes nothing, and
 * its log says why; /healthz answers 503: Redis is down, and why. */
START_TEST(ratelimitd_refuses_a_stranger_ca)
{
    char other[200], tail[4096];
    const char *args[] = {"--redis", rld_uri, "--tls-ca-file", other, NULL};
    rld d = {0};
    rld_resp r;
    int64_t start = now_ms();

    snprintf(other, sizeof other, "%s/other.crt", certs);
    ck_assert_int_eq(rld_start(&d, args), 0);
    for (;; sleep_ms(20)) {
        rld_log_tail(&d, tail, sizeof tail);
        if (strstr(tail, "certificate verify failed"))
            break;
        ck_assert_msg(now_ms() - start < WAIT_MS, "%s", tail);
    }
    /* a refusal, not an outage: 503 at once, with the reason */
    ck_assert_int_eq(rld_http(&d, "GET", "/healthz", NULL, NULL, NULL, 0, &r),
                     503);
    ck_assert_msg(strstr(r.body, "\"redis\":\"down\"") &&
                  strstr(r.body, "\"ok\":false") &&
                  strstr(r.body, "refuses this service") &&
                  strstr(r.body, "certificate verify failed"), "%s", r.body);
    rld_resp_free(&r);
    rld_cleanup(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("control");
    TCase *tc = tcase_create("fleet"), *acl = tcase_create("acl"),
          *tls = tcase_create("tls");

    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, put_is_enforced_by_both_by_the_push);
    tcase_add_test(tc, pull_alone_follows_within_the_refresh_interval);
    tcase_add_test(tc, delete_stops_enforcement);
    tcase_add_test(tc, stale_if_match_changes_nothing);
    tcase_add_test(tc, dry_run_then_enforce);
    tcase_add_test(tc, rlctl_exit_codes_and_output);
    tcase_add_test(tc, rlctl_put_flags_change_only_what_they_name);
    tcase_add_test(tc, rlctl_events_shows_rejections);
    suite_add_tcase(s, tc);
    tcase_set_timeout(acl, 120);
    tcase_add_checked_fixture(acl, acl_setup, teardown);
    tcase_add_test(acl, ratelimitd_as_its_user_logs_no_password);
    tcase_add_test(acl, put_is_enforced_by_both_by_the_push);
    tcase_add_test(acl, pull_alone_follows_within_the_refresh_interval);
    tcase_add_test(acl, dry_run_then_enforce);
    tcase_add_test(acl, rlctl_exit_codes_and_output);
    suite_add_tcase(s, acl);
    tcase_set_timeout(tls, 120);
    tcase_add_checked_fixture(tls, tls_setup, teardown);
    tcase_add_test(tls, put_is_enforced_by_both_by_the_push);
    tcase_add_test(tls, pull_alone_follows_within_the_refresh_interval);
    tcase_add_test(tls, delete_stops_enforcement);
    tcase_add_test(tls, stale_if_match_changes_nothing);
    tcase_add_test(tls, ratelimitd_refuses_a_stranger_ca);
    tcase_add_test(tls, rlctl_check_takes_the_tls_options);
    suite_add_tcase(s, tls);
    return s;
}

int main(void)
{
    if (!rh_available() || !rld_available()) {
        fprintf(stderr, "SKIP: needs redis-server and ratelimitd\n");
        return 77;
    }
    return run_suite(suite());
}
