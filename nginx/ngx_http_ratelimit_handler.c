/*
 * ngx_http_ratelimit_handler.c -- the rewrite-phase handler: describe
 * the request (endpoint, tier, cost, dimensions from the location's
 * complex values) as an rl_request, start its check, and either go on at
 * once (the answer was ready) or suspend the request's phases until the
 * completion resumes them (ngx_http_ratelimit_worker.c).  Then the
 * verdict: an admitted request goes on to the next handler; a rejected
 * one gets the configured status, its headers and the JSON body; a check
 * the library could not decide gets 400 (the request's values are out of
 * the library's bounds) or 503 (the store failed and no failure mode
 * decided, or the worker's checks in flight are at their maximum).
 *
 * The state lives in the request pool, owned by a pool cleanup: it is
 * found again after an internal redirect (a request is charged once) and
 * the cleanup detaches it from a check still in flight when the client
 * goes away.
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#include "ngx_http_ratelimit.h"

static void ngx_http_ratelimit_cleanup(void *data)
{
    ngx_http_ratelimit_detach(data);
}

ngx_http_ratelimit_state_t *ngx_http_ratelimit_state(ngx_http_request_t *r)
{
    for (ngx_pool_cleanup_t *c = r->pool->cleanup; c; c = c->next)
        if (c->handler == ngx_http_ratelimit_cleanup)
            return c->data;
    return NULL;
}

/* s as a NUL-terminated copy in the request pool. */
static const char *ngx_http_ratelimit_cstr(ngx_http_request_t *r,
                                           const ngx_str_t *s)
{
    u_char *p = ngx_pnalloc(r->pool, s->len + 1);

    if (p != NULL)
        *ngx_cpymem(p, s->data, s->len) = '\0';
    return (const char *)p;
}

/* A complex value as a NUL-terminated string in the request pool; an
 * empty one is NULL ("the request does not carry it"). */
static ngx_int_t ngx_http_ratelimit_eval(ngx_http_request_t *r,
                                         ngx_http_complex_value_t *cv,
                                         const char **out)
{
    ngx_str_t v;

    *out = NULL;
    if (cv == NULL)
        return NGX_OK;
    if (ngx_http_complex_value(r, cv, &v) != NGX_OK)
        return NGX_ERROR;
    if (v.len == 0)
        return NGX_OK;
    *out = ngx_http_ratelimit_cstr(r, &v);
    return *out ? NGX_OK : NGX_ERROR;
}

/* A dimension's value as a NUL-terminated string in the request pool, or
 * NULL when empty: a lone variable read by its index (as its complex
 * value would give it, without running the script), else the complex
 * value. */
static ngx_int_t ngx_http_ratelimit_dim_value(ngx_http_request_t *r,
                                              ngx_http_ratelimit_dim_t *d,
                                              const char **out)
{
    ngx_http_variable_value_t *vv;
    ngx_str_t v;

    if (d->var == NGX_ERROR)
        return ngx_http_ratelimit_eval(r, &d->value, out);
    *out = NULL;
    vv = ngx_http_get_indexed_variable(r, d->var);
    if (vv == NULL || vv->not_found || vv->len == 0)
        return NGX_OK;
    v.len = vv->len;
    v.data = vv->data;
    *out = ngx_http_ratelimit_cstr(r, &v);
    return *out ? NGX_OK : NGX_ERROR;
}

/* The dimensions: user, api_key and ip in their own fields, the others
 * in dims (room for RL_DIMS_MAX, as the directive's bound says). */
static ngx_int_t ngx_http_ratelimit_dims(ngx_http_request_t *r,
                                         ngx_http_ratelimit_loc_conf_t *lcf,
                                         rl_request *req, rl_dim *dims)
{
    ngx_http_ratelimit_dim_t *d;
    const char *v;

    if (lcf->dims == NULL)
        return NGX_OK;
    d = lcf->dims->elts;
    for (ngx_uint_t i = 0; i < lcf->dims->nelts; i++) {
        if (ngx_http_ratelimit_dim_value(r, &d[i], &v) != NGX_OK)
            return NGX_ERROR;
        if (d[i].field == NGX_HTTP_RATELIMIT_DIM_USER)
            req->user = v;
        else if (d[i].field == NGX_HTTP_RATELIMIT_DIM_API_KEY)
            req->api_key = v;
        else if (d[i].field == NGX_HTTP_RATELIMIT_DIM_IP)
            req->ip = v;
        else if (req->ndims < RL_DIMS_MAX)
            dims[req->ndims++] = (rl_dim){.name = (char *)d[i].name.data,
                                          .value = v};
    }
    req->dims = dims;
    return NGX_OK;
}

/* The request as rl_check sees it: NGX_OK, NGX_DECLINED (a cost out of
 * bounds: the request is refused as the library would refuse it) or
 * NGX_ERROR. */
static ngx_int_t ngx_http_ratelimit_describe(ngx_http_request_t *r,
                                             ngx_http_ratelimit_loc_conf_t *lcf,
                                             rl_request *req, rl_dim *dims)
{
    const char *cost = NULL;
    ngx_int_t n = 1;

    if (lcf->endpoint == NULL) {
        req->endpoint = ngx_http_ratelimit_cstr(r, &r->uri);
        if (req->endpoint == NULL)
            return NGX_ERROR;
    } else if (ngx_http_ratelimit_eval(r, lcf->endpoint, &req->endpoint) != NGX_OK)
        return NGX_ERROR;
    /* Unset values not even evaluated: the usual location has neither. */
    if ((lcf->tier && ngx_http_ratelimit_eval(r, lcf->tier, &req->tier)
                          != NGX_OK) ||
        (lcf->cost && ngx_http_ratelimit_eval(r, lcf->cost, &cost) != NGX_OK) ||
        ngx_http_ratelimit_dims(r, lcf, req, dims) != NGX_OK)
        return NGX_ERROR;
    if (cost != NULL)
        n = ngx_atoi((u_char *)cost, ngx_strlen(cost));
    if (n == NGX_ERROR || n > RL_COST_MAX) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "ratelimit: cost \"%s\" is not an integer from 0 to %L",
                      cost, (int64_t)RL_COST_MAX);
        return NGX_DECLINED;
    }
    req->cost = n;
    return NGX_OK;
}

/* The status of a check the library could not decide. */
static ngx_int_t ngx_http_ratelimit_status_of(int rc)
{
    if (rc == RL_EINVAL)
        return NGX_HTTP_BAD_REQUEST;
    if (rc == RL_ESTORE || rc == RL_EBUSY)
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    return NGX_HTTP_INTERNAL_SERVER_ERROR;
}

/* The verdict of a decided check. */
static ngx_int_t ngx_http_ratelimit_verdict(ngx_http_request_t *r,
                                            ngx_http_ratelimit_state_t *st)
{
    if (st->rc == RL_OK && st->res.allowed)
        return NGX_DECLINED;
    if (st->rc == RL_OK) {
        ngx_http_finalize_request(r, ngx_http_ratelimit_reject(r, st));
        return NGX_DONE;
    }
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "ratelimit: check failed: %s", rl_strerror(st->rc));
    return ngx_http_ratelimit_status_of(st->rc);
}

/* Start the check of a request seen for the first time. */
static ngx_int_t ngx_http_ratelimit_begin(ngx_http_request_t *r,
                                          ngx_http_ratelimit_loc_conf_t *lcf)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_ratelimit_state_t *st;
    ngx_pool_cleanup_t *cln;
    rl_request req = RL_REQUEST_INIT;
    rl_dim dims[RL_DIMS_MAX];
    ngx_int_t rc;

    cln = ngx_pool_cleanup_add(r->pool, sizeof(*st));
    if (cln == NULL)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    st = cln->data;
    /* The result and the events are the check's to write (see the
     * state's definition). */
    ngx_memzero(st, offsetof(ngx_http_ratelimit_state_t, res));
    st->r = r;
    cln->handler = ngx_http_ratelimit_cleanup;
    rc = ngx_http_ratelimit_describe(r, lcf, &req, dims);
    if (rc == NGX_ERROR)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (rc == NGX_DECLINED) {
        st->rc = RL_EINVAL;
        st->phase = NGX_HTTP_RATELIMIT_DONE;
        return NGX_HTTP_BAD_REQUEST;
    }
    mcf = ngx_http_get_module_main_conf(r, ngx_http_ratelimit_module);
    st->rc = ngx_http_ratelimit_start(mcf, st, &req);
    if (st->rc != RL_OK) { /* refused before it started: say why */
        ngx_uint_t level = st->rc == RL_EINVAL ? NGX_LOG_INFO : NGX_LOG_ERR;

        st->phase = NGX_HTTP_RATELIMIT_DONE;
        if (st->rc == RL_EBUSY) { /* the jobs, not the library, ran out */
            ngx_log_error(level, r->connection->log, 0, "ratelimit: %ui "
                          "checks in flight (ratelimit_max_in_flight)",
                          mcf->max_in_flight);
        } else {
            ngx_log_error(level, r->connection->log, 0, "ratelimit: %s",
                          rl_errmsg(mcf->lim));
        }
        return ngx_http_ratelimit_status_of(st->rc);
    }
    if (st->phase == NGX_HTTP_RATELIMIT_DONE)
        return ngx_http_ratelimit_verdict(r, st);
    /* Suspended: a client that goes away ends the request (its pool
     * cleanup detaches the check); nothing else runs its phases. */
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_request_empty_handler;
    return NGX_DONE;
}

ngx_int_t ngx_http_ratelimit_handler(ngx_http_request_t *r)
{
    ngx_http_ratelimit_loc_conf_t *lcf;
    ngx_http_ratelimit_state_t *st;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_ratelimit_module);
    if (!lcf->enable || r != r->main)
        return NGX_DECLINED;
    st = ngx_http_ratelimit_state(r);
    if (st == NULL)
        return ngx_http_ratelimit_begin(r, lcf);
    if (st->phase == NGX_HTTP_RATELIMIT_PENDING)
        return NGX_DONE;
    return ngx_http_ratelimit_verdict(r, st);
}
