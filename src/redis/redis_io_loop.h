/*
 * redis_io_loop.h -- the I/O loop's own types, shared by its two halves:
 * redis_io.c (the queue, the connections, the replies, the loop's turn)
 * and redis_batch.c (a connection's batch: gathered from the queue,
 * encoded as script calls, answered from their replies), and how either
 * ends a job's turn (claim, finish, recycle).  redis_expire.c (jobs that
 * get no answer, and the loop's deadlines) ends jobs with them too.
 * Nothing here is for the rest of the library, which speaks redis_io.h;
 * only the loop thread touches a conn, an entry or a batch (see
 * redis_io.c).  The batch half's own functions: redis_batch.h.
 */
#ifndef RL_REDIS_IO_LOOP_H
#define RL_REDIS_IO_LOOP_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "redis_connector.h"
#include "redis_io.h"
#include "redis_script.h"
#include "redis_ticket.h"
#include "resp.h"

#define BATCH_MAX 64          /* requests per batch                      */
#define OWN_MAX 15            /* per-call mode: requests with a call of
                                 their own per batch (each may need an
                                 ASKING reply too)                       */
#define RING 128              /* calls a connection may wait for         */
#define RBUF 65536
#define IDLE_TICK_MS 1000     /* the loop's longest sleep, all idle      */
#define BUSY_TICK_MS 100      /* ... with calls out (stuck detection)    */

enum { E_BATCH, E_RAW };

/* What a connection waits for, in order. */
typedef struct entry {
    int kind;
    int nrep, got;
    redisReply *rep[RIO_MAX_REPLIES];
    rio_ticket *tk;           /* E_RAW; NULL once it left               */
    int64_t sent_ns;
} entry;

/* A connection's batch in flight: slot j is tk[j], NULL once it left
 * at its deadline (its answer is then read and dropped); job[j] is its
 * job while claimed (encoding the call, reading the answer), else NULL. */
typedef struct batch {
    int active, nb, how;         /* how: SCRIPT_* (redis_script.h) */
    int probe;                   /* a job flagged RN_PROBE: no RL.CHECK */
    rio_ticket *tk[BATCH_MAX];
    rio_job *job[BATCH_MAX];
    size_t n[BATCH_MAX];
    int flags[BATCH_MAX];
} batch;

typedef struct conn {
    int fd;                   /* -1: down, the connector works on it    */
    SSL *ssl;                 /* rediss://: TLS over fd; NULL plain     */
    int rd_wants_out;         /* TLS: a read waits for writable         */
    int wr_wants_in;          /* TLS: a write waits for readable        */
    redisReader *reader;
    resp_buf out;             /* bytes not written yet: out.p[off..len) */
    size_t off;
    int pollout;
    entry ring[RING];
    unsigned head, count;
    batch b;
    int64_t last_reply_ns;
    int fcall;                /* the server took the function library:
                                 FCALL (until a call finds it gone)     */
} conn;

enum { S_CALLS, S_WRITES, S_TIMEOUTS, S_RECONNECTS, S_DOWN, S_STUCK,
       S_BATCHES, S_CHECKS, S_NOSCRIPT, S_MOVED, S_ASKS, S_ELSEWHERE,
       S_TLS, S_RESUMED, S_COUNT };

struct rio {
    rio_opts o;
    script_ctx sx;
    /* shared: under mu */
    pthread_mutex_t mu;
    rio_ticket *qhead, *qtail;
    tk_pool pool;
    int ready_fd[RIO_MAX_CONNS];
    SSL *ready_ssl[RIO_MAX_CONNS];
    int ready_fcall[RIO_MAX_CONNS];
    int stop;
    int drop;                  /* rio_retarget: close what is up          */
    /* shared: atomics */
    _Atomic int sleeping, queued, nup;
    _Atomic int mod_seen;      /* rio_module_seen()                      */
    _Atomic int64_t wake_at;
    _Atomic int64_t st[S_COUNT];
    int efd, epfd;
    /* the loop's own */
    conn c[RIO_MAX_CONNS];
    int nconns;
    unsigned rr;
    rio_ticket *phead, *ptail; /* checks taken, not sent yet            */
    rio_ticket *rhead, *rtail; /* raw calls taken, not sent yet         */
    rio_ticket *fhead, *ftail; /* done with: back to the pool next turn */
    uint64_t ring;             /* bells to ring (bit i: pool.bell[i])    */
    char rbuf[RBUF];           /* what a read brings, before the reader  */
    rconnector *connector;
    pthread_t loop_th;
    int loop_started;
};

static inline void stat_add(rio *r, int k, int64_t v)
{
    atomic_fetch_add_explicit(&r->st[k], v, memory_order_relaxed);
}

/* Note that connection c waits for a reply (or nrep) next. */
static inline entry *push_entry(conn *c, int kind, int nrep, rio_ticket *tk)
{
    entry *e = &c->ring[(c->head + c->count++) % RING];

    *e = (entry){.kind = kind, .nrep = nrep, .tk = tk,
                 .sent_ns = clock_mono_ns()};
    return e;
}

/* ---- completion: both halves of the loop end a job's turn here -------
 * (inline, so that redis_batch.c calls nothing in redis_io.c: the loop
 * calls its batch half, never the other way round). */

/* The loop is done with ticket t: it goes back to the pool next turn. */
static inline void recycle(rio *r, rio_ticket *t)
{
    t->next = NULL;
    if (r->ftail)
        r->ftail->next = t;
    else
        r->fhead = t;
    r->ftail = t;
}

/* Claim t's job; 0 when its caller left at its deadline (a timeout,
 * counted here, once), the ticket then recycled. */
static inline int rio_loop_take(rio *r, rio_ticket *t)
{
    if (tk_claim(t))
        return 1;
    stat_add(r, S_TIMEOUTS, 1);
    recycle(r, t);
    return 0;
}

/* t's caller sleeps on its cohort's bell: ring it when the turn's work
 * is done (redis_io.c: one wake-up for all its sleepers). */
static inline void rio_loop_bell(rio *r, rio_ticket *t)
{
    r->ring |= UINT64_C(1) << t->bell;
}

/* t is claimed and its answer (or failure) is in its job: tell the
 * submitter (its callback, or DONE and its bell noted), then recycle. */
static inline void rio_loop_finish(rio *r, rio_ticket *t)
{
    rio_job *j = t->job;

    if (j->done)
        j->done(j); /* may free j */
    if (tk_finish(t))
        rio_loop_bell(r, t);
    recycle(r, t);
}

#endif
