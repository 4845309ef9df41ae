/*
 * publish.c -- the rule set to Redis, off the request path (see
 * ratelimitd.h and contracts.md section 2).
 *
 * One thread owns one blocking connection (redis_link.c: connect and
 * command timeouts; TLS for rediss://, verified like the library's).  Handlers only hand it the newest snapshot (publisher_offer():
 * a mutex and a signal, never I/O).  The thread sends each newer snapshot in
 * one script call that, atomically, SETs the snapshot key only if the
 * version it holds is older and then PUBLISHes the new version on the
 * channel of the same name; a limiter that gets the message reads the key.
 *
 * While Redis is away changes go on being stored; the thread retries the
 * connection with backoff (RETRY_MIN_MS doubling to RETRY_MAX_MS) and, on
 * every new connection, sends the newest set again (the script drops it if
 * the key already holds it), so a server that comes back, even empty, gets
 * the newest set within RETRY_MAX_MS plus a round trip.  A PING every
 * HEARTBEAT_MS notices a server that went away while nothing changed and
 * keeps "redis" in /healthz true.
 */
#include "ratelimitd.h"
#include "redis_link.h"
#include "redis_tls.h"
#include "redis_uri.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 2000
#define HEARTBEAT_MS 1000
#define KEY_MAX 256

/* KEYS[1] snapshot key (also the channel), ARGV[1] version, ARGV[2] the
 * set.  Returns the version the key holds afterwards. */
static const char script[] =
    "local new = tonumber(ARGV[1])\n"
    "local cur = redis.call('GET', KEYS[1])\n"
    "if cur then\n"
    "  local old = tonumber(string.match(cur, '^{\"version\":(%d+)'))\n"
    "  if old == nil then\n"
    "    local ok, doc = pcall(cjson.decode, cur)\n"
    "    if ok and type(doc) == 'table' then old = tonumber(doc.version) end\n"
    "  end\n"
    "  if old ~= nil and old >= new then return old end\n"
    "end\n"
    "redis.call('SET', KEYS[1], ARGV[2])\n"
    "redis.call('PUBLISH', KEYS[1], ARGV[1])\n"
    "return new\n";

struct publisher {
    redis_uri uri;
    char key[KEY_MAX];
    char shown[300];        /* the URI without its password, for the log */
    int timeout_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* an offer or stop                         */
    snapshot *newest;       /* under mu                                 */
    int stop;               /* under mu                                 */
    atomic_int up;          /* 1 up, 0 down, -1 not yet known: the first
                               failure is logged too */
    SSL_CTX *tls;           /* rediss://: the client context; else NULL */
    /* the thread's own */
    rlink link;
    int linked;             /* link is open                             */
    int64_t sent;           /* version the key holds, -1 = not known    */
    int64_t retry_ms;       /* current backoff                          */
    int64_t next_try_ms;    /* no connect before this, even when offered */
    int64_t last_ok_ms;
    int64_t warned_newer;   /* a newer foreign version already logged   */
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_up(publisher *p, int up, const char *why)
{
    if (atomic_exchange(&p->up, up) == up)
        return;
    if (up)
        log_line("redis %s: up", p->shown);
    else
        log_line("redis %s: down (%s); changes are stored and will be "
                 "published when it returns", p->shown, why);
}

static void drop(publisher *p, const char *why)
{
    char msg[256];

    snprintf(msg, sizeof msg, "%s", why);
    if (p->linked) {
        rlink_close(&p->link);
        p->linked = 0;
    }
    set_up(p, 0, msg);
    p->retry_ms = p->retry_ms ? p->retry_ms * 2 : RETRY_MIN_MS;
    if (p->retry_ms > RETRY_MAX_MS)
        p->retry_ms = RETRY_MAX_MS;
    p->next_try_ms = now_ms() + p->retry_ms;
}

/* A reply that is not an error; frees it. */
static int reply_ok(const rlink *l, redisReply *r, char *why, size_t len)
{
    int ok = r && r->type != REDIS_REPLY_ERROR;

    if (!ok)
        snprintf(why, len, "%s", r ? r->str : l->errstr);
    if (r)
        freeReplyObject(r);
    return ok;
}

static int connect_redis(publisher *p)
{
    const redis_uri *u = &p->uri;
    rlink *l = &p->link;
    char why[512] = "";

    if (rlink_open(l, u, p->tls, NULL, p->timeout_ms, why, sizeof why)) {
        drop(p, why); /* "connect to host:port: ..." or the TLS reason */
        return -1;
    }
    p->linked = 1;
    if ((u->password[0] &&
         !reply_ok(l, u->user[0] ? rlink_command(l, "AUTH %s %s", u->user,
                                                 u->password)
                                 : rlink_command(l, "AUTH %s", u->password),
                   why, sizeof why)) ||
        (u->db && !reply_ok(l, rlink_command(l, "SELECT %d", u->db), why,
                            sizeof why))) {
        drop(p, why);
        return -1;
    }
    p->sent = -1;
    return 0;
}

static int publish(publisher *p, const snapshot *s)
{
    redisReply *r = rlink_command(&p->link, "EVAL %s 1 %s %lld %b", script,
                                 p->key, (long long)s->version, s->json,
                                 s->len);
    char why[256];

    if (!r || r->type != REDIS_REPLY_INTEGER) {
        snprintf(why, sizeof why, "publish: %.200s",
                 r && r->type == REDIS_REPLY_ERROR ? r->str
                 : r ? "unexpected reply" : p->link.errstr);
        if (r)
            freeReplyObject(r);
        drop(p, why);
        return -1;
    }
    if (r->integer > s->version && r->integer != p->warned_newer) {
        log_line("redis key %s holds version %lld, newer than this "
                 "service's %lld: does another ratelimitd write it?",
                 p->key, (long long)r->integer, (long long)s->version);
        p->warned_newer = r->integer;
    } else if (r->integer == s->version) {
        log_line("published version %lld to %s", (long long)s->version,
                 p->key);
    }
    freeReplyObject(r);
    p->sent = s->version;
    return 0;
}

/* One round: connect if need be, send a newer set or a heartbeat.
 * Returns how long to wait before the next round (ms). */
static int64_t round_once(publisher *p, const snapshot *s)
{
    char why[256];

    if (!p->linked && connect_redis(p))
        return p->retry_ms;
    if (s && s->version > p->sent) {
        if (publish(p, s))
            return p->retry_ms;
    } else if (now_ms() - p->last_ok_ms >= HEARTBEAT_MS) {
        if (!reply_ok(&p->link, rlink_command(&p->link, "PING"), why,
                      sizeof why)) {
            drop(p, why);
            return p->retry_ms;
        }
    } else {
        return HEARTBEAT_MS - (now_ms() - p->last_ok_ms);
    }
    p->last_ok_ms = now_ms();
    p->retry_ms = 0;
    set_up(p, 1, NULL);
    return s && s->version > p->sent ? 0 : HEARTBEAT_MS;
}

static void wait_ms(publisher *p, int64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

static void *run(void *arg)
{
    publisher *p = arg;

    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        snapshot *s;
        int64_t ms = p->next_try_ms - now_ms();
        if (!p->linked && ms > 0) { /* backing off: offers do not hurry it */
            wait_ms(p, ms);
            continue;
        }
        s = p->newest ? snapshot_ref(p->newest) : NULL;
        pthread_mutex_unlock(&p->mu);
        ms = round_once(p, s);
        snapshot_unref(s);
        pthread_mutex_lock(&p->mu);
        /* Sleep unless a newer set came in during the round and the
         * connection is fit to send it. */
        if (!p->stop && ms > 0 &&
            !(p->linked && p->newest && p->newest->version > p->sent))
            wait_ms(p, ms);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int publisher_start(publisher **out, const publisher_opts *o, char *err,
                    size_t errlen)
{
    publisher *p = calloc(1, sizeof *p);
    pthread_condattr_t ca;
    char why[256];

    *out = NULL;
    if (!p)
        return snprintf(err, errlen, "out of memory"), -1;
    if (redis_uri_parse(o->uri, &p->uri, why, sizeof why)) {
        free(p);
        return snprintf(err, errlen, "--redis: %s", why), -1;
    }
    if (p->uri.tls) {
        rtls_opts t = {.ca_file = o->tls_ca_file, .ca_dir = o->tls_ca_dir,
                       .cert_file = o->tls_cert_file,
                       .key_file = o->tls_key_file, .verify = 1};
        if (!(p->tls = rtls_ctx_new(&t, why, sizeof why))) {
            free(p);
            return snprintf(err, errlen, "--redis: %s", why), -1;
        }
    }
    if (strlen(o->key) == 0 || strlen(o->key) >= sizeof p->key) {
        SSL_CTX_free(p->tls);
        free(p);
        return snprintf(err, errlen, "--redis-key: 1..%d bytes",
                        KEY_MAX - 1), -1;
    }
    strcpy(p->key, o->key);
    redis_uri_redact(o->uri, p->shown, sizeof p->shown);
    p->timeout_ms = o->timeout_ms;
    p->sent = -1;
    atomic_init(&p->up, -1);
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&p->thread, NULL, run, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        SSL_CTX_free(p->tls);
        free(p);
        return snprintf(err, errlen, "cannot start the publisher thread"),
               -1;
    }
    *out = p;
    return 0;
}

void publisher_offer(publisher *p, snapshot *s)
{
    snapshot *old = NULL;

    pthread_mutex_lock(&p->mu);
    if (!p->newest || s->version > p->newest->version) {
        old = p->newest;
        p->newest = snapshot_ref(s);
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    snapshot_unref(old);
}

const char *publisher_state(publisher *p)
{
    if (!p)
        return "off";
    return atomic_load(&p->up) == 1 ? "up" : "down";
}

void publisher_stop(publisher *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    if (p->linked)
        rlink_close(&p->link);
    SSL_CTX_free(p->tls);
    snapshot_unref(p->newest);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    memset(&p->uri, 0, sizeof p->uri); /* the password */
    free(p);
}
