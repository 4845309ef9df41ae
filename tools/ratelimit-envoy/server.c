/*
 * server.c -- ratelimit-envoy's gRPC server on gRPC's C core (libgrpc):
 * one completion queue driven by one poller thread that never waits on
 * anything else, and `threads` workers that make the checks (which may
 * wait for the store up to its timeout): the poller hands them each call
 * whose message it has read, through a queue.  So every call gRPC hands
 * over is read at once, whatever the checks wait for; a call matched but
 * left unread when the server shuts down is cancelled by gRPC, which a
 * graceful stop must not do.  SLOTS_PER calls are requested per worker
 * and re-armed as each call ends.  A call is a
 * small state machine on its slot: requested -> its one message read ->
 * (its checks started on the worker's loop context, rl_check_start; a
 * worker is an event loop, so a worker has as many calls at the store as
 * come, not one) -> answered (initial metadata, the message, the status, and the close seen,
 * in one batch) -> the slot re-armed.  Methods are dispatched by path:
 * ShouldRateLimit (service.c), the standard grpc.health.v1.Health/Check
 * (its two tiny messages written by hand: field 1, a string in and an enum
 * out), anything else UNIMPLEMENTED.  A call whose deadline has passed when
 * its message is read is answered DEADLINE_EXCEEDED (gRPC itself ends a
 * call at its deadline on the client's side).  Stop: the server's shutdown
 * lets the calls in flight finish (cancelled past the grace), then the
 * queue drains and the workers leave.
 */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "envoy_rls.h"

#define SLOTS_PER 64
#define THREADS_MAX 64
#define PEM_MAX (1 << 20)

static const char method_rls[] =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
static const char method_health[] = "/grpc.health.v1.Health/Check";

enum { SLOT_REQUESTED, SLOT_READING, SLOT_ANSWERING };

typedef struct slot {
    int state;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_byte_buffer *in, *out;
    grpc_slice details_text;
    int cancelled;
    rls_answer a; /* filled by the check, perhaps later (service.c) */
    struct rls_server *srv;
    struct worker *w;
} slot;

/* A worker: an event loop over its queue's eventfd and its loop
 * context's descriptor (rl_async_fd). */
typedef struct worker {
    struct rls_server *srv;
    pthread_t thread;
    rl_async *as;
    int efd;            /* written when the queue gets a call, and on quit */
    pthread_mutex_t mu; /* the queue and quit                              */
    slot **queue;       /* read calls: a ring of nslots                    */
    size_t head, count;
    int quit;
    size_t waiting;     /* the worker's: calls whose checks are in flight  */
} worker;

struct rls_server {
    rls_service *svc;
    grpc_server *server;
    grpc_completion_queue *cq;
    worker workers[THREADS_MAX];
    pthread_t poller;
    int nworkers;
    unsigned next; /* the poller's: the worker of the next call */
    slot *slots;
    size_t nslots;
    int stopping; /* atomic: no slot re-armed */
    int shutdown_tag;
    pthread_mutex_t mu; /* done: the server's shutdown has completed */
    pthread_cond_t cv;
    int done;
};

static void arm(slot *s)
{
    grpc_call_details_init(&s->details);
    grpc_metadata_array_init(&s->md);
    s->state = SLOT_REQUESTED;
    s->call = NULL;
    s->in = s->out = NULL;
    s->details_text = grpc_empty_slice();
    if (grpc_server_request_call(s->srv->server, &s->call, &s->details,
                                 &s->md, s->srv->cq, s->srv->cq, s) !=
        GRPC_CALL_OK) {
        grpc_call_details_destroy(&s->details);
        grpc_metadata_array_destroy(&s->md);
    }
}

static void release(slot *s)
{
    if (s->in)
        grpc_byte_buffer_destroy(s->in);
    if (s->out)
        grpc_byte_buffer_destroy(s->out);
    grpc_slice_unref(s->details_text);
    if (s->call)
        grpc_call_unref(s->call);
    grpc_call_details_destroy(&s->details);
    grpc_metadata_array_destroy(&s->md);
}

static void read_message(slot *s)
{
    grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};

    op.data.recv_message.recv_message = &s->in;
    s->state = SLOT_READING;
    if (grpc_call_start_batch(s->call, &op, 1, s, NULL) != GRPC_CALL_OK) {
        release(s);
        if (!__atomic_load_n(&s->srv->stopping, __ATOMIC_ACQUIRE))
            arm(s);
    }
}

/* The message's bytes, in one slice (gRPC decompresses). */
static grpc_slice message_bytes(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    grpc_slice all;

    if (!bb || !grpc_byte_buffer_reader_init(&r, bb))
        return grpc_empty_slice();
    all = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    return all;
}

/* grpc.health.v1.HealthCheckRequest { string service = 1; }: "" and the
 * rate limit service are SERVING (1), any other name NOT_FOUND. */
static void health(const uint8_t *p, size_t n, rls_answer *a)
{
    static const char served[] = "envoy.service.ratelimit.v3.RateLimitService";
    size_t len = 0;

    *a = (rls_answer){.status = GRPC_STATUS_OK};
    if (n >= 2 && p[0] == 0x0a && p[1] < 0x80)
        len = p[1];
    if (n && (n < 2 || p[0] != 0x0a || p[1] >= 0x80 || len != n - 2 ||
              (len && (len != sizeof served - 1 ||
                       memcmp(p + 2, served, len))))) {
        a->status = GRPC_STATUS_NOT_FOUND;
        snprintf(a->message, sizeof a->message, "unknown service");
        return;
    }
    if ((a->out = malloc(2)))
        a->out[0] = 0x08, a->out[1] = 0x01, a->outlen = 2;
    else
        a->status = GRPC_STATUS_RESOURCE_EXHAUSTED;
}

static int64_t deadline_ms(const grpc_call_details *d)
{
    gpr_timespec now = gpr_now(GPR_CLOCK_MONOTONIC);
    gpr_timespec dl = gpr_convert_clock_type(d->deadline, GPR_CLOCK_MONOTONIC);
    int64_t left;

    if (gpr_time_cmp(dl, gpr_inf_future(GPR_CLOCK_MONOTONIC)) >= 0)
        return INT64_MAX;
    left = (int64_t)gpr_time_to_millis(gpr_time_sub(dl, now));
    return rls_now_ms() + left;
}

static void send_answer(slot *s)
{
    rls_answer *a = &s->a;
    grpc_op ops[4];
    size_t n = 0;

    if (a->status == GRPC_STATUS_OK && a->out) {
        grpc_slice sl = grpc_slice_from_copied_buffer((const char *)a->out,
                                                      a->outlen);
        s->out = grpc_raw_byte_buffer_create(&sl, 1);
        grpc_slice_unref(sl);
    }
    free(a->out);
    a->out = NULL;
    s->details_text = grpc_slice_from_copied_string(a->message);
    memset(ops, 0, sizeof ops);
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (s->out) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = s->out;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = (grpc_status_code)a->status;
    ops[n++].data.send_status_from_server.status_details =
        a->status == GRPC_STATUS_OK ? NULL : &s->details_text;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &s->cancelled;
    s->state = SLOT_ANSWERING;
    if (grpc_call_start_batch(s->call, ops, n, s, NULL) != GRPC_CALL_OK) {
        release(s);
        if (!__atomic_load_n(&s->srv->stopping, __ATOMIC_ACQUIRE))
            arm(s);
    }
}

/* A call whose checks were in flight, answered (from rl_async_process). */
static void answered_later(void *arg)
{
    slot *s = arg;

    s->w->waiting--;
    send_answer(s);
}

/* Start answering a call read: answered now, or once its checks are. */
static void start(worker *w, slot *s)
{
    grpc_slice m = s->details.method;
    grpc_slice body = message_bytes(s->in);
    const uint8_t *p = GRPC_SLICE_START_PTR(body);
    size_t n = GRPC_SLICE_LENGTH(body);
    int64_t dl = deadline_ms(&s->details);
    rls_answer *a = &s->a;
    int rls = grpc_slice_str_cmp(m, method_rls) == 0;

    s->w = w;
    *a = (rls_answer){.status = GRPC_STATUS_OK};
    if (!s->in) {
        a->status = GRPC_STATUS_INVALID_ARGUMENT;
        snprintf(a->message, sizeof a->message, "no request message");
    } else if (rls_now_ms() > dl) {
        a->status = GRPC_STATUS_DEADLINE_EXCEEDED;
        snprintf(a->message, sizeof a->message, "deadline passed");
    } else if (rls) {
        int later = rls_should_rate_limit(s->srv->svc, w->as, p, n, dl, a,
                                          answered_later, s);
        grpc_slice_unref(body);
        if (later)
            w->waiting++;
        else
            send_answer(s);
        return;
    } else if (grpc_slice_str_cmp(m, method_health) == 0) {
        health(p, n, a);
        __atomic_add_fetch(&s->srv->svc->counters.health, 1,
                           __ATOMIC_RELAXED);
    } else {
        a->status = GRPC_STATUS_UNIMPLEMENTED;
        snprintf(a->message, sizeof a->message, "unknown method");
    }
    if (rls) /* refused before the service saw it: counted all the same */
        rls_count_refusal(s->srv->svc, a->status);
    grpc_slice_unref(body);
    send_answer(s);
}

static void enqueue(rls_server *srv, slot *s)
{
    worker *w = &srv->workers[srv->next++ % (unsigned)srv->nworkers];
    uint64_t one = 1;

    pthread_mutex_lock(&w->mu);
    w->queue[(w->head + w->count++) % srv->nslots] = s;
    pthread_mutex_unlock(&w->mu);
    if (write(w->efd, &one, sizeof one) < 0) /* an eventfd: cannot fill */
        perror("ratelimit-envoy: eventfd");
}

static void on_event(rls_server *srv, slot *s, int ok)
{
    switch (s->state) {
    case SLOT_REQUESTED:
        if (!ok) { /* the server shuts down: no call came */
            grpc_call_details_destroy(&s->details);
            grpc_metadata_array_destroy(&s->md);
            return;
        }
        read_message(s);
        return;
    case SLOT_READING:
        enqueue(srv, s); /* a failed read: answered INVALID_ARGUMENT */
        return;
    default:
        release(s);
        if (!__atomic_load_n(&srv->stopping, __ATOMIC_ACQUIRE))
            arm(s);
    }
}

static void *poller(void *arg)
{
    rls_server *srv = arg;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(
            srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (ev.tag == &srv->shutdown_tag) {
            pthread_mutex_lock(&srv->mu);
            srv->done = 1;
            pthread_cond_broadcast(&srv->cv);
            pthread_mutex_unlock(&srv->mu);
            continue;
        }
        on_event(srv, ev.tag, ev.success);
    }
}

/* The next call of the queue, or NULL; *quit: told to stop. */
static slot *take(worker *w, int *quit)
{
    slot *s = NULL;

    pthread_mutex_lock(&w->mu);
    if (w->count) {
        s = w->queue[w->head];
        w->head = (w->head + 1) % w->srv->nslots;
        w->count--;
    }
    *quit = w->quit;
    pthread_mutex_unlock(&w->mu);
    return s;
}

/* Start the calls queued, run the checks' completions, wait for either;
 * leave once told to and no call is left. */
static void *worker_loop(void *arg)
{
    worker *w = arg;
    struct pollfd pf[2] = {{.fd = w->efd, .events = POLLIN},
                           {.fd = rl_async_fd(w->as), .events = POLLIN}};
    int quit = 0;

    for (;;) {
        slot *s;
        uint64_t x;
        while ((s = take(w, &quit)))
            start(w, s);
        rl_async_process(w->as);
        if (quit && !w->waiting)
            break;
        if (poll(pf, 2, -1) > 0 && (pf[0].revents & POLLIN) &&
            read(w->efd, &x, sizeof x) < 0)
            perror("ratelimit-envoy: eventfd");
    }
    rl_async_free(w->as);
    return NULL;
}

static char *read_pem(const char *path, char *err, size_t errlen)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    char *p = f ? calloc(1, PEM_MAX + 1) : NULL;
    size_t n = p ? fread(p, 1, PEM_MAX, f) : 0;

    if (f)
        fclose(f);
    if (!n) {
        snprintf(err, errlen, "%s: cannot read", path ? path : "(none)");
        free(p);
        return NULL;
    }
    return p;
}

static grpc_server_credentials *tls_creds(const rls_tls *t, char *err,
                                          size_t errlen)
{
    char *cert = read_pem(t->cert_file, err, errlen), *key = NULL,
         *ca = NULL;
    grpc_server_credentials *c = NULL;

    if (cert && (key = read_pem(t->key_file, err, errlen)) &&
        (!t->client_ca_file || (ca = read_pem(t->client_ca_file, err,
                                              errlen)))) {
        grpc_ssl_pem_key_cert_pair pair = {.private_key = key,
                                           .cert_chain = cert};
        c = grpc_ssl_server_credentials_create_ex(
            ca, &pair, 1,
            ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
        if (!c)
            snprintf(err, errlen, "TLS: the certificate or key is refused");
    }
    free(cert);
    free(key);
    free(ca);
    return c;
}

static int listen_all(rls_server *srv, const rls_listen *l, size_t nl,
                      const rls_tls *tls, char *err, size_t errlen)
{
    for (size_t i = 0; i < nl; i++) {
        grpc_server_credentials *c =
            l[i].tls ? tls_creds(tls, err, errlen)
                     : grpc_insecure_server_credentials_create();
        int port;
        if (!c)
            return -1;
        port = grpc_server_add_http2_port(srv->server, l[i].addr, c);
        grpc_server_credentials_release(c);
        if (!port)
            return snprintf(err, errlen, "cannot listen on %s", l[i].addr),
                   -1;
        /* the port, for a listener on port 0 (tests read it) */
        printf("listening on %s port %d%s\n", l[i].addr, port,
               l[i].tls ? " (TLS)" : "");
    }
    fflush(stdout);
    return 0;
}

static void free_workers(rls_server *srv)
{
    for (int i = 0; i < srv->nworkers; i++) {
        worker *w = &srv->workers[i];
        if (w->efd >= 0)
            close(w->efd);
        pthread_mutex_destroy(&w->mu);
        free(w->queue);
    }
}

/* Each worker's queue, eventfd and loop context (freed by its thread). */
static int make_workers(rls_server *srv, int threads, char *err,
                        size_t errlen)
{
    for (; srv->nworkers < threads; srv->nworkers++) {
        worker *w = &srv->workers[srv->nworkers];
        int rc;
        *w = (worker){.srv = srv, .efd = eventfd(0, EFD_CLOEXEC)};
        pthread_mutex_init(&w->mu, NULL);
        if (w->efd < 0 || !(w->queue = calloc(srv->nslots, sizeof *w->queue)))
            return snprintf(err, errlen, "out of memory"), -1;
        if ((rc = rl_async_new(srv->svc->lim, RLS_ASYNC_MAX, &w->as))) {
            snprintf(err, errlen, "loop context: %s", rl_strerror(rc));
            srv->nworkers++;
            return -1;
        }
    }
    return 0;
}

rls_server *rls_server_start(rls_service *svc, const rls_listen *l, size_t nl,
                             const rls_tls *tls, int threads, char *err,
                             size_t errlen)
{
    rls_server *srv = calloc(1, sizeof *srv);
    grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = RLS_MESSAGE_MAX}};
    grpc_channel_args ca = {.num_args = 1, .args = args};

    if (threads < 1 || threads > THREADS_MAX)
        threads = threads < 1 ? 1 : THREADS_MAX;
    if (!srv ||
        !(srv->slots = calloc((size_t)threads * SLOTS_PER,
                              sizeof *srv->slots))) {
        snprintf(err, errlen, "out of memory");
        free(srv);
        return NULL;
    }
    srv->svc = svc;
    srv->nslots = (size_t)threads * SLOTS_PER;
    if (make_workers(srv, threads, err, errlen)) {
        for (int i = 0; i < srv->nworkers; i++)
            if (srv->workers[i].as)
                rl_async_free(srv->workers[i].as);
        free_workers(srv);
        free(srv->slots);
        free(srv);
        return NULL;
    }
    grpc_init();
    pthread_mutex_init(&srv->mu, NULL);
    pthread_cond_init(&srv->cv, NULL);
    srv->cq = grpc_completion_queue_create_for_next(NULL);
    srv->server = grpc_server_create(&ca, NULL);
    grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
    if (listen_all(srv, l, nl, tls, err, errlen)) {
        grpc_server_destroy(srv->server);
        grpc_completion_queue_shutdown(srv->cq);
        while (grpc_completion_queue_next(srv->cq,
                                          gpr_inf_future(GPR_CLOCK_REALTIME),
                                          NULL).type != GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(srv->cq);
        for (int i = 0; i < srv->nworkers; i++)
            rl_async_free(srv->workers[i].as);
        free_workers(srv);
        free(srv->slots);
        free(srv);
        grpc_shutdown();
        return NULL;
    }
    grpc_server_start(srv->server);
    for (size_t i = 0; i < srv->nslots; i++) {
        srv->slots[i].srv = srv;
        arm(&srv->slots[i]);
    }
    for (int i = 0; i < srv->nworkers; i++)
        pthread_create(&srv->workers[i].thread, NULL, worker_loop,
                       &srv->workers[i]);
    pthread_create(&srv->poller, NULL, poller, srv);
    return srv;
}

/* 0 once the shutdown has completed, else ETIMEDOUT at `until`. */
static int wait_done(rls_server *srv, const struct timespec *until)
{
    int rc = 0;

    pthread_mutex_lock(&srv->mu);
    while (!srv->done && rc == 0)
        rc = until ? pthread_cond_timedwait(&srv->cv, &srv->mu, until)
                   : pthread_cond_wait(&srv->cv, &srv->mu);
    rc = srv->done ? 0 : rc;
    pthread_mutex_unlock(&srv->mu);
    return rc;
}

void rls_server_stop(rls_server *srv, int grace_ms)
{
    struct timespec until;

    __atomic_store_n(&srv->stopping, 1, __ATOMIC_RELEASE);
    grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->shutdown_tag);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += grace_ms / 1000;
    until.tv_nsec += (long)(grace_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    if (wait_done(srv, &until)) {
        grpc_server_cancel_all_calls(srv->server);
        wait_done(srv, NULL);
    }
    /* the workers first: a call they hold is answered (its batch ends on
     * the queue, which the poller still drains) before the queue stops */
    for (int i = 0; i < srv->nworkers; i++) {
        worker *w = &srv->workers[i];
        uint64_t one = 1;
        pthread_mutex_lock(&w->mu);
        w->quit = 1;
        pthread_mutex_unlock(&w->mu);
        if (write(w->efd, &one, sizeof one) < 0)
            perror("ratelimit-envoy: eventfd");
    }
    for (int i = 0; i < srv->nworkers; i++)
        pthread_join(srv->workers[i].thread, NULL);
    grpc_completion_queue_shutdown(srv->cq);
    pthread_join(srv->poller, NULL);
    grpc_server_destroy(srv->server);
    grpc_completion_queue_destroy(srv->cq);
    free_workers(srv);
    pthread_mutex_destroy(&srv->mu);
    pthread_cond_destroy(&srv->cv);
    free(srv->slots);
    free(srv);
    grpc_shutdown();
}
