/*
 * ngx_http_ratelimit.h -- what the nginx module's files share: its
 * configuration (the http block's limiter settings, each location's
 * request description), the per-request state, and the worker's async
 * context.
 *
 * The module is split by concern: ngx_http_ratelimit_module.c (the module
 * table, the directives and the phase/filter registration),
 * ngx_http_ratelimit_conf.c (directive parsers and the check `nginx -t`
 * runs on the limiter settings), ngx_http_ratelimit_worker.c (one limiter
 * and one rl_async per worker, its descriptor in nginx's event loop),
 * ngx_http_ratelimit_handler.c (the rewrite-phase handler: start a check,
 * suspend, resume) and ngx_http_ratelimit_response.c (the headers on every
 * response and the rejection).
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#ifndef NGX_HTTP_RATELIMIT_H
#define NGX_HTTP_RATELIMIT_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <ratelimit.h>

/* The store a limiter uses when no ratelimit_store is given: one constant,
 * changed here only.  A shared-memory region the workers of this host
 * share (one limit for all of them, ratelimit(3)), made by the first
 * worker (as the workers' user), removed when the master exits. */
#define NGX_HTTP_RATELIMIT_SHM_SCHEME "shm://"
#define NGX_HTTP_RATELIMIT_STORE_DEFAULT NGX_HTTP_RATELIMIT_SHM_SCHEME "nginx-ratelimit"
#define NGX_HTTP_RATELIMIT_SHM_NAME_MAX 64 /* the library's bound on NAME */

/* ratelimit_status bounds and default. */
#define NGX_HTTP_RATELIMIT_STATUS_MIN 400
#define NGX_HTTP_RATELIMIT_STATUS_MAX 599
#define NGX_HTTP_RATELIMIT_STATUS_DEFAULT 429

/* ratelimit_headers: which responses carry the library's headers
 * (ngx_http_ratelimit_loc_conf_t.headers).  ON: every response of a
 * checked request (X-RateLimit-*, the IETF pair when asked, Retry-After
 * on a rejection); DENIED: those of a rejection only; OFF: none but a
 * rejection's Retry-After. */
#define NGX_HTTP_RATELIMIT_HEADERS_OFF 0
#define NGX_HTTP_RATELIMIT_HEADERS_DENIED 1
#define NGX_HTTP_RATELIMIT_HEADERS_ON 2
#define NGX_HTTP_RATELIMIT_HEADERS_DEFAULT NGX_HTTP_RATELIMIT_HEADERS_ON

/* ratelimit_unavailable_status: the answer when a rule fails closed
 * because the store is away (RL_FLAG_FAIL_CLOSED), not a limit reached;
 * the same bounds as ratelimit_status. */
#define NGX_HTTP_RATELIMIT_UNAVAILABLE_DEFAULT 503

/* A worker logs at most one "store unavailable" line to error.log per
 * this many ms; the answers in between are counted into the next line. */
#define NGX_HTTP_RATELIMIT_UNAVAILABLE_LOG_MS 1000

/* ratelimit_max_in_flight: checks one worker has in flight at once (the
 * library's bound on rl_async_new). */
#define NGX_HTTP_RATELIMIT_IN_FLIGHT_MAX 65536
#define NGX_HTTP_RATELIMIT_IN_FLIGHT_DEFAULT 1024

/* A check in flight holds a timer this long (the library's longest
 * timeout_ms, by which every check completes), so a worker told to quit
 * gracefully waits for its checks instead of dropping their requests. */
#define NGX_HTTP_RATELIMIT_GUARD_MS 60000

/* The request's per-check state (ngx_http_ratelimit_state_t.phase). */
#define NGX_HTTP_RATELIMIT_NONE 0
#define NGX_HTTP_RATELIMIT_PENDING 1
#define NGX_HTTP_RATELIMIT_DONE 2

/* Where a dimension goes in the rl_request (ngx_http_ratelimit_dim_t.field):
 * user, api_key and ip are its own fields, any other name goes in dims. */
#define NGX_HTTP_RATELIMIT_DIM_OTHER 0
#define NGX_HTTP_RATELIMIT_DIM_USER 1
#define NGX_HTTP_RATELIMIT_DIM_API_KEY 2
#define NGX_HTTP_RATELIMIT_DIM_IP 3

/* One ratelimit_dimension: a name and the complex value giving it.  A
 * value that is one variable alone ("$remote_addr") is also read by its
 * index, without running the complex value's script. */
typedef struct {
    ngx_str_t name;                   /* NUL-terminated                 */
    ngx_http_complex_value_t value;
    ngx_int_t var;                    /* the variable's index, or NGX_ERROR */
    ngx_uint_t field;                 /* NGX_HTTP_RATELIMIT_DIM_*       */
} ngx_http_ratelimit_dim_t;

typedef struct ngx_http_ratelimit_job_s ngx_http_ratelimit_job_t;

/* The http block's settings, and the worker's limiter made from them. */
typedef struct {
    ngx_str_t store;                  /* URI, NUL-terminated           */
    ngx_str_t rules_file;             /* path, or empty                */
    ngx_str_t rules_source;           /* URI, or empty                 */
    ngx_str_t rules_text;             /* rules_file as the master read it */
    ngx_array_t *options;             /* ngx_keyval_t, NUL-terminated   */
    ngx_uint_t max_in_flight;
    ngx_flag_t used;                  /* some location has ratelimit on */

    /* The worker's (ngx_http_ratelimit_worker.c). */
    rl_limiter *lim;
    rl_async *async;
    ngx_connection_t *conn;           /* rl_async_fd in the event loop  */
    ngx_http_ratelimit_job_t *jobs;   /* max_in_flight of them          */
    ngx_http_ratelimit_job_t *free;
} ngx_http_ratelimit_main_conf_t;

/* A location's description of its requests. */
typedef struct {
    ngx_flag_t enable;
    ngx_array_t *dims;                /* ngx_http_ratelimit_dim_t        */
    ngx_http_complex_value_t *endpoint; /* NULL: $uri                    */
    ngx_http_complex_value_t *tier;   /* NULL: none                      */
    ngx_http_complex_value_t *cost;   /* NULL: 1                         */
    ngx_flag_t ietf;
    ngx_uint_t headers;               /* NGX_HTTP_RATELIMIT_HEADERS_*    */
    ngx_uint_t status;
    ngx_uint_t unavailable_status;    /* fail closed: the store away     */
} ngx_http_ratelimit_loc_conf_t;

/*
 * A request's check, in the request's pool (found again through the pool
 * cleanup that owns it, so an internal redirect does not charge twice).
 * While a check is in flight, job points at the worker's job and the job
 * back at this state; the pool cleanup cuts both ways, so a completion
 * for a request already gone touches nothing of it.
 */
typedef struct {
    ngx_uint_t phase;                 /* NGX_HTTP_RATELIMIT_*            */
    int rc;                           /* the check's RL_OK or RL_E*      */
    ngx_uint_t armed;                 /* resume and guard set up         */
    ngx_http_request_t *r;
    ngx_http_ratelimit_job_t *job;
    /* From here on not zeroed with the rest: res is written whole by the
     * check (copied from the job's, at once or by the completion) and
     * read only when rc is RL_OK;
     * the events are set up only for a check that waits (armed). */
    rl_result res;
    ngx_event_t resume;               /* posted by the completion        */
    ngx_event_t guard;                /* timer while in flight           */
} ngx_http_ratelimit_state_t;

/* A check in flight: the worker's memory, since the library writes the
 * result and calls back even after the request is gone. */
struct ngx_http_ratelimit_job_s {
    rl_async_check chk;
    rl_result res;
    ngx_http_ratelimit_state_t *st;   /* NULL once the request is gone  */
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_ratelimit_job_t *next;   /* free list                       */
};

extern ngx_module_t ngx_http_ratelimit_module;

/* ngx_http_ratelimit_conf.c: directive parsers. */
char *ngx_http_ratelimit_store(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_ratelimit_rules(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_ratelimit_option(ngx_conf_t *cf, ngx_command_t *cmd,
                                void *conf);
char *ngx_http_ratelimit_dimension(ngx_conf_t *cf, ngx_command_t *cmd,
                                   void *conf);
char *ngx_http_ratelimit_cost(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* Build an rl_config from mcf (store and rules as given); NULL with a
 * message logged on cf's log or log. */
rl_config *ngx_http_ratelimit_config(ngx_http_ratelimit_main_conf_t *mcf,
                                     ngx_log_t *log);
/* `nginx -t`'s check: the settings make a limiter (rules parsed, store
 * URI understood); NGX_CONF_OK or NGX_CONF_ERROR after logging why. */
char *ngx_http_ratelimit_validate(ngx_conf_t *cf,
                                  ngx_http_ratelimit_main_conf_t *mcf);

/* ngx_http_ratelimit_worker.c */
ngx_int_t ngx_http_ratelimit_init_process(ngx_cycle_t *cycle);
void ngx_http_ratelimit_exit_process(ngx_cycle_t *cycle);

/* ngx_http_ratelimit_shm.c */
/* After the http block is read (locations merged): NGX_ERROR, logged with
 * the reason, when the shm:// region of the store exists and the workers'
 * user cannot open it. */
ngx_int_t ngx_http_ratelimit_shm_check(ngx_conf_t *cf,
                                       ngx_http_ratelimit_main_conf_t *mcf);
/* A configuration is in force: its shm:// region joins those the master
 * removes at its exit. */
ngx_int_t ngx_http_ratelimit_init_module(ngx_cycle_t *cycle);
/* The master exits: every shm:// region its workers used is removed (its
 * limits end with this nginx; a reload keeps them). */
void ngx_http_ratelimit_exit_master(ngx_cycle_t *cycle);
/* Start st's check of req: RL_OK (the state is PENDING or, when the
 * answer came at once, DONE), the library's refusal code, or the error of
 * a check decided at once. */
int ngx_http_ratelimit_start(ngx_http_ratelimit_main_conf_t *mcf,
                             ngx_http_ratelimit_state_t *st,
                             const rl_request *req);
/* The request's pool is going: detach st from its job. */
void ngx_http_ratelimit_detach(ngx_http_ratelimit_state_t *st);

/* ngx_http_ratelimit_handler.c */
ngx_int_t ngx_http_ratelimit_handler(ngx_http_request_t *r);
ngx_http_ratelimit_state_t *ngx_http_ratelimit_state(ngx_http_request_t *r);

/* ngx_http_ratelimit_metrics.c: the ratelimit_metrics directive (a
 * location answering with the worker's limiter's Prometheus text). */
char *ngx_http_ratelimit_metrics(ngx_conf_t *cf, ngx_command_t *cmd,
                                 void *conf);

/* ngx_http_ratelimit_response.c */
ngx_int_t ngx_http_ratelimit_filter_init(ngx_conf_t *cf);
/* The answer to a request the check rejected or could not decide. */
ngx_int_t ngx_http_ratelimit_reject(ngx_http_request_t *r,
                                    ngx_http_ratelimit_state_t *st);

#endif
