/*
 * ngx_http_ratelimit_response.c -- what a response says of its check.
 * A header filter adds the library's headers (rl_headers: X-RateLimit-*,
 * Retry-After on a denial, the IETF pair when ratelimit_ietf_headers is
 * on) to every response of a checked request, admitted, rejected or an
 * error page alike, as ratelimit_headers says (on: all of them; denied:
 * a rejection's only; off: none but a rejection's Retry-After); a
 * request no rule applied to (RL_FLAG_NO_RULE) gets none, having no
 * limit to tell.  A rejected request is answered here
 * with the location's status and the library's JSON body
 * (rl_body_format), as application/json: a limit reached with
 * ratelimit_status (429), a rule that failed closed because the store is
 * away (RL_FLAG_FAIL_CLOSED) with ratelimit_unavailable_status (503), so
 * an outage is never mistaken for limiting, and a line in error.log (at
 * most one per NGX_HTTP_RATELIMIT_UNAVAILABLE_LOG_MS per worker, the
 * answers in between counted into it).
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#include "ngx_http_ratelimit.h"

static ngx_http_output_header_filter_pt ngx_http_next_header_filter;

/* The names of rl_headers()'s headers in the order rl_headers(3) writes
 * them: the trio always, Retry-After on a rejection, then the IETF pair;
 * each output's name is taken from here by its place, its length known
 * (tests/nginx_module.py checks every name on admissions and rejections,
 * with and without the pair). */
static ngx_str_t ngx_http_ratelimit_names[] = {
    ngx_string("X-RateLimit-Limit"), ngx_string("X-RateLimit-Remaining"),
    ngx_string("X-RateLimit-Reset"), ngx_string("Retry-After"),
    ngx_string("RateLimit-Policy"), ngx_string("RateLimit")
};

#define NGX_HTTP_RATELIMIT_RETRY_AT 3 /* Retry-After's place */

/* One header onto the response, its name and value where they lie. */
static ngx_int_t ngx_http_ratelimit_add(ngx_http_request_t *r, u_char *name,
                                        size_t name_len, u_char *value,
                                        size_t value_len)
{
    ngx_table_elt_t *e = ngx_list_push(&r->headers_out.headers);

    if (e == NULL)
        return NGX_ERROR;
    e->hash = 1;
    e->key.len = name_len;
    e->key.data = name;
    e->value.len = value_len;
    e->value.data = value;
    e->lowcase_key = NULL;
#if (nginx_version >= 1023000)
    e->next = NULL;
#endif
    return NGX_OK;
}

/* ratelimit_headers off: a rejection's Retry-After alone, from the
 * result's retry_after (at least 1 on a rejection, ratelimit(3)); the
 * library formats nothing. */
static ngx_int_t ngx_http_ratelimit_retry_after(ngx_http_request_t *r,
                                                const rl_result *res)
{
    ngx_str_t *name =
        &ngx_http_ratelimit_names[NGX_HTTP_RATELIMIT_RETRY_AT];
    u_char *v = ngx_pnalloc(r->pool, NGX_INT64_LEN);

    if (v == NULL)
        return NGX_ERROR;
    return ngx_http_ratelimit_add(r, name->data, name->len, v,
                                  ngx_sprintf(v, "%L", res->retry_after) - v);
}

/* The response's rate-limit headers as ratelimit_headers asks: written
 * by rl_headers() into the request pool and listed where they lie (no
 * copy of a name or a value), or not asked of the library at all. */
static ngx_int_t ngx_http_ratelimit_header_filter(ngx_http_request_t *r)
{
    ngx_http_ratelimit_loc_conf_t *lcf;
    ngx_http_ratelimit_state_t *st;
    rl_header *h;
    int n;

    if (r != r->main)
        return ngx_http_next_header_filter(r);
    st = ngx_http_ratelimit_state(r);
    if (st == NULL || st->phase != NGX_HTTP_RATELIMIT_DONE ||
        st->rc != RL_OK || (st->res.flags & RL_FLAG_NO_RULE))
        return ngx_http_next_header_filter(r);
    lcf = ngx_http_get_module_loc_conf(r, ngx_http_ratelimit_module);
    if (st->res.allowed && lcf->headers != NGX_HTTP_RATELIMIT_HEADERS_ON)
        return ngx_http_next_header_filter(r);
    if (lcf->headers == NGX_HTTP_RATELIMIT_HEADERS_OFF)
        return ngx_http_ratelimit_retry_after(r, &st->res) == NGX_OK
                   ? ngx_http_next_header_filter(r) : NGX_ERROR;
    h = ngx_pnalloc(r->pool, RL_HEADERS_MAX * sizeof(*h));
    if (h == NULL)
        return NGX_ERROR;
    n = rl_headers(&st->res, lcf->ietf ? RL_HEADERS_IETF : 0, h,
                   RL_HEADERS_MAX);
    for (int i = 0; i < n; i++) {
        ngx_str_t *name = &ngx_http_ratelimit_names[
            i + (i >= NGX_HTTP_RATELIMIT_RETRY_AT && st->res.allowed)];

        if (ngx_http_ratelimit_add(r, name->data, name->len,
                                   (u_char *)h[i].value,
                                   ngx_strlen(h[i].value)) != NGX_OK)
            return NGX_ERROR;
    }
    return ngx_http_next_header_filter(r);
}

ngx_int_t ngx_http_ratelimit_filter_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_ratelimit_header_filter;
    return NGX_OK;
}

/* A rule failed closed, the store away: tell error.log, rate-limited. */
static void ngx_http_ratelimit_log_unavailable(ngx_http_request_t *r,
                                               const rl_result *res,
                                               ngx_uint_t status)
{
    static ngx_msec_t last;
    static ngx_uint_t since;
    ngx_msec_t now = ngx_current_msec;

    since++;
    if (last != 0 && now - last < NGX_HTTP_RATELIMIT_UNAVAILABLE_LOG_MS)
        return;
    ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                  "ratelimit: the store is unavailable: rule \"%s\" fails "
                  "closed, answered %ui (%ui such answers by this worker "
                  "since the last line)", res->rule_id, status, since);
    last = now ? now : 1;
    since = 0;
}

ngx_int_t ngx_http_ratelimit_reject(ngx_http_request_t *r,
                                    ngx_http_ratelimit_state_t *st)
{
    static ngx_str_t json = ngx_string("application/json");
    ngx_http_ratelimit_loc_conf_t *lcf;
    ngx_http_complex_value_t cv;
    u_char *body;
    int len;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_ratelimit_module);
    body = ngx_pnalloc(r->pool, RL_BODY_FORMAT_MAX);
    if (body == NULL)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    len = rl_body_format(&st->res, (char *)body, RL_BODY_FORMAT_MAX);
    if (len < 0)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    ngx_memzero(&cv, sizeof(cv));
    cv.value.data = body;
    cv.value.len = (size_t)len;
    if (st->res.flags & RL_FLAG_FAIL_CLOSED) {
        ngx_http_ratelimit_log_unavailable(r, &st->res,
                                           lcf->unavailable_status);
        return ngx_http_send_response(r, lcf->unavailable_status, &json,
                                      &cv);
    }
    return ngx_http_send_response(r, lcf->status, &json, &cv);
}
