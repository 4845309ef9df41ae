/*
 * ngx_http_ratelimit_metrics.c -- the ratelimit_metrics directive: a
 * location whose content is the Prometheus text (rl_metrics_write(3),
 * text format 0.0.4) of the limiter of the worker that serves the
 * request: its rules' counters, its store's shards (ratelimit_store_up,
 * ratelimit_store_state, the breakers), its check latency.  Each worker
 * has its own limiter, so a scrape sees one worker's counts; the label
 * worker="<pid>" is not added by the library, so a scraper that needs
 * all workers' counts scrapes until it has seen each (or uses the store's
 * shared state, which a shm:// store already shares).
 *
 * Only GET and HEAD; the text is built into the request's pool, in
 * buffers of NGX_HTTP_RATELIMIT_METRICS_CHUNK bytes, and sent as one
 * chain.  No limiter (ratelimit off in every location and no
 * ratelimit_metrics either cannot happen: the directive turns the worker's
 * limiter on) or an error writing: 503 / 500.
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#include "ngx_http_ratelimit.h"

#define NGX_HTTP_RATELIMIT_METRICS_CHUNK 16384

/* The chain being built: rl_metrics_write_cb's function appends here. */
typedef struct {
    ngx_http_request_t *r;
    ngx_chain_t *first, *last;
    size_t total;
} ngx_http_ratelimit_text_t;

static int ngx_http_ratelimit_append(void *arg, const char *p, size_t n)
{
    ngx_http_ratelimit_text_t *t = arg;
    ngx_buf_t *b;
    ngx_chain_t *cl;
    size_t room;

    while (n > 0) {
        b = t->last ? t->last->buf : NULL;
        if (b == NULL || b->last == b->end) {
            b = ngx_create_temp_buf(t->r->pool,
                                    NGX_HTTP_RATELIMIT_METRICS_CHUNK);
            cl = ngx_alloc_chain_link(t->r->pool);
            if (b == NULL || cl == NULL)
                return -1;
            cl->buf = b;
            cl->next = NULL;
            if (t->last)
                t->last->next = cl;
            else
                t->first = cl;
            t->last = cl;
        }
        room = (size_t)(b->end - b->last);
        if (room > n)
            room = n;
        b->last = ngx_cpymem(b->last, p, room);
        p += room;
        n -= room;
        t->total += room;
    }
    return 0;
}

static ngx_int_t ngx_http_ratelimit_metrics_handler(ngx_http_request_t *r)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    ngx_http_ratelimit_text_t t = {.r = r};
    ngx_int_t rc;

    if (!(r->method & (NGX_HTTP_GET | NGX_HTTP_HEAD)))
        return NGX_HTTP_NOT_ALLOWED;
    if ((rc = ngx_http_discard_request_body(r)) != NGX_OK)
        return rc;
    mcf = ngx_http_get_module_main_conf(r, ngx_http_ratelimit_module);
    if (mcf->lim == NULL)
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    if (rl_metrics_write_cb(mcf->lim, ngx_http_ratelimit_append, &t) != RL_OK)
    {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "ratelimit_metrics: %s", rl_errmsg(mcf->lim));
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = (off_t)t.total;
    ngx_str_set(&r->headers_out.content_type,
                "text/plain; version=0.0.4; charset=utf-8");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only || t.first == NULL)
        return rc;
    t.last->buf->last_buf = 1;
    t.last->buf->last_in_chain = 1;
    return ngx_http_output_filter(r, t.first);
}

char *ngx_http_ratelimit_metrics(ngx_conf_t *cf, ngx_command_t *cmd,
                                 void *conf)
{
    ngx_http_core_loc_conf_t *clcf;
    ngx_http_ratelimit_main_conf_t *mcf;

    (void)cmd;
    (void)conf;
    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_ratelimit_metrics_handler;
    mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_ratelimit_module);
    mcf->used = 1; /* the worker makes its limiter for this location too */
    return NGX_CONF_OK;
}
