/*
 * ngx_http_ratelimit_handler.c -- the rewrite-phase handler: describe
 * the request (endpoint, tier, cost, dimensions from the location's
 * complex values) as an rl_request (its strings counted where nginx
 * holds them, no copies, but for dims of other names), start its check,
 * and either go on at once (the answer was ready) or suspend the
 * request's phases until the completion resumes them (ngx_http_ratelimit_worker.c).  Then the
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

/* A dimension's value where it lies (no copy), len 0 when the request
 * has none: a lone variable read by its index (as its complex value would
 * give it, without running the script), else the complex value. */
static ngx_int_t ngx_http_ratelimit_dim_value(ngx_http_request_t *r,
                                              ngx_http_ratelimit_dim_t *d,
                                              ngx_str_t *v)
{
    ngx_http_variable_value_t *vv;

    v->len = 0;
    if (d->var == NGX_ERROR)
        return ngx_http_complex_value(r, &d->value, v);
    vv = ngx_http_get_indexed_variable(r, d->var);
    if (vv == NULL || vv->not_found)
        return NGX_OK;
    v->len = vv->len;
    v->data = vv->data;
    return NGX_OK;
}

/* A counted string for the library: its bytes and length where they lie
 * (rl_request's lengths), NULL when empty. */
static void ngx_http_ratelimit_counted(const ngx_str_t *v, const char **s,
                                       size_t *len)
{
    *s = v->len ? (const char *)v->data : NULL;
    *len = v->len;
}

/* The dimensions: user, api_key and ip in their own fields, counted (no
 * copy), the others in dims as NUL-terminated copies (room for
 * RL_DIMS_MAX, as the directive's bound says). */
static ngx_int_t ngx_http_ratelimit_dims(ngx_http_request_t *r,
                                         ngx_http_ratelimit_loc_conf_t *lcf,
                                         rl_request *req, rl_dim *dims)
{
    ngx_http_ratelimit_dim_t *d;
    ngx_str_t v;

    if (lcf->dims == NULL)
        return NGX_OK;
    d = lcf->dims->elts;
    for (ngx_uint_t i = 0; i < lcf->dims->nelts; i++) {
        if (ngx_http_ratelimit_dim_value(r, &d[i], &v) != NGX_OK)
            return NGX_ERROR;
        if (d[i].field == NGX_HTTP_RATELIMIT_DIM_USER) {
            ngx_http_ratelimit_counted(&v, &req->user, &req->user_len);
        } else if (d[i].field == NGX_HTTP_RATELIMIT_DIM_API_KEY) {
            ngx_http_ratelimit_counted(&v, &req->api_key, &req->api_key_len);
        } else if (d[i].field == NGX_HTTP_RATELIMIT_DIM_IP) {
            ngx_http_ratelimit_counted(&v, &req->ip, &req->ip_len);
        } else if (req->ndims < RL_DIMS_MAX) {
            const char *c = NULL;

            if (v.len && (c = ngx_http_ratelimit_cstr(r, &v)) == NULL)
                return NGX_ERROR;
            dims[req->ndims++] = (rl_dim){.name = (char *)d[i].name.data,
                                          .value = c};
        }
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
    ngx_str_t v, cost = ngx_null_string;
    ngx_int_t n = 1;

    if (lcf->endpoint == NULL) {
        ngx_http_ratelimit_counted(&r->uri, &req->endpoint,
                                   &req->endpoint_len);
    } else if (ngx_http_complex_value(r, lcf->endpoint, &v) != NGX_OK) {
        return NGX_ERROR;
    } else {
        ngx_http_ratelimit_counted(&v, &req->endpoint, &req->endpoint_len);
    }
    /* Unset values not even evaluated: the usual location has neither. */
    if (lcf->tier) {
        if (ngx_http_complex_value(r, lcf->tier, &v) != NGX_OK)
            return NGX_ERROR;
        ngx_http_ratelimit_counted(&v, &req->tier, &req->tier_len);
    }
    if ((lcf->cost && ngx_http_complex_value(r, lcf->cost, &cost) != NGX_OK)
        || ngx_http_ratelimit_dims(r, lcf, req, dims) != NGX_OK)
        return NGX_ERROR;
    if (cost.len != 0)
        n = ngx_atoi(cost.data, cost.len);
    if (n == NGX_ERROR || n > RL_COST_MAX) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "ratelimit: cost \"%V\" is not an integer from 0 to %L",
                      &cost, (int64_t)RL_COST_MAX);
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
