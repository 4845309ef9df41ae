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
 * Each set carries its generation, "<database id>.<start id>" (service.c):
 * the script replaces a set of this database's earlier start (a restart,
 * or a backup restored) whatever its version, and leaves another
 * database's set in place until a change made here, numbered above it
 * (service.c asks publisher_seen()), replaces it; meanwhile /healthz says
 * so (publisher_health()).  The heartbeat reads the key's head, so a set
 * written by someone else, or a key gone, is seen within HEARTBEAT_MS.
 *
 * While Redis is away changes go on being stored; the thread retries the
 * connection with backoff (RETRY_MIN_MS doubling to RETRY_MAX_MS) and, on
 * every new connection, sends the newest set again (the script drops it if
 * the key already holds it), so a server that comes back, even empty, gets
 * the newest set within RETRY_MAX_MS plus a round trip.  A PING every
 * HEARTBEAT_MS notices a server that went away while nothing changed and
 * keeps "redis" in /healthz true; one that refuses the service (AUTH, ACL,
 * TLS) or stays away past the grace period makes /healthz answer 503.
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
 * set, ARGV[3] its generation ("<database id>.<start id>"), ARGV[4] the
 * hold: a set of another database is replaced only by a version above it
 * (a change made here after that set was seen).  The key is SET (and the
 * version PUBLISHed) when it is missing, holds a set without generation
 * (an older ratelimitd's), a set of this database from an earlier start
 * (a restored backup is this database gone back: its set replaces the
 * key's whatever the versions), an older version of this start, or
 * another database's set below a change made here.  Returns {version,
 * generation, written}: what the key holds afterwards. */
static const char script[] =
    "local new, gen, hold = tonumber(ARGV[1]), ARGV[3], tonumber(ARGV[4])\n"
    "local mine = string.match(gen, '^[^.]*%.')\n"
    "local cur = redis.call('GET', KEYS[1])\n"
    "if cur then\n"
    "  local old, g = string.match(cur,\n"
    "    '^{\"version\":(%d+),\"generation\":\"([^\"]*)\"')\n"
    "  old = tonumber(old)\n"
    "  if old == nil then\n"
    "    local ok, doc = pcall(cjson.decode, cur)\n"
    "    if ok and type(doc) == 'table' then\n"
    "      old = tonumber(doc.version)\n"
    "      g = type(doc.generation) == 'string' and doc.generation or ''\n"
    "    end\n"
    "  end\n"
    "  if old ~= nil then\n"
    "    if g == gen then\n"
    "      if old >= new then return {old, g, 0} end\n"
    "    elseif g ~= '' and string.sub(g, 1, #mine) ~= mine and\n"
    "           new <= hold then\n"
    "      return {old, g, 0}\n"
    "    end\n"
    "  end\n"
    "end\n"
    "redis.call('SET', KEYS[1], ARGV[2])\n"
    "redis.call('PUBLISH', KEYS[1], ARGV[1])\n"
    "return {new, gen, 1}\n";

/* The heartbeat's look at the key: {version, generation} from the head
 * of its text ({-1, ""} missing, {-2, ""} a head not ratelimitd's).  GET
 * only: the README's ACL user for ratelimitd may run it. */
static const char look_script[] =
    "local cur = redis.call('GET', KEYS[1])\n"
    "if not cur then return {-1, ''} end\n"
    "local head = string.sub(cur, 1, 256)\n"
    "local v, g = string.match(head,\n"
    "  '^{\"version\":(%d+),\"generation\":\"([^\"]*)\"')\n"
    "if v == nil then\n"
    "  v = string.match(head, '^{\"version\":(%d+)')\n"
    "  g = ''\n"
    "end\n"
    "if v == nil then return {-2, ''} end\n"
    "return {tonumber(v), g}\n";

struct publisher {
    redis_uri uri;
    char key[KEY_MAX];
    char shown[300];        /* the URI without its password, for the log */
    int timeout_ms;
    int64_t grace_ms;       /* down longer than this: /healthz 503      */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* an offer or stop                         */
    snapshot *newest;       /* under mu                                 */
    int stop;               /* under mu                                 */
    atomic_int up;          /* 1 up, 0 down, -1 not yet known: the first
                               failure is logged too */
    SSL_CTX *tls;           /* rediss://: the client context; else NULL */
    /* what /healthz reads, under hmu */
    pthread_mutex_t hmu;
    int refused;            /* Redis refused auth or TLS: why           */
    char why[256];          /* the last failure                         */
    int64_t down_since_ms;  /* 0: up (or never tried)                   */
    int mismatch;           /* the key holds a set that is not ours     */
    char key_gen[RULESET_GEN_MAX + 1];
    int64_t key_version;    /* -1: not known or missing                 */
    int64_t seen_max;       /* the highest version seen in the key      */
    uint64_t published;     /* sets written to the key                  */
    uint64_t failed;        /* rounds that failed                       */
    /* the thread's own */
    rlink link;
    int linked;             /* link is open                             */
    int64_t sent;           /* version the key holds, -1 = not known    */
    int64_t hold;           /* another database's set is replaced only by
                               a version above this (-1: first offer) */
    int64_t retry_ms;       /* current backoff                          */
    int64_t next_try_ms;    /* no connect before this, even when offered */
    int64_t last_ok_ms;
    int64_t warned;         /* the foreign version already logged       */
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Redis answered, but refuses this service (credentials, ACL, TLS):
 * no wait makes it better. */
static int is_refusal(const char *why)
{
    return !strncmp(why, "WRONGPASS", 9) || !strncmp(why, "NOAUTH", 6) ||
           !strncmp(why, "NOPERM", 6) || !strncmp(why, "ERR AUTH", 8) ||
           (!strncmp(why, "TLS to ", 7) && !strstr(why, "timed out") &&
            !strstr(why, ": poll: "));
}

static void set_up(publisher *p, int up, const char *why)
{
    pthread_mutex_lock(&p->hmu);
    if (up) {
        p->down_since_ms = 0;
        p->refused = 0;
    } else {
        if (!p->down_since_ms)
            p->down_since_ms = now_ms();
        p->refused = is_refusal(why);
        snprintf(p->why, sizeof p->why, "%s", why);
    }
    pthread_mutex_unlock(&p->hmu);
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
    pthread_mutex_lock(&p->hmu);
    p->failed++;
    pthread_mutex_unlock(&p->hmu);
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

/* What the key holds (version, generation), as the scripts answered:
 * not this start's set at version `ours`: a mismatch /healthz reports. */
static void key_holds(publisher *p, int64_t version, const char *gen,
                      size_t glen, const snapshot *s)
{
    pthread_mutex_lock(&p->hmu);
    p->key_version = version;
    snprintf(p->key_gen, sizeof p->key_gen, "%.*s",
             (int)(glen < RULESET_GEN_MAX ? glen : RULESET_GEN_MAX), gen);
    if (version > p->seen_max)
        p->seen_max = version;
    p->mismatch = s && (version != s->version || strcmp(p->key_gen, s->gen));
    pthread_mutex_unlock(&p->hmu);
}

static int bad_reply(publisher *p, redisReply *r, const char *what, size_t n)
{
    char why[256];

    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == n &&
        r->element[0]->type == REDIS_REPLY_INTEGER &&
        (r->element[1]->type == REDIS_REPLY_STRING ||
         r->element[1]->type == REDIS_REPLY_STATUS) &&
        (n < 3 || r->element[2]->type == REDIS_REPLY_INTEGER))
        return 0;
    snprintf(why, sizeof why, "%s: %.200s", what,
             r && r->type == REDIS_REPLY_ERROR ? r->str
             : r ? "unexpected reply" : p->link.errstr);
    if (r)
        freeReplyObject(r);
    drop(p, why);
    return 1;
}

static int publish(publisher *p, const snapshot *s)
{
    redisReply *r;
    int64_t held;
    int written;

    if (p->hold < 0)
        p->hold = s->version; /* the set at start replaces no other's */
    r = rlink_command(&p->link, "EVAL %s 1 %s %lld %b %s %lld", script,
                      p->key, (long long)s->version, s->json, s->len, s->gen,
                      (long long)p->hold);
    if (bad_reply(p, r, "publish", 3))
        return -1;
    held = r->element[0]->integer;
    written = r->element[2]->integer == 1;
    key_holds(p, held, r->element[1]->str, r->element[1]->len, s);
    if (written) {
        pthread_mutex_lock(&p->hmu);
        p->published++;
        pthread_mutex_unlock(&p->hmu);
        log_line("published version %lld (generation %s) to %s",
                 (long long)s->version, s->gen, p->key);
    } else if (strcmp(r->element[1]->str, s->gen) && held != p->warned) {
        log_line("redis key %s holds version %lld of generation %s, another "
                 "database's: not replaced by this database's version %lld "
                 "(generation %s); the next change made here replaces it "
                 "(see ratelimitd(8))", p->key, (long long)held,
                 r->element[1]->str, (long long)s->version, s->gen);
        p->warned = held;
    }
    if (!written && strcmp(r->element[1]->str, s->gen) && s->version > p->hold)
        p->hold = s->version;
    freeReplyObject(r);
    p->sent = s->version;
    return 0;
}

/* The heartbeat: is the key still what was published? */
static int look(publisher *p, const snapshot *s)
{
    redisReply *r = rlink_command(&p->link, "EVAL %s 1 %s", look_script,
                                  p->key);

    if (bad_reply(p, r, "read", 2))
        return -1;
    key_holds(p, r->element[0]->integer, r->element[1]->str,
              r->element[1]->len, s);
    if (s && r->element[0]->integer != s->version &&
        r->element[0]->integer != p->warned) {
        log_line("redis key %s holds version %lld (generation %.64s), not "
                 "this database's version %lld (generation %s)%s", p->key,
                 (long long)r->element[0]->integer, r->element[1]->str,
                 (long long)s->version, s->gen,
                 r->element[0]->integer == -1
                     ? ": it is missing; publishing again" : "");
        p->warned = r->element[0]->integer;
    }
    /* Another database's, or an older start's: what is ours now does
     * not replace it on a reconnect; a change made here does. */
    if (s && strcmp(r->element[1]->str, s->gen) && s->version > p->hold)
        p->hold = s->version;
    /* Gone (a flushed or new Redis) or older: send ours again. */
    if (s && (r->element[0]->integer == -1 ||
              (!strcmp(r->element[1]->str, s->gen) &&
               r->element[0]->integer < s->version)))
        p->sent = -1;
    freeReplyObject(r);
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
        if (look(p, s) ||
            !reply_ok(&p->link, rlink_command(&p->link, "PING"), why,
                      sizeof why)) {
            if (p->linked)
                drop(p, why);
            return p->retry_ms;
        }
        if (s && s->version > p->sent)
            return 0; /* the key lost our set: again at once */
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
    p->grace_ms = o->grace_ms;
    p->sent = -1;
    p->hold = -1;
    p->key_version = -1;
    p->seen_max = -1;
    pthread_mutex_init(&p->hmu, NULL);
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

int64_t publisher_seen(publisher *p)
{
    int64_t v;

    if (!p)
        return -1;
    pthread_mutex_lock(&p->hmu);
    v = p->seen_max;
    pthread_mutex_unlock(&p->hmu);
    return v;
}

void publisher_counts(publisher *p, uint64_t *published, uint64_t *failed,
                      int64_t *key_version)
{
    *published = *failed = 0;
    *key_version = -1;
    if (!p)
        return;
    pthread_mutex_lock(&p->hmu);
    *published = p->published;
    *failed = p->failed;
    *key_version = p->key_version;
    pthread_mutex_unlock(&p->hmu);
}

int publisher_health(publisher *p, char *why, size_t len)
{
    int64_t down;
    int rc = 0;

    if (!p)
        return 0;
    pthread_mutex_lock(&p->hmu);
    down = p->down_since_ms ? now_ms() - p->down_since_ms : 0;
    if (p->down_since_ms && p->refused) {
        snprintf(why, len, "redis %s refuses this service: %s", p->shown,
                 p->why);
        rc = -1;
    } else if (p->down_since_ms && down > p->grace_ms) {
        snprintf(why, len, "redis %s unreachable for %lld ms: %s", p->shown,
                 (long long)down, p->why);
        rc = -1;
    } else if (!p->down_since_ms && p->mismatch) {
        snprintf(why, len, "redis key %s holds version %lld (generation "
                 "%s), not this database's set: %s", p->key,
                 (long long)p->key_version,
                 p->key_gen[0] ? p->key_gen : "none",
                 p->key_version < 0
                     ? "it is missing or unreadable"
                     : "another database publishes there; the next change "
                       "made here replaces it");
        rc = -1;
    }
    pthread_mutex_unlock(&p->hmu);
    return rc;
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
    pthread_mutex_destroy(&p->hmu);
    pthread_cond_destroy(&p->cv);
    memset(&p->uri, 0, sizeof p->uri); /* the password */
    free(p);
}
