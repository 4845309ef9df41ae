/*
 * redis_connector.c -- see redis_connector.h.
 *
 * Lock and wake-up: `mu` guards need[], stop, the address (o.uri) and
 * its generation `gen`; the thread sleeps on `cv` until a connection is
 * needed (rconnector_need, from the I/O thread), the address changes
 * (rconnector_retarget) or its next try is due.  It copies the options
 * under `mu`, connects without it, and hands the descriptor over through
 * the owner's `ready` callback under `mu` again, only if `gen` is still
 * the one it connected with: so once a retarget returns, nothing made for
 * the old address is handed over (the owner, which takes its own lock in
 * `ready`, never calls in here holding that lock).
 */
#include "redis_connector.h"
#include "clock.h"
#include "log.h"
#include "redis_link.h"
#include "redis_module_cmd.h"
#include "sha1.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct rconnector {
    rio_opts o;
    char sha[41];
    int n;
    rconnector_ready_fn ready;
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int need[RIO_MAX_CONNS];     /* under mu                             */
    int stop;                    /* under mu                             */
    SSL_SESSION *sess;           /* the thread's: offered on a reconnect  */
    int ever_up;                 /* the thread's: a connection was up     */
    int told;                    /*   a failure before that was logged    */
    unsigned gen;                /* under mu: bumped by each retarget     */
    pthread_t th;
};

/* ---- the handshake -------------------------------------------------------- */


static int expect_ok(rlink *l, redisReply *r, const char *what,
                     char *err, size_t errlen)
{
    int rc = 0;

    if (!r) {
        snprintf(err, errlen, "%s: %s", what,
                 l->errstr[0] ? l->errstr : "no reply");
        return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s: %s", what, r->str);
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

/* The scripts need Redis 7.0 (PEXPIRETIME, SET ... PXAT): say so plainly
 * instead of failing later inside a script. */
static int check_version(rlink *l, char *err, size_t errlen)
{
    redisReply *r = rlink_command(l, "INFO server");
    const char *v;
    int rc = 0;

    if (!r || r->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "INFO server: %s",
                 r && r->type == REDIS_REPLY_ERROR ? r->str
                 : r ? "unexpected reply" : l->errstr);
        rc = -1;
    } else if ((v = strstr(r->str, "redis_version:")) != NULL &&
               atoi(v + 14) < 7) {
        snprintf(err, errlen, "Redis %.12s is too old: 7.0 or later is needed",
                 v + 14);
        rc = -1;
    }
    if (r)
        freeReplyObject(r);
    return rc;
}

static int load_script(const rio_opts *o, const char *sha, rlink *l,
                       char *err, size_t errlen)
{
    redisReply *rep = rlink_command(l, "SCRIPT LOAD %b", o->script,
                                    o->script_len);
    int rc = -1;

    if (rep && rep->type == REDIS_REPLY_ERROR)
        return expect_ok(l, rep, "SCRIPT LOAD", err, errlen); /* frees */
    if (!rep || rep->type != REDIS_REPLY_STRING || rep->len != 40)
        snprintf(err, errlen, "SCRIPT LOAD: %s",
                 rep ? "unexpected reply" : l->errstr);
    else if (memcmp(sha, rep->str, 40) != 0) /* same text: cannot */
        snprintf(err, errlen, "SCRIPT LOAD: server names the script %.40s, "
                 "not %s", rep->str, sha);
    else
        rc = 0;
    if (rep)
        freeReplyObject(rep);
    return rc;
}

/* The function library: its first line names it by its text's SHA-1, as
 * RL_FUNCTION (lua/library.lua) names its function, so a server that has
 * it under that name has this very text.  1: the server has it; 0: it
 * refused (EVALSHA then); -1: no answer (the connect fails). */
static int load_library(const rio_opts *o, rlink *l, char *err,
                        size_t errlen)
{
    char sha[41], head[160];
    redisReply *rep;
    int rc;

    if (!o->library)
        return 0;
    sha1_hex(o->library, o->library_len, sha);
    snprintf(head, sizeof head, "#!lua name=ratelimit_%s\n"
             "local RL_FUNCTION = 'rl_%s'\n", sha, sha);
    rep = rlink_command(l, "FUNCTION LOAD %s%b", head, o->library,
                        o->library_len);
    if (!rep) {
        snprintf(err, errlen, "FUNCTION LOAD: %s", l->errstr);
        return -1;
    }
    rc = rep->type != REDIS_REPLY_ERROR ||
         strstr(rep->str, "already exists") != NULL;
    freeReplyObject(rep);
    return rc;
}

/* need_master: the server must say it is a master (ROLE), or it is not
 * used: a replica would refuse the scripts' writes. */
static int check_master(rlink *l, char *err, size_t errlen)
{
    redisReply *r = rlink_command(l, "ROLE");
    int rc = -1;

    if (!r)
        snprintf(err, errlen, "ROLE: %s", l->errstr);
    else if (r->type == REDIS_REPLY_ERROR)
        return expect_ok(l, r, "ROLE", err, errlen); /* frees */
    else if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
             r->element[0]->type != REDIS_REPLY_STRING)
        snprintf(err, errlen, "ROLE: unexpected reply");
    else if (strcmp(r->element[0]->str, "master") != 0)
        snprintf(err, errlen, "not a master (ROLE says %.20s)",
                 r->element[0]->str);
    else
        rc = 0;
    if (r)
        freeReplyObject(r);
    return rc;
}

/* Connect (and handshake), AUTH, SELECT, check the role (need_master),
 * the version, SCRIPT LOAD, FUNCTION LOAD; returns a non-blocking fd (and
 * *ssl), or -1 with the reason in err. */
int rconnector_handshake(const rio_opts *o, const char *sha,
                         SSL_SESSION **sess, SSL **ssl, int *fcall,
                         char *err, size_t errlen)
{
    const redis_uri *u = &o->uri;
    rlink l;
    redisReply *rep;
    int rc;

    *ssl = NULL;
    *fcall = 0;
    if (rlink_open(&l, u, o->tls, *sess, o->connect_timeout_ms, err,
                   errlen) != 0)
        return -1;
    if (u->password[0]) {
        rep = u->user[0] ? rlink_command(&l, "AUTH %s %s", u->user,
                                         u->password)
                         : rlink_command(&l, "AUTH %s", u->password);
        if (expect_ok(&l, rep, "AUTH", err, errlen))
            goto fail;
    }
    if (u->db && expect_ok(&l, rlink_command(&l, "SELECT %d", u->db),
                           "SELECT", err, errlen))
        goto fail;
    if (o->need_master && check_master(&l, err, errlen))
        goto fail;
    if (check_version(&l, err, errlen) || load_script(o, sha, &l, err, errlen))
        goto fail;
    if ((*fcall = load_library(o, &l, err, errlen)) < 0 ||
        (rc = rcmd_detect(o, &l, err, errlen)) < 0)
        goto fail;
    *fcall |= rc; /* RCONN_LIBRARY (1) and RCONN_MODULE */
    /* After replies came: a TLS 1.3 server's session tickets with them. */
    rlink_keep_session(&l, sess);
    return rlink_release(&l, ssl);
fail:
    rlink_close(&l);
    return -1;
}

/* ---- the thread ------------------------------------------------------------ */

/* Sleep until what the thread waits for may have changed: a need, a stop,
 * or the soonest try (ms, CLOCK_MONOTONIC; INT64_MAX: none).  Under mu. */
static void sleep_until(rconnector *k, int64_t soonest, int64_t now)
{
    struct timespec until;

    if (soonest == INT64_MAX) {
        pthread_cond_wait(&k->cv, &k->mu);
        return;
    }
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)((soonest - now) % 1000) * 1000000;
    until.tv_sec += (soonest - now) / 1000 + until.tv_nsec / 1000000000;
    until.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&k->cv, &k->mu, &until);
}

/* Started without a connection (degraded_start): the first failure is
 * logged, since nothing else says why checks fall back, and so is the
 * first success after it.  Later failures (a server that was up went
 * away) are the breaker's business, not logged. */
static void tell(rconnector *k, const redis_uri *u, const char *err)
{
    char at[300];

    if (err && (k->ever_up || k->told))
        return;
    if (!err && !k->told) {
        k->ever_up = 1;
        return;
    }
    snprintf(at, sizeof at, "%s%s:%d", u->is_unix ? "unix:" : "",
             u->is_unix ? u->path : u->host, u->is_unix ? 0 : u->port);
    if (err)
        log_emit(k->o.log_fn, k->o.log_arg, RL_LOG_WARN, "Redis %s: not "
                 "connected yet, checks follow the failure modes: %s", at,
                 err);
    else
        log_emit(k->o.log_fn, k->o.log_arg, RL_LOG_INFO, "Redis %s: "
                 "connected", at);
    k->told = err != NULL;
    k->ever_up |= err == NULL;
}

/* Connections are tried in turn; a failed one waits 10 ms, doubling up to
 * max_backoff_ms, before its next try. */
static void *connector_main(void *arg)
{
    rconnector *k = arg;
    int64_t backoff[RIO_MAX_CONNS], next_try[RIO_MAX_CONNS] = {0};
    char err[256];
    unsigned sess_gen = 0;
    sigset_t nopipe;

    sigemptyset(&nopipe); /* TLS writes: EPIPE, never SIGPIPE */
    sigaddset(&nopipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &nopipe, NULL);
    for (int i = 0; i < RIO_MAX_CONNS; i++)
        backoff[i] = 10;
    pthread_mutex_lock(&k->mu);
    while (!k->stop) {
        int64_t now = clock_mono_ms(), soonest = INT64_MAX;
        int i, fd, fcall;
        unsigned gen;
        SSL *ssl;
        rio_opts o;
        for (i = 0; i < k->n; i++) {
            if (k->need[i] && next_try[i] <= now)
                break;
            if (k->need[i] && next_try[i] < soonest)
                soonest = next_try[i];
        }
        if (i == k->n) {
            sleep_until(k, soonest, now);
            continue;
        }
        o = k->o; /* a retarget may change it meanwhile */
        gen = k->gen;
        pthread_mutex_unlock(&k->mu);
        if (gen != sess_gen) { /* the session is the old server's */
            SSL_SESSION_free(k->sess);
            k->sess = NULL;
            sess_gen = gen;
        }
        fd = rconnector_handshake(&o, k->sha, &k->sess, &ssl, &fcall, err,
                                  sizeof err);
        tell(k, &o.uri, fd >= 0 ? NULL : err);
        pthread_mutex_lock(&k->mu);
        if (gen != k->gen) { /* retargeted meanwhile: the new one now */
            if (fd >= 0) {
                rtls_free(ssl);
                close(fd);
            }
            for (int j = 0; j < k->n; j++) {
                next_try[j] = 0;
                backoff[j] = 10;
            }
            continue;
        }
        if (fd >= 0) { /* under mu: no retarget before the hand-over */
            k->ready(k->arg, i, fd, ssl, fcall);
            k->need[i] = 0;
            backoff[i] = 10;
        } else {
            next_try[i] = clock_mono_ms() + backoff[i];
            backoff[i] = backoff[i] * 2 > k->o.max_backoff_ms
                             ? k->o.max_backoff_ms : backoff[i] * 2;
        }
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* ---- the API ------------------------------------------------------------------ */

int rconnector_start(rconnector **out, const rio_opts *o, const char *sha,
                     int n, const int *need, SSL_SESSION *sess,
                     rconnector_ready_fn ready, void *arg)
{
    rconnector *k = calloc(1, sizeof *k);

    *out = NULL;
    if (!k)
        return -1;
    *k = (rconnector){.o = *o, .n = n, .ready = ready, .arg = arg};
    memcpy(k->sha, sha, sizeof k->sha);
    memcpy(k->need, need, (size_t)n * sizeof *need);
    k->sess = sess; /* the thread's once it runs; else still the caller's */
    for (int i = 0; i < n; i++)
        k->ever_up |= !need[i]; /* connected at start */
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    if (pthread_create(&k->th, NULL, connector_main, k) != 0) {
        pthread_mutex_destroy(&k->mu);
        pthread_cond_destroy(&k->cv);
        free(k);
        return -1;
    }
    *out = k;
    return 0;
}

void rconnector_need(rconnector *k, int i)
{
    pthread_mutex_lock(&k->mu);
    k->need[i] = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

void rconnector_retarget(rconnector *k, const char *host, int port)
{
    pthread_mutex_lock(&k->mu);
    snprintf(k->o.uri.host, sizeof k->o.uri.host, "%s", host);
    k->o.uri.port = port;
    k->gen++;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

void rconnector_stop(rconnector *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->th, NULL);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    SSL_SESSION_free(k->sess);
    free(k);
}
