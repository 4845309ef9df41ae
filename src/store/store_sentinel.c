/*
 * store_sentinel.c -- see store_sentinel.h.  The request path is the
 * single-server store's (every call forwarded to it, nothing added); what
 * lives here is finding the primary and following it.
 *
 * Finding it: the sentinels are asked in turn, the one that answered last
 * first, each over a connection of its own with a short timeout (AUTH
 * with sentinel_password if set; SENTINEL get-master-addr-by-name).
 * Following it: a watcher thread holds a SUBSCRIBE +switch-master on one
 * sentinel (non-blocking, with a PING when it has been silent, so a dead
 * sentinel is noticed, and moving to the next sentinel when it fails),
 * and asks the sentinels again every RECHECK_UP_MS, every RECHECK_DOWN_MS
 * while no connection to the primary is up, and at once when the
 * subscription breaks: a lost message costs a recheck, not the store.
 * A new address goes to the I/O layer (rio_retarget): the connections to
 * the old one close, the connector connects to the new one, and every
 * connect checks ROLE (rio_opts.need_master), so a demoted or not yet
 * promoted server is never used.  Meanwhile checks fail as for a dead
 * server: the breaker, then each rule's failure mode.
 */
#include "store_sentinel.h"
#include "clock.h"
#include "log.h"
#include "ratelimit.h"
#include "redis_link.h"
#include "redis_node.h"
#include "store_redis.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define ASK_MAX_MS 500        /* one sentinel's answer, at most          */
#define RECHECK_UP_MS 2000    /* ask again this often, all well          */
#define RECHECK_DOWN_MS 100   /* ... while the primary is not connected  */
#define PING_MS 1000          /* a silent subscription gets a PING       */
#define RESUB_MAX_MS 1000     /* longest wait before subscribing again   */
#define SWITCH_CHANNEL "+switch-master"

typedef struct sub_conn {
    int fd;                   /* -1: not subscribed                      */
    SSL *ssl;
    redisReader *reader;
    int64_t heard_ms, ping_ms; /* last reply; PING sent (0: none out)   */
    int64_t retry_ms, backoff_ms;
} sub_conn;

typedef struct sentinel_store {
    rl_store base;
    rl_store *inner;          /* the single-server store on the primary */
    rio *io;
    redis_uri sentinel[SENTINEL_MAX];
    int n, last;              /* last: answered last (the watcher's)   */
    char name[128], password[256];
    SSL_CTX *tls;             /* rediss-sentinel://; NULL plain         */
    int64_t ask_ms;
    rl_log_fn *log_fn;
    void *log_arg;
    pthread_mutex_t mu;       /* host, port, switches (tests read them) */
    char host[256];
    int port;
    long switches;
    int efd;                  /* wakes the watcher to stop              */
    _Atomic int stop;
    pthread_t th;
    int started;
} sentinel_store;

/* ---- asking the sentinels --------------------------------------------- */

/* Connect to sentinel i and AUTH; 0, or -1 with the reason in why. */
static int sentinel_link(sentinel_store *s, int i, rlink *l, char *why,
                         size_t len)
{
    redisReply *r;
    int ok;

    if (rlink_open(l, &s->sentinel[i], s->tls, NULL, s->ask_ms, why, len))
        return -1;
    if (!s->password[0])
        return 0;
    r = rlink_command(l, "AUTH %s", s->password);
    ok = r && r->type == REDIS_REPLY_STATUS;
    snprintf(why, len, "AUTH: %.200s", !r ? l->errstr : ok ? ""
             : r->str ? r->str : "unexpected reply");
    if (r)
        freeReplyObject(r);
    if (!ok)
        rlink_close(l);
    return ok ? 0 : -1;
}

/* Ask sentinel i: 1 with the master's address, 0 it knows no such
 * master, -1 no answer (why). */
static int ask_one(sentinel_store *s, int i, char *host, size_t hostlen,
                   int *port, char *why, size_t len)
{
    rlink l;
    redisReply *r;
    int rc = -1;

    if (sentinel_link(s, i, &l, why, len))
        return -1;
    r = rlink_command(&l, "SENTINEL get-master-addr-by-name %s", s->name);
    if (!r) {
        snprintf(why, len, "%s", l.errstr);
    } else if (r->type == REDIS_REPLY_NIL) {
        rc = 0;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_STRING &&
               r->element[1]->type == REDIS_REPLY_STRING &&
               r->element[0]->len < hostlen) {
        snprintf(host, hostlen, "%s", r->element[0]->str);
        *port = atoi(r->element[1]->str);
        rc = *port > 0 && *port < 65536 ? 1 : -1;
        snprintf(why, len, "port \"%.8s\"", r->element[1]->str);
    } else {
        snprintf(why, len, "SENTINEL: %s", r->type == REDIS_REPLY_ERROR
                 ? r->str : "unexpected reply");
    }
    if (r)
        freeReplyObject(r);
    rlink_close(&l);
    return rc;
}

/* The sentinels in turn, from the last that answered: 1 with the
 * master's address (the first that knows it), 0 those that answered know
 * no such master, -1 none answered (every reason in why). */
static int ask(sentinel_store *s, char *host, size_t hostlen, int *port,
               char *why, size_t len)
{
    int rc = -1, first = -1;
    size_t used = 0;

    why[0] = '\0';
    for (int k = 0; k < s->n && !atomic_load(&s->stop); k++) {
        int i = (s->last + k) % s->n;
        char one[256];
        int got = ask_one(s, i, host, hostlen, port, one, sizeof one);
        if (got == 1) {
            s->last = i;
            return 1;
        }
        if (got == 0 && first < 0)
            first = i;
        rc = got > rc ? got : rc;
        if (got < 0 && used < len)
            used += (size_t)snprintf(why + used, len - used, "%s%s:%d: %s",
                                     used ? "; " : "", s->sentinel[i].host,
                                     s->sentinel[i].port, one);
    }
    if (first >= 0)
        s->last = first;
    return rc;
}

/* Use host:port from now on, if it is new. */
static void follow(sentinel_store *s, const char *host, int port,
                   const char *how)
{
    char was[300];

    pthread_mutex_lock(&s->mu);
    if (port == s->port && strcmp(host, s->host) == 0) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    snprintf(was, sizeof was, "%s:%d", s->host, s->port);
    snprintf(s->host, sizeof s->host, "%s", host);
    s->port = port;
    s->switches++;
    pthread_mutex_unlock(&s->mu);
    rio_retarget(s->io, host, port);
    log_emit(s->log_fn, s->log_arg, RL_LOG_WARN, "Sentinel: master \"%s\" "
             "is now %s:%d (was %s, learnt by %s)", s->name, host, port, was,
             how);
}

static void recheck(sentinel_store *s)
{
    char host[256], why[512];
    int port;

    if (ask(s, host, sizeof host, &port, why, sizeof why) == 1)
        follow(s, host, port, "asking");
}

/* ---- the subscription --------------------------------------------------- */

static void sub_close(sub_conn *c)
{
    if (c->fd >= 0) {
        rtls_free(c->ssl);
        close(c->fd);
    }
    redisReaderFree(c->reader);
    c->reader = NULL;
    c->ssl = NULL;
    c->fd = -1;
}

/* SUBSCRIBE on the sentinels in turn, from the last that answered. */
static void sub_open(sentinel_store *s, sub_conn *c, int64_t now)
{
    for (int k = 0; k < s->n && c->fd < 0 && !atomic_load(&s->stop); k++) {
        int i = (s->last + k) % s->n;
        char why[256];
        rlink l;
        redisReply *r;
        if (sentinel_link(s, i, &l, why, sizeof why))
            continue;
        r = rlink_command(&l, "SUBSCRIBE %s", SWITCH_CHANNEL);
        if (r && r->type == REDIS_REPLY_ARRAY) {
            c->fd = rlink_release(&l, &c->ssl);
            c->reader = redisReaderCreate();
            c->heard_ms = now;
            c->ping_ms = 0;
            s->last = i;
        } else {
            rlink_close(&l);
        }
        if (r)
            freeReplyObject(r);
    }
    c->backoff_ms = c->fd >= 0 ? 0 : c->backoff_ms ? c->backoff_ms * 2 : 50;
    if (c->backoff_ms > RESUB_MAX_MS)
        c->backoff_ms = RESUB_MAX_MS;
    c->retry_ms = now + c->backoff_ms;
}

/* "+switch-master": "<name> <old ip> <old port> <new ip> <new port>". */
static void on_message(sentinel_store *s, const redisReply *r)
{
    char name[128], oldh[256], newh[256];
    int oldp, newp;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[2]->type != REDIS_REPLY_STRING ||
        strcmp(r->element[0]->str ? r->element[0]->str : "", "message"))
        return; /* a PONG, or not ours */
    if (sscanf(r->element[2]->str, "%127s %255s %d %255s %d", name, oldh,
               &oldp, newh, &newp) == 5 && strcmp(name, s->name) == 0 &&
        newp > 0 && newp < 65536)
        follow(s, newh, newp, SWITCH_CHANNEL);
}

/* Read what came; -1 when the subscription broke. */
static int sub_read(sentinel_store *s, sub_conn *c, int64_t now)
{
    char buf[4096];
    void *rep;

    for (;;) {
        ssize_t n = c->ssl ? rtls_read(c->ssl, buf, sizeof buf)
                           : read(c->fd, buf, sizeof buf);
        if (n == RTLS_WANT_READ || n == RTLS_WANT_WRITE ||
            (n < 0 && !c->ssl && (errno == EAGAIN || errno == EINTR)))
            return 0;
        if (n <= 0 || redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK)
            return -1;
        c->heard_ms = now;
        c->ping_ms = 0;
        while (redisReaderGetReply(c->reader, &rep) == REDIS_OK && rep) {
            on_message(s, rep);
            freeReplyObject(rep);
        }
        if (c->reader->err)
            return -1;
    }
}

/* A silent subscription is PINGed; unanswered for ask_ms, it is dead. */
static int sub_alive(sentinel_store *s, sub_conn *c, int64_t now)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";

    if (c->ping_ms)
        return now - c->ping_ms <= s->ask_ms;
    if (now - c->heard_ms < PING_MS)
        return 1;
    c->ping_ms = now;
    return (c->ssl ? rtls_write(c->ssl, ping, sizeof ping - 1)
                   : write(c->fd, ping, sizeof ping - 1)) ==
           (ssize_t)sizeof ping - 1;
}

/* ---- the watcher -------------------------------------------------------- */

static int64_t soonest(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static void *watch_main(void *arg)
{
    sentinel_store *s = arg;
    sub_conn c = {.fd = -1};
    int64_t next_ask = clock_mono_ms() + RECHECK_UP_MS;
    long seen = 0; /* s->switches when a new primary was last up (only
                      this thread writes it) */
    sigset_t nopipe;

    sigemptyset(&nopipe); /* a write to a sentinel gone: EPIPE, no signal */
    sigaddset(&nopipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &nopipe, NULL);

    while (!atomic_load(&s->stop)) {
        int64_t now = clock_mono_ms(), wake;
        struct pollfd pf[2] = {{.fd = s->efd, .events = POLLIN},
                               {.fd = c.fd, .events = POLLIN}};
        if (s->switches != seen && next_ask > now + RECHECK_DOWN_MS)
            next_ask = now + RECHECK_DOWN_MS; /* moved: look for it up */
        if (c.fd < 0 && now >= c.retry_ms)
            sub_open(s, &c, now);
        if (c.fd >= 0 && !sub_alive(s, &c, now)) {
            sub_close(&c); /* a message may be lost: ask at once */
            next_ask = now;
        }
        if (now >= next_ask) {
            long moved = s->switches;
            rnode *node = store_redis_node(s->inner);
            int up;

            recheck(s);
            now = clock_mono_ms();
            up = rnode_is_up(node);
            /* up at a new primary: the breaker's cooldown was the old's */
            if (up && moved != seen) {
                breaker_cool_now(rnode_breaker(node), now);
                seen = moved;
            }
            next_ask = now + (up ? RECHECK_UP_MS : RECHECK_DOWN_MS);
        }
        wake = soonest(next_ask, c.fd >= 0 ? now + PING_MS / 4 : c.retry_ms);
        pf[1].fd = c.fd;
        if (poll(pf, 2, (int)(wake > now ? wake - now : 0)) <= 0)
            continue;
        if (c.fd >= 0 && pf[1].revents && sub_read(s, &c, clock_mono_ms())) {
            sub_close(&c);
            next_ask = clock_mono_ms();
        }
    }
    sub_close(&c);
    return NULL;
}

/* ---- the store: the primary's, forwarded -------------------------------- */

#define INNER(s) (((sentinel_store *)(s))->inner)

static int sen_check(rl_store *s, const store_op *ops, size_t n,
                     algo_decision *out, int64_t *now_ms)
{
    return INNER(s)->vt->check(INNER(s), ops, n, out, now_ms);
}

static int sen_check_many(rl_store *s, store_req *reqs, size_t n)
{
    return INNER(s)->vt->check_many(INNER(s), reqs, n);
}

static void sen_start(rl_store *s, store_async *a)
{
    INNER(s)->vt->start(INNER(s), a);
}

static int sen_breaker(rl_store *s, int64_t *opens, int64_t *closes)
{
    return INNER(s)->vt->breaker(INNER(s), opens, closes);
}

static void sen_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    INNER(s)->vt->set_clock(INNER(s), fn, arg);
}

static void sen_io_stats(rl_store *s, rnode_stats *st)
{
    INNER(s)->vt->io_stats(INNER(s), st);
}

static int sen_settle(rl_store *s, const store_settle *ss, size_t *settled)
{
    return INNER(s)->vt->settle(INNER(s), ss, settled);
}

static void sen_free(rl_store *base)
{
    sentinel_store *s = (sentinel_store *)base;

    if (s->started) {
        uint64_t one = 1;
        atomic_store(&s->stop, 1);
        if (write(s->efd, &one, sizeof one) != sizeof one)
            log_emit(s->log_fn, s->log_arg, RL_LOG_WARN, "Sentinel: cannot "
                     "wake the watcher; it stops within %d ms",
                     RECHECK_UP_MS);
        pthread_join(s->th, NULL);
    }
    if (s->inner)
        s->inner->vt->free(s->inner);
    if (s->efd >= 0)
        close(s->efd);
    SSL_CTX_free(s->tls);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static const store_vtable sentinel_vtable = {
    .name = "redis-sentinel",
    .check = sen_check,
    .free = sen_free,
    .breaker = sen_breaker,
    .check_many = sen_check_many,
    .start = sen_start,
    .set_clock = sen_set_clock,
    .io_stats = sen_io_stats,
    .settle = sen_settle,
};

/* ---- opening ------------------------------------------------------------ */

/* Parse, and ask the sentinels where the master is: RL_OK with *m its
 * address and credentials, or RL_ESTORE with the reason in why. */
static int locate(sentinel_store *s, const char *uri, const store_options *o,
                  redis_uri *m, char *why, size_t len)
{
    char reasons[600];
    int rc;

    if (redis_uri_parse_sentinel(uri, m, s->sentinel, SENTINEL_MAX, &s->n,
                                 s->name, sizeof s->name, why, len) ||
        store_redis_tls(m, o, &s->tls, why, len))
        return RL_ESTORE;
    rc = ask(s, m->host, sizeof m->host, &m->port, reasons, sizeof reasons);
    if (rc == 0)
        snprintf(why, len, "no sentinel knows a master named \"%s\"",
                 s->name);
    else if (rc < 0)
        snprintf(why, len, "no sentinel answered (%s)", reasons);
    return rc == 1 ? RL_OK : RL_ESTORE;
}

int store_sentinel_new(const char *uri, const store_options *opt,
                       rl_store **out, char *err, size_t errlen)
{
    sentinel_store *s = calloc(1, sizeof *s);
    redis_uri m;
    char why[700], shown[128];
    int rc;

    *out = NULL;
    if (!s)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    *s = (sentinel_store){.base.vt = &sentinel_vtable, .efd = -1,
                          .log_fn = opt->log_fn, .log_arg = opt->log_arg,
                          .ask_ms = opt->connect_timeout_ms < ASK_MAX_MS
                                        ? opt->connect_timeout_ms
                                        : ASK_MAX_MS};
    pthread_mutex_init(&s->mu, NULL);
    snprintf(s->password, sizeof s->password, "%s",
             opt->sentinel_password ? opt->sentinel_password : "");
    redis_uri_redact(uri, shown, sizeof shown);
    if ((rc = locate(s, uri, opt, &m, why, sizeof why)) != RL_OK) {
        sen_free(&s->base);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why), rc;
    }
    snprintf(s->host, sizeof s->host, "%s", m.host);
    s->port = m.port;
    if ((rc = store_redis_open(&m, opt, 1, shown, &s->inner, err,
                               errlen)) != RL_OK) {
        sen_free(&s->base);
        return rc;
    }
    s->io = rnode_io(store_redis_node(s->inner));
    s->efd = eventfd(0, EFD_CLOEXEC);
    if (s->efd < 0 || pthread_create(&s->th, NULL, watch_main, s) != 0) {
        sen_free(&s->base);
        return snprintf(err, errlen, "cannot start the Sentinel watcher"),
               RL_ESTORE;
    }
    s->started = 1;
    *out = &s->base;
    return RL_OK;
}

int store_sentinel_primary(rl_store *base, char *addr, size_t len,
                           long *switches)
{
    sentinel_store *s = (sentinel_store *)base;

    if (base->vt != &sentinel_vtable)
        return -1;
    pthread_mutex_lock(&s->mu);
    snprintf(addr, len, "%s:%d", s->host, s->port);
    *switches = s->switches;
    pthread_mutex_unlock(&s->mu);
    return 0;
}
