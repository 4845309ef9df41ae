/*
 * ngx_http_ratelimit_worker.c -- each worker's limiter and its checks in
 * flight, inside nginx's event loop.
 *
 * A worker makes one limiter and one rl_async (init_process, after the
 * fork) and watches rl_async_fd() as the read event of a connection of
 * its own: when it is readable, rl_async_process() runs the completions'
 * callbacks in the worker's thread.  A check in flight is a job of a
 * fixed pool (max_in_flight, the rl_async's bound): the library writes
 * the job's result and calls back even when the request is gone, so the
 * job is the worker's, never the request's.  The request's state and the
 * job point at each other; the request pool's cleanup
 * (ngx_http_ratelimit_detach) cuts the link, and a completion that finds
 * no state only returns its job to the pool.
 *
 * A completion never runs a request's phases from inside another
 * request's handler or from the descriptor's handler: it posts the
 * request's resume event, which nginx runs after this turn's I/O events.
 * Every check is started with RL_ASYNC_NOW: an answer the library has at
 * once (a store deciding in the worker's own process, memory:// or
 * shm://; on any store no rule matched or the deny cache) is
 * rl_check_start()'s own (RL_ASYNC_DONE), taken in the handler with the
 * job left free, no callback and no system call, and the request goes on
 * without suspending.  Which stores answer at once is the library's to
 * know, not the module's.  A check that waits holds a timer
 * (the guard), as nginx's own waits do, so a gracefully quitting worker
 * stays until its checks are answered.
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#include "ngx_http_ratelimit.h"

#include <pthread.h>
#include <signal.h>

static void ngx_http_ratelimit_done(rl_async_check *chk, int rc);

/* Run the request's phases again, from where the check suspended them. */
static void ngx_http_ratelimit_resume(ngx_event_t *ev)
{
    ngx_http_ratelimit_state_t *st = ev->data;
    ngx_http_request_t *r = st->r;
    ngx_connection_t *c = r->connection;

    ngx_http_set_log_request(c->log, r);
    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
    ngx_http_run_posted_requests(c);
}

/* The descriptor is readable: run the callbacks of the completed checks. */
static void ngx_http_ratelimit_ready(ngx_event_t *ev)
{
    ngx_connection_t *c = ev->data;
    ngx_http_ratelimit_main_conf_t *mcf = c->data;

    rl_async_process(mcf->async);
}

/* The guard's timer: never due before the check completes. */
static void ngx_http_ratelimit_guard(ngx_event_t *ev)
{
    ngx_log_error(NGX_LOG_ALERT, ev->log, 0,
                  "ratelimit: a check outlived the longest timeout");
}

static void ngx_http_ratelimit_done(rl_async_check *chk, int rc)
{
    ngx_http_ratelimit_job_t *job = chk->data;
    ngx_http_ratelimit_state_t *st = job->st;

    if (st != NULL) {
        if (st->guard.timer_set) {
            ngx_del_timer(&st->guard);
        }
        st->res = job->res;
        st->rc = rc;
        st->phase = NGX_HTTP_RATELIMIT_DONE;
        st->job = NULL;
        ngx_post_event(&st->resume, &ngx_posted_events);
    }
    job->st = NULL;
    job->next = job->mcf->free;
    job->mcf->free = job;
}

int ngx_http_ratelimit_start(ngx_http_ratelimit_main_conf_t *mcf,
                             ngx_http_ratelimit_state_t *st,
                             const rl_request *req)
{
    ngx_http_ratelimit_job_t *job = mcf->free;
    int rc;

    if (job == NULL)
        return RL_EBUSY;
    /* The job's check and result were set up with the pool (the library
     * changes neither their size nor their settings): nothing to redo. */
    rc = rl_check_start(mcf->async, req, &job->chk);
    if (rc == RL_ASYNC_DONE) { /* decided at once: the job stays free */
        st->res = job->res;
        st->phase = NGX_HTTP_RATELIMIT_DONE;
        return RL_OK;
    }
    if (rc != RL_OK)
        return rc;
    mcf->free = job->next;
    job->st = st;
    st->job = job;
    st->phase = NGX_HTTP_RATELIMIT_PENDING;
    ngx_memzero(&st->resume, sizeof(st->resume));
    ngx_memzero(&st->guard, sizeof(st->guard));
    st->armed = 1;
    st->resume.handler = ngx_http_ratelimit_resume;
    st->resume.data = st;
    st->resume.log = st->r->connection->log;
    st->guard.handler = ngx_http_ratelimit_guard;
    st->guard.data = st;
    st->guard.log = st->r->connection->log;
    ngx_add_timer(&st->guard, NGX_HTTP_RATELIMIT_GUARD_MS);
    return RL_OK;
}

void ngx_http_ratelimit_detach(ngx_http_ratelimit_state_t *st)
{
    if (st->job != NULL) {
        st->job->st = NULL;
        st->job = NULL;
    }
    if (!st->armed) /* the events were never set up: nothing to undo */
        return;
    if (st->resume.posted) {
        ngx_delete_posted_event(&st->resume);
    }
    if (st->guard.timer_set) {
        ngx_del_timer(&st->guard);
    }
}

/* The library's own reports (a rules source's takes and refusals, Redis
 * away at start) into the error log.  Called from its threads too: nginx
 * logs from its thread pool's threads the same way (one write(2) a line). */
static void ngx_http_ratelimit_log(void *arg, int level, const char *msg)
{
    ngx_uint_t l = level <= RL_LOG_ERROR  ? NGX_LOG_ERR
                   : level == RL_LOG_WARN ? NGX_LOG_WARN
                                          : NGX_LOG_INFO;

    ngx_log_error(l, (ngx_log_t *)arg, 0, "ratelimit: %s", msg);
}

/* The library's threads take no signal meant for the worker (nginx's
 * handlers only set flags its own thread must see interrupt epoll_wait):
 * they are created with every signal blocked. */
static int ngx_http_ratelimit_new_limiter(rl_limiter **lim, rl_config *cfg)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = rl_limiter_new(lim, cfg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* The jobs' pool, each job's check set up once for every check it will
 * carry, and the descriptor's connection. */
static ngx_int_t ngx_http_ratelimit_watch(ngx_cycle_t *cycle,
                                          ngx_http_ratelimit_main_conf_t *mcf)
{
    ngx_connection_t *c;

    mcf->jobs = ngx_pcalloc(cycle->pool,
                            mcf->max_in_flight * sizeof(*mcf->jobs));
    if (mcf->jobs == NULL)
        return NGX_ERROR;
    for (ngx_uint_t i = 0; i < mcf->max_in_flight; i++) {
        ngx_http_ratelimit_job_t *job = &mcf->jobs[i];

        job->chk = (rl_async_check)RL_ASYNC_CHECK_INIT;
        job->chk.cb = ngx_http_ratelimit_done;
        job->chk.data = job;
        job->chk.flags = RL_ASYNC_NOW; /* an answer at once: no wake-up */
        job->res = (rl_result)RL_RESULT_INIT;
        job->chk.result = &job->res;
        job->mcf = mcf;
        job->next = i + 1 < mcf->max_in_flight ? job + 1 : NULL;
    }
    mcf->free = mcf->jobs;
    c = ngx_get_connection(rl_async_fd(mcf->async), cycle->log);
    if (c == NULL)
        return NGX_ERROR;
    c->data = mcf;
    c->read->handler = ngx_http_ratelimit_ready;
    c->read->log = cycle->log;
    c->write->log = cycle->log;
    mcf->conn = c;
    return ngx_handle_read_event(c->read, 0);
}

ngx_int_t ngx_http_ratelimit_init_process(ngx_cycle_t *cycle)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    rl_config *cfg;
    int rc;

    mcf = ngx_http_cycle_get_module_main_conf(cycle,
                                              ngx_http_ratelimit_module);
    if (mcf == NULL || !mcf->used)
        return NGX_OK;
    cfg = ngx_http_ratelimit_config(mcf, cycle->log);
    if (cfg == NULL)
        return NGX_ERROR;
    rl_config_set_log(cfg, ngx_http_ratelimit_log, cycle->log);
    rc = ngx_http_ratelimit_new_limiter(&mcf->lim, cfg);
    rl_config_free(cfg);
    if (rc != RL_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "ratelimit: worker's limiter: %s", rl_errmsg(NULL));
        return NGX_ERROR;
    }
    if (rl_async_new(mcf->lim, mcf->max_in_flight, &mcf->async) != RL_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "ratelimit: %s",
                      rl_errmsg(mcf->lim));
        return NGX_ERROR;
    }
    if (ngx_http_ratelimit_watch(cycle, mcf) != NGX_OK) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "ratelimit: cannot watch the checks' descriptor");
        return NGX_ERROR;
    }
    return NGX_OK;
}

/* Checks still in flight are waited for by rl_async_free (each ends by
 * its deadline) and their callbacks not run. */
void ngx_http_ratelimit_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_ratelimit_main_conf_t *mcf;

    mcf = ngx_http_cycle_get_module_main_conf(cycle,
                                              ngx_http_ratelimit_module);
    if (mcf == NULL)
        return;
    if (mcf->conn != NULL) {
        if (mcf->conn->read->active)
            ngx_del_event(mcf->conn->read, NGX_READ_EVENT, NGX_CLOSE_EVENT);
        ngx_free_connection(mcf->conn);
        mcf->conn->fd = (ngx_socket_t)-1; /* the rl_async's to close */
        mcf->conn = NULL;
    }
    rl_async_free(mcf->async);
    mcf->async = NULL;
    rl_limiter_free(mcf->lim);
    mcf->lim = NULL;
}
