/*
 * redis_io.c -- see redis_io.h: one server's connections, its I/O thread
 * (the loop) and its connector thread.
 *
 * The path of a request: the caller fills a rio_job and rio_submit()
 * appends it to the queue under `mu` (a few pointer stores: the only lock
 * a caller takes, and waits for no longer than its deadline), then wakes
 * the loop if it sleeps and would act on it.
 * The loop takes the whole queue at the start of each turn, fails what
 * passed its deadline, and gives each idle connection (one with no batch
 * in flight) the next batch (redis_batch.c): up to BATCH_MAX queued
 * requests encoded as one script call (redis_script.c).  Requests that
 * queue while every connection has a batch out wait for the next turn,
 * which is what batches 64 concurrent checks into a few script calls.
 * Replies are read as they come (non-blocking sockets, epoll) and matched
 * in order to what each connection waits for; a batch's answer completes
 * each of its requests.  NOSCRIPT (a restarted or flushed server) sends
 * the same requests again at once as EVAL, within their deadlines.
 *
 * Locks and wake-ups, all of them:
 *  - `mu` guards the queue, the ticket pool, the connector's hand-over
 *    slots (ready_fd) and `stop`.  Held for a few stores, never across a
 *    system call (but a pool that must grow by a chunk).
 *  - The loop sleeps in epoll_wait on its sockets and an eventfd.  Before
 *    sleeping it publishes `sleeping` (1: wake me for any new job; 2: every
 *    connection is busy, wake me only for a raw call or a job whose
 *    deadline comes before `wake_at`), then re-reads `queued`; a submitter
 *    bumps `queued`, then reads `sleeping` and, if it must, takes it back
 *    to 0 and writes the eventfd.  Both sides use sequentially consistent
 *    atomics, so either the loop sees the job or the submitter sees the
 *    sleeper: no lost wake-up, and no wake-up at all while the loop is
 *    awake or busy.
 *  - Jobs travel as tickets (redis_ticket.h): the queue, the loop's lists,
 *    its batches and its reply rings hold tickets, loop-owned memory,
 *    never pointers into a caller's memory that outlive the caller.  The
 *    loop reads a job's ops (encoding a batch) and writes its answer only
 *    inside a claim of its ticket (HELD -> BUSY -> HELD or DONE); a
 *    failure or a timeout is HELD -> DONE without touching the job.
 *  - A blocking caller waits in rio_wait(): a short look, then a futex
 *    sleep on its cohort's bell (redis_ticket.h: the jobs one take_queue
 *    took share one word; the loop notes the bells of the callers it
 *    answers and rings each once at the end of its turn's work, `ring`)
 *    until DONE or its deadline + RIO_GRACE_MS,
 *    whichever first; at that limit it takes the ticket from HELD to GONE
 *    and returns a timeout, whatever the loop is doing (a loop thread the
 *    scheduler does not run was seen late by over a second on busy
 *    cores).  It waits longer only while the loop is inside a claim of its
 *    job (BUSY), and the loop wakes it when it leaves one.  The loop drops
 *    a GONE ticket when it next meets it (queued, in a batch, or at its
 *    late reply).  A callback job is never GONE: `done` is called inside
 *    its claim, in the loop.
 *  - Tickets come from a per-server pool, issued by rio_submit under `mu`
 *    (with the queue: no further lock) and returned by the loop, which
 *    gathers them during a turn and hands them back under `mu` in
 *    take_queue.
 *  - The connector (redis_connector.c) is told when the loop closes a
 *    broken or stuck connection, connects with blocking hiredis calls,
 *    puts the new descriptor in ready_fd[i] under `mu` (holding its own
 *    lock: the loop never calls the connector under `mu`) and writes the
 *    eventfd.  rio_retarget (Sentinel) gives the connector a new address,
 *    then sets `drop` under `mu`: the loop's next turn closes every
 *    connection, so the connector makes them again to the new address.
 * Only the loop touches the sockets, the reader, the connections' state
 * and the jobs once taken (inside claims); callers touch their jobs again
 * after DONE or GONE (or inside `done`, called by the loop).
 */
#include "redis_io.h"
#include "redis_io_loop.h"
#include "redis_batch.h"
#include "redis_expire.h"
#include "redis_connector.h"
#include "redis_module_cmd.h"
#include "redis_tls.h"
#include "ratelimit.h"
#include "redis_script.h"
#include "redis_ticket.h"
#include "resp.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* The loop's types and its batch half: redis_io_loop.h, redis_batch.h. */

static void wake_fd(int fd)
{
    uint64_t one = 1;

    if (write(fd, &one, sizeof one) < 0) { /* counter full: awake */ }
}

/* ---- completion ------------------------------------------------------- */

/* recycle, rio_loop_take, rio_loop_finish: redis_io_loop.h (the batch
 * half completes jobs with them too); rio_loop_fail, rio_loop_fail_list,
 * rio_loop_expire (jobs failed as they are, or at their deadline),
 * rio_loop_still_due and rio_loop_next_wake: redis_expire.c. */

void rio_wait(rio_job *j)
{
    if (!j->tk) /* failed at submission */
        return;
    if (!tk_wait(j->tk, j->gen, j->bell,
                 j->deadline_ns + (int64_t)RIO_GRACE_MS * 1000000)) {
        j->rc = RL_ESTORE; /* given up: the job is ours alone again */
        j->why.status = RN_ERROR;
    }
}

/* ---- connections (loop only) --------------------------------------------- */

static void install(rio *r, int i, int fd, SSL *ssl, int fcall)
{
    conn *c = &r->c[i];
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
                             .data.u32 = (uint32_t)i};

    if (ssl) {
        stat_add(r, S_TLS, 1);
        stat_add(r, S_RESUMED, SSL_session_reused(ssl) == 1);
    }
    c->fd = fd;
    c->ssl = ssl;
    c->rd_wants_out = c->wr_wants_in = 0;
    c->off = c->out.len = 0;
    c->pollout = 0;
    c->last_reply_ns = clock_mono_ns();
    c->fcall = fcall;
    if (fcall & RCONN_MODULE)
        atomic_store(&r->mod_seen, 1);
    redisReaderFree(c->reader);
    c->reader = redisReaderCreate();
    epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
    atomic_fetch_add(&r->nup, 1);
}

static void free_replies(entry *e)
{
    for (int k = 0; k < e->got; k++)
        freeReplyObject(e->rep[k]);
    e->got = 0;
}

/* The connection broke (or is stuck): everything it waits for fails, and
 * the connector replaces it. */
static void fail_conn(rio *r, int i)
{
    conn *c = &r->c[i];

    if (c->fd < 0)
        return;
    epoll_ctl(r->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    rtls_free(c->ssl);
    c->ssl = NULL;
    close(c->fd);
    c->fd = -1;
    atomic_fetch_sub(&r->nup, 1);
    for (; c->count; c->count--, c->head = (c->head + 1) % RING) {
        entry *e = &c->ring[c->head];
        free_replies(e);
        if (e->kind == E_RAW && e->tk)
            rio_loop_fail(r, e->tk, -1);
    }
    for (int j = 0; c->b.active && j < c->b.nb; j++)
        if (c->b.tk[j])
            rio_loop_fail(r, c->b.tk[j], -1);
    c->b.active = 0;
    c->off = c->out.len = 0;
    if (r->connector)
        rconnector_need(r->connector, i);
}

static void set_pollout(rio *r, int i, int on)
{
    conn *c = &r->c[i];
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP |
                                       (on ? EPOLLOUT : 0),
                             .data.u32 = (uint32_t)i};

    if (c->pollout != on) {
        c->pollout = on;
        epoll_ctl(r->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    }
}

/* The transport, the socket or TLS over it (redis_tls.c): -1 with errno
 * EAGAIN when it must wait, for readable, or for writable when
 * c->rd_wants_out (a read) / not c->wr_wants_in (a write). */
static ssize_t conn_read(rio *r, int i, void *buf, size_t len)
{
    conn *c = &r->c[i];
    ssize_t n;

    if (!c->ssl)
        return read(c->fd, buf, len);
    n = rtls_read(c->ssl, buf, len);
    if ((c->rd_wants_out = n == RTLS_WANT_WRITE))
        set_pollout(r, i, 1);
    errno = n == RTLS_FAIL ? EIO : EAGAIN;
    return n >= 0 ? n : -1;
}

static ssize_t conn_write(conn *c, const void *buf, size_t len)
{
    ssize_t n;

    if (!c->ssl) /* send(): a server gone must not raise SIGPIPE */
        return send(c->fd, buf, len, MSG_NOSIGNAL);
    n = rtls_write(c->ssl, buf, len); /* the loop blocks SIGPIPE */
    c->wr_wants_in = n == RTLS_WANT_READ;
    errno = n == RTLS_FAIL || n == 0 ? EIO : EAGAIN;
    return n > 0 ? n : -1;
}

static void flush(rio *r, int i)
{
    conn *c = &r->c[i];

    while (c->fd >= 0 && c->off < c->out.len) {
        ssize_t w = conn_write(c, c->out.p + c->off, c->out.len - c->off);
        if (w > 0) {
            c->off += (size_t)w;
            stat_add(r, S_WRITES, 1);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            set_pollout(r, i, !c->wr_wants_in || c->rd_wants_out);
            return;
        } else {
            fail_conn(r, i);
            return;
        }
    }
    if (c->fd >= 0) {
        c->off = c->out.len = 0;
        set_pollout(r, i, c->rd_wants_out);
    }
}

/* ---- replies ------------------------------------------------------------- */

static void entry_done(rio *r, int i, entry *e)
{
    if (e->kind == E_BATCH) {
        rbatch_answer(r, i, e);
    } else if (e->tk && rio_loop_take(r, e->tk)) {
        rio_job *j = e->tk->job;
        memcpy(j->replies, e->rep, (size_t)e->nrep * sizeof *e->rep);
        e->got = 0; /* the caller owns them now */
        j->rc = RL_OK;
        j->why.status = RN_OK;
        rio_loop_finish(r, e->tk);
    }
    free_replies(e);
}

static void deliver(rio *r, int i, redisReply *rep)
{
    conn *c = &r->c[i];
    entry *e;

    c->last_reply_ns = clock_mono_ns();
    if (!c->count) { /* nobody asked: cannot happen */
        freeReplyObject(rep);
        return;
    }
    e = &c->ring[c->head];
    e->rep[e->got++] = rep;
    if (e->got < e->nrep)
        return;
    c->head = (c->head + 1) % RING;
    c->count--;
    entry_done(r, i, e);
}

static void on_readable(rio *r, int i)
{
    /* The loop's own buffer, not a thread-local one: a 64 KiB TLS block
     * does not fit the static TLS a dlopen()ed library gets (the Python
     * binding, an nginx module), and metrics_me's initial-exec model
     * makes the whole block static. */
    char *buf = r->rbuf;
    conn *c = &r->c[i];

    while (c->fd >= 0) {
        ssize_t n = conn_read(r, i, buf, RBUF);
        void *rep;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            if (c->wr_wants_in) /* what it waited for came */
                flush(r, i);
            return;
        }
        if (n <= 0 || redisReaderFeed(c->reader, buf, (size_t)n) != REDIS_OK) {
            fail_conn(r, i);
            return;
        }
        for (;;) {
            if (redisReaderGetReply(c->reader, &rep) != REDIS_OK) {
                fail_conn(r, i);
                return;
            }
            if (!rep)
                break;
            deliver(r, i, rep);
            if (c->fd < 0)
                return;
        }
        /* TLS: on until it wants more, for what OpenSSL holds
         * decrypted does not wake epoll. */
        if (!c->ssl && (size_t)n < RBUF)
            return;
    }
}

/* ---- the loop's turn ------------------------------------------------------- */

/* Take what the submitters and the connector left; 1 once stopped. */
static int take_queue(rio *r)
{
    rio_ticket *j, *next;
    int stop, drop;

    pthread_mutex_lock(&r->mu);
    tk_pool_put(&r->pool, r->fhead, r->ftail);
    r->fhead = r->ftail = NULL;
    for (int i = 0; i < r->nconns; i++)
        if (r->ready_fd[i] >= 0) {
            install(r, i, r->ready_fd[i], r->ready_ssl[i],
                    r->ready_fcall[i]);
            r->ready_fd[i] = -1;
            r->ready_ssl[i] = NULL;
            stat_add(r, S_RECONNECTS, 1);
        }
    j = r->qhead;
    if (j) /* what is queued from now on sleeps on the next bell */
        tk_pool_cohort(&r->pool);
    r->qhead = r->qtail = NULL;
    atomic_store(&r->queued, 0);
    stop = r->stop;
    drop = r->drop;
    r->drop = 0;
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; drop && i < r->nconns; i++)
        fail_conn(r, i); /* the old address's (rio_retarget) */
    for (; j; j = next) {
        rio_ticket **head = j->kind == RIO_RAW ? &r->rhead : &r->phead;
        rio_ticket **tail = j->kind == RIO_RAW ? &r->rtail : &r->ptail;
        next = j->next;
        j->next = NULL;
        if (*tail)
            (*tail)->next = j;
        else
            *head = j;
        *tail = j;
    }
    return stop;
}

/* A connection is stuck when its oldest call has waited longer than a
 * whole connect may take, its deadline has passed, and no reply came
 * meanwhile: the server hangs, or the network swallows what it sends.
 * Replace it: its oldest call has been given up (a later one would be
 * answered after it), and a fresh connection lets checks reach Redis
 * again as soon as it answers.  Not before the deadline: a server that
 * is slow but alive (a long script, DEBUG SLEEP) under a timeout_ms over
 * that bound still answers within it, and replacing its connection then
 * failed checks that had time left.  Judged right after the turn's read
 * (wait_events), never before it: a loop the scheduler kept off its CPU
 * for a second (a loaded host, valgrind) finds replies waiting in the
 * socket, which are not silence (judged at the top of the turn, a healthy
 * connection was replaced and the checks Redis had answered fell back). */
static void unstick(rio *r, int64_t now)
{
    int64_t limit = r->o.connect_timeout_ms * 1000000;

    if (limit < 1000000000)
        limit = 1000000000; /* never under a second */
    for (int i = 0; i < r->nconns; i++) {
        conn *c = &r->c[i];
        if (c->fd >= 0 && c->count && now - c->ring[c->head].sent_ns > limit &&
            now - c->last_reply_ns > limit && !rio_loop_still_due(c, now)) {
            stat_add(r, S_STUCK, 1);
            fail_conn(r, i);
        }
    }
}

/* Raw calls onto any connection up; batches onto the idle ones. */
static void dispatch(rio *r, int64_t now)
{
    if (!atomic_load(&r->nup)) { /* nothing can be sent */
        rio_loop_fail_list(r, &r->phead, &r->ptail, S_DOWN);
        rio_loop_fail_list(r, &r->rhead, &r->rtail, S_DOWN);
        return;
    }
    for (int k = 0; r->rhead && k < r->nconns; k++) {
        int i = (int)(r->rr++ % (unsigned)r->nconns);
        conn *c = &r->c[i];
        while (c->fd >= 0 && r->rhead && c->count < RING - 1) {
            rio_ticket *t = r->rhead;
            r->rhead = t->next;
            t->next = NULL;
            if (!rio_loop_take(r, t)) /* its caller left */
                continue;
            rio_job *j = t->job;
            j->as_module = j->raw_mod && (c->fcall & RCONN_MODULE);
            resp_raw(&c->out, j->as_module ? j->raw_mod : j->raw,
                     j->as_module ? j->raw_mod_len : j->raw_len);
            tk_release(t);
            push_entry(c, E_RAW, t->nreplies, t);
            stat_add(r, S_CALLS, 1);
        }
    }
    if (!r->rhead)
        r->rtail = NULL;
    for (int k = 0; r->phead && k < r->nconns; k++) {
        int i = (int)(r->rr++ % (unsigned)r->nconns);
        if (r->c[i].fd >= 0 && !r->c[i].b.active && r->c[i].count < RING - 1)
            rbatch_next(r, i, now);
    }
}

/* The sleep's length is measured from a clock read just before it, not
 * from the turn's start: a turn the scheduler preempted (a busy machine
 * stalls a runnable thread for hundreds of ms) must not add its stall to
 * the next deadline, and a deadline that passed meanwhile is met at once
 * rather than a whole timeout later. */
static void wait_events(rio *r, int64_t now)
{
    struct epoll_event ev[RIO_MAX_CONNS + 1];
    int idle, n, timeout = 0;
    int64_t until = rio_loop_next_wake(r, now, &idle), left;

    atomic_store(&r->wake_at, until);
    atomic_store(&r->sleeping, idle ? 1 : 2);
    left = until - clock_mono_ns();
    if (atomic_load(&r->queued) || left <= 0) /* work, or a deadline, due */
        atomic_store(&r->sleeping, 0);
    else
        timeout = (int)((left + 999999) / 1000000);
    n = epoll_wait(r->epfd, ev, RIO_MAX_CONNS + 1,
                   atomic_load(&r->sleeping) ? timeout : 0);
    atomic_store(&r->sleeping, 0);
    for (int k = 0; k < n; k++) {
        uint32_t i = ev[k].data.u32;
        if (i == UINT32_MAX) {
            uint64_t drain;
            if (read(r->efd, &drain, sizeof drain) < 0) { /* spurious */ }
            continue;
        }
        if (r->c[i].fd < 0)
            continue;
        if (ev[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
            on_readable(r, (int)i);
        if (r->c[i].fd >= 0 && (ev[k].events & EPOLLOUT) &&
            r->c[i].rd_wants_out)
            on_readable(r, (int)i);
        if (r->c[i].fd >= 0 && (ev[k].events & EPOLLOUT))
            flush(r, (int)i);
    }
}

/* Wake the callers whose jobs the turn ended: each bell noted, once. */
static void ring(rio *r)
{
    if (r->ring) {
        tk_ring(&r->pool, r->ring);
        r->ring = 0;
    }
}

static void *loop_main(void *arg)
{
    rio *r = arg;
    sigset_t nopipe;

    sigemptyset(&nopipe); /* TLS writes: EPIPE, never SIGPIPE */
    sigaddset(&nopipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &nopipe, NULL);
    while (!take_queue(r)) {
        int64_t now = clock_mono_ns();
        rio_loop_expire(r, now);
        dispatch(r, now);
        for (int i = 0; i < r->nconns; i++)
            if (r->c[i].fd >= 0 && r->c[i].off < r->c[i].out.len &&
                !r->c[i].pollout)
                flush(r, i);
        ring(r); /* before a sleep */
        wait_events(r, now);
        unstick(r, clock_mono_ns());
        ring(r); /* the replies it read, the calls unstick failed */
    }
    for (int i = 0; i < r->nconns; i++)
        fail_conn(r, i);
    rio_loop_fail_list(r, &r->phead, &r->ptail, S_DOWN);
    rio_loop_fail_list(r, &r->rhead, &r->rtail, S_DOWN);
    ring(r);
    return NULL;
}

/* ---- the API --------------------------------------------------------------- */

/* A job that never reached the loop fails in its submitter's thread. */
static void fail_now(rio_job *j)
{
    j->tk = NULL;
    if (j->done)
        j->done(j);
}

/* mu, waited for at most until deadline_ns: its holder (the loop, or
 * another submitter) may be preempted while it holds it.  The wait is a
 * timedlock on CLOCK_REALTIME, the deadline carried over (the sanitizers
 * know timedlock; a clock step during the wait only moves its end). */
static int lock_until(rio *r, int64_t deadline_ns)
{
    struct timespec ts;
    int64_t at;

    if (pthread_mutex_trylock(&r->mu) == 0)
        return 0;
    clock_gettime(CLOCK_REALTIME, &ts);
    at = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec +
         (deadline_ns - clock_mono_ns());
    ts = (struct timespec){.tv_sec = at / 1000000000,
                           .tv_nsec = at % 1000000000};
    return pthread_mutex_timedlock(&r->mu, &ts);
}

void rio_submit(rio *r, rio_job *jobs, size_t n)
{
    int64_t first = INT64_MAX;
    int urgent = 0, mode;
    size_t issued = 0;

    for (size_t i = 0; i < n; i++) {
        jobs[i].rc = RL_ESTORE;
        jobs[i].why.status = RN_ERROR;
        jobs[i].tk = NULL;
        first = jobs[i].deadline_ns < first ? jobs[i].deadline_ns : first;
        urgent |= jobs[i].kind == RIO_RAW;
    }
    if (!atomic_load(&r->nup)) { /* down: fail at once */
        stat_add(r, S_DOWN, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            fail_now(&jobs[i]);
        return;
    }
    if (lock_until(r, first) != 0) { /* a holder off its CPU that long */
        stat_add(r, S_TIMEOUTS, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            fail_now(&jobs[i]);
        return;
    }
    for (; issued < n; issued++) {
        rio_ticket *t = tk_issue(&r->pool, &jobs[issued]);
        if (!t)
            break;
        if (r->qtail)
            r->qtail->next = t;
        else
            r->qhead = t;
        r->qtail = t;
    }
    atomic_fetch_add(&r->queued, (int)issued);
    pthread_mutex_unlock(&r->mu);
    for (size_t i = issued; i < n; i++) /* out of memory for tickets */
        fail_now(&jobs[i]);
    mode = atomic_load(&r->sleeping);
    if (!issued || (mode == 2 && !urgent && first >= atomic_load(&r->wake_at)))
        return; /* busy: the next turn takes it */
    if (mode && atomic_exchange(&r->sleeping, 0))
        wake_fd(r->efd);
}

int rio_call_mod(rio *r, const char *cmd, size_t len, const char *mod,
                 size_t mod_len, int nreplies, redisReply **replies,
                 int64_t timeout_ms, int *as_mod)
{
    rio_job j = {.kind = RIO_RAW, .raw = cmd, .raw_len = len, .raw_mod = mod,
                 .raw_mod_len = mod_len, .nreplies = nreplies,
                 .replies = replies,
                 .deadline_ns = clock_mono_ns() + timeout_ms * 1000000};

    if (nreplies < 1 || nreplies > RIO_MAX_REPLIES)
        return RL_EINVAL;
    rio_submit(r, &j, 1);
    rio_wait(&j);
    if (as_mod)
        *as_mod = j.as_module;
    return j.rc;
}

typedef struct sent {
    rio_job job;
    redisReply *rep[RIO_MAX_REPLIES];
    char bytes[];
} sent;

static void sent_done(rio_job *j)
{
    sent *s = (sent *)j;

    for (int k = 0; j->rc == RL_OK && k < j->nreplies; k++)
        freeReplyObject(s->rep[k]);
    free(s);
}

int rio_send_mod(rio *r, const char *cmd, size_t len, const char *mod,
                 size_t mod_len, int nreplies)
{
    sent *s;

    if (nreplies < 1 || nreplies > RIO_MAX_REPLIES ||
        !(s = malloc(sizeof *s + len + mod_len)))
        return RL_ESTORE;
    memcpy(s->bytes, cmd, len);
    if (mod)
        memcpy(s->bytes + len, mod, mod_len);
    s->job = (rio_job){.kind = RIO_RAW, .raw = s->bytes, .raw_len = len,
                       .raw_mod = mod ? s->bytes + len : NULL,
                       .raw_mod_len = mod_len,
                       .nreplies = nreplies, .replies = s->rep,
                       .deadline_ns = clock_mono_ns() + 5000000000LL,
                       .done = sent_done};
    rio_submit(r, &s->job, 1);
    return RL_OK;
}

void rio_retarget(rio *r, const char *host, int port)
{
    rconnector_retarget(r->connector, host, port);
    pthread_mutex_lock(&r->mu);
    r->drop = 1;
    pthread_mutex_unlock(&r->mu);
    wake_fd(r->efd);
}

int rio_is_up(rio *r)
{
    return atomic_load(&r->nup) > 0;
}

int rio_module_seen(rio *r)
{
    return atomic_load(&r->mod_seen);
}

void rio_stats_add(rio *r, rio_stats *s)
{
    int64_t v[S_COUNT];

    for (int k = 0; k < S_COUNT; k++)
        v[k] = atomic_load_explicit(&r->st[k], memory_order_relaxed);
    s->calls += v[S_CALLS];
    s->writes += v[S_WRITES];
    s->timeouts += v[S_TIMEOUTS];
    s->reconnects += v[S_RECONNECTS];
    s->down_fails += v[S_DOWN];
    s->stuck += v[S_STUCK];
    s->batches += v[S_BATCHES];
    s->checks += v[S_CHECKS];
    s->noscript += v[S_NOSCRIPT];
    s->moved += v[S_MOVED];
    s->asks += v[S_ASKS];
    s->elsewhere += v[S_ELSEWHERE];
    s->tls_handshakes += v[S_TLS];
    s->tls_resumed += v[S_RESUMED];
}

/* ---- lifecycle ---------------------------------------------------------------- */

/* The connector hands a connected descriptor over (its thread). */
static void ready(void *arg, int i, int fd, SSL *ssl, int fcall)
{
    rio *r = arg;

    pthread_mutex_lock(&r->mu);
    r->ready_fd[i] = fd;
    r->ready_ssl[i] = ssl;
    r->ready_fcall[i] = fcall;
    pthread_mutex_unlock(&r->mu);
    wake_fd(r->efd);
}

static int start(rio *r, const int *need, SSL_SESSION *sess, char *err,
                 size_t errlen)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};

    if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->efd, &ev) != 0 ||
        rconnector_start(&r->connector, &r->o, r->sx.sha, r->nconns, need,
                         sess, ready, r) != 0) {
        SSL_SESSION_free(sess); /* not the connector's */
        return snprintf(err, errlen, "cannot start the I/O threads"),
               RL_ESTORE;
    }
    if ((r->loop_started = pthread_create(&r->loop_th, NULL, loop_main,
                                          r) == 0) == 0)
        return snprintf(err, errlen, "cannot start the I/O threads"),
               RL_ESTORE;
    pthread_setname_np(r->loop_th, RIO_THREAD_NAME); /* top -H, tests */
    return RL_OK;
}

int rio_open(rio **out, const rio_opts *o, char *err, size_t errlen)
{
    rio *r = calloc(1, sizeof *r);
    int rc, need[RIO_MAX_CONNS] = {0};
    SSL_SESSION *sess = NULL; /* the server's, for the connector */

    *out = NULL;
    if (!r)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    r->o = *o;
    if (o->tls)
        SSL_CTX_up_ref(o->tls); /* rio_close frees it */
    r->nconns = o->connections < 1 ? 1 : o->connections > RIO_MAX_CONNS
                                              ? RIO_MAX_CONNS : o->connections;
    if (r->o.max_backoff_ms < 10)
        r->o.max_backoff_ms = 1000;
    r->sx = (script_ctx){.script = o->script, .script_len = o->script_len,
                         .compact = o->compact, .clock = o->clock,
                         .lean_tail = o->oldest ? ":1" : ""};
    script_ctx_names(&r->sx, o->library, o->library_len);
    pthread_mutex_init(&r->mu, NULL);
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < RIO_MAX_CONNS; i++) {
        r->c[i].fd = r->ready_fd[i] = -1;
        r->c[i].out = (resp_buf){malloc(16384), 0, 16384, 1, 0};
    }
    for (int i = 0; i < r->nconns; i++) {
        SSL *ssl = NULL;
        int fcall = 0;
        int fd = o->degraded ? -1 : rconnector_handshake(&r->o, r->sx.sha,
                                                         &sess, &ssl, &fcall,
                                                         err, errlen);
        if (fd < 0 && !o->degraded) {
            SSL_SESSION_free(sess);
            rio_close(r);
            return RL_ESTORE;
        }
        if (fd >= 0)
            install(r, i, fd, ssl, fcall);
        need[i] = fd < 0;
    }
    if (r->efd < 0 || r->epfd < 0 || !r->c[RIO_MAX_CONNS - 1].out.p) {
        SSL_SESSION_free(sess);
        rio_close(r);
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    }
    if ((rc = start(r, need, sess, err, errlen)) != RL_OK) {
        rio_close(r);
        return rc;
    }
    *out = r;
    return RL_OK;
}

void rio_close(rio *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_mutex_unlock(&r->mu);
    if (r->efd >= 0)
        wake_fd(r->efd);
    if (r->loop_started)
        pthread_join(r->loop_th, NULL); /* it failed what was left */
    rconnector_stop(r->connector);      /* no hand-over after this */
    for (int i = 0; i < RIO_MAX_CONNS; i++) {
        if (!r->loop_started && r->c[i].fd >= 0) {
            rtls_free(r->c[i].ssl);
            close(r->c[i].fd);
        }
        rtls_free(r->ready_ssl[i]);
        if (r->ready_fd[i] >= 0)
            close(r->ready_fd[i]);
        redisReaderFree(r->c[i].reader);
        resp_release(&r->c[i].out);
    }
    tk_pool_free(&r->pool); /* with the tickets of jobs given up */
    if (r->efd >= 0)
        close(r->efd);
    if (r->epfd >= 0)
        close(r->epfd);
    pthread_mutex_destroy(&r->mu);
    SSL_CTX_free(r->o.tls);
    free(r);
}
