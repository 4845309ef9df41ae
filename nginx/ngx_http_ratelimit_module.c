/*
 * ngx_http_ratelimit_module.c -- the nginx module's table: its directives
 * (ngx_http_ratelimit_module(8) describes each), its configuration's
 * creation and merging, and its place in the request: a handler at the
 * head of the location's rewrite phase and a header filter.  The rewrite
 * phase, not limit_req's preaccess one: `return` and `rewrite` end or
 * move a request in that phase, and a location that answers with
 * `return` must be limited too.  A phase runs its handlers in the reverse
 * of their registration, and a dynamic module registers after the
 * rewrite module, so the check comes before the location's rewrite
 * directives (a dimension's value comes from a variable or a map, not
 * from a `set` of that location).  The parsers live in ngx_http_ratelimit_conf.c, the
 * worker's limiter in ngx_http_ratelimit_worker.c, the shm:// region's
 * checks and removal in ngx_http_ratelimit_shm.c.
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#include "ngx_http_ratelimit.h"

static void *ngx_http_ratelimit_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_ratelimit_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_ratelimit_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_ratelimit_merge_loc_conf(ngx_conf_t *cf, void *parent,
                                               void *child);
static ngx_int_t ngx_http_ratelimit_init(ngx_conf_t *cf);

static ngx_conf_num_bounds_t ngx_http_ratelimit_status_bounds = {
    ngx_conf_check_num_bounds, NGX_HTTP_RATELIMIT_STATUS_MIN,
    NGX_HTTP_RATELIMIT_STATUS_MAX
};

static ngx_conf_num_bounds_t ngx_http_ratelimit_in_flight_bounds = {
    ngx_conf_check_num_bounds, 1, NGX_HTTP_RATELIMIT_IN_FLIGHT_MAX
};

static ngx_conf_enum_t ngx_http_ratelimit_headers_modes[] = {
    { ngx_string("on"), NGX_HTTP_RATELIMIT_HEADERS_ON },
    { ngx_string("denied"), NGX_HTTP_RATELIMIT_HEADERS_DENIED },
    { ngx_string("off"), NGX_HTTP_RATELIMIT_HEADERS_OFF },
    { ngx_null_string, 0 }
};

#define LOC_CONF (NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF)
#define LOC_OFF(f) offsetof(ngx_http_ratelimit_loc_conf_t, f)

static ngx_command_t ngx_http_ratelimit_commands[] = {
    { ngx_string("ratelimit_store"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1,
      ngx_http_ratelimit_store, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_rules"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE12,
      ngx_http_ratelimit_rules, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_option"), NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE2,
      ngx_http_ratelimit_option, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_max_in_flight"),
      NGX_HTTP_MAIN_CONF | NGX_CONF_TAKE1, ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_ratelimit_main_conf_t, max_in_flight),
      &ngx_http_ratelimit_in_flight_bounds },
    { ngx_string("ratelimit"), LOC_CONF | NGX_CONF_FLAG,
      ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET, LOC_OFF(enable),
      NULL },
    { ngx_string("ratelimit_dimension"), LOC_CONF | NGX_CONF_TAKE2,
      ngx_http_ratelimit_dimension, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("ratelimit_endpoint"), LOC_CONF | NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot, NGX_HTTP_LOC_CONF_OFFSET,
      LOC_OFF(endpoint), NULL },
    { ngx_string("ratelimit_tier"), LOC_CONF | NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot, NGX_HTTP_LOC_CONF_OFFSET,
      LOC_OFF(tier), NULL },
    { ngx_string("ratelimit_cost"), LOC_CONF | NGX_CONF_TAKE1,
      ngx_http_ratelimit_cost, NGX_HTTP_LOC_CONF_OFFSET, LOC_OFF(cost),
      NULL },
    { ngx_string("ratelimit_ietf_headers"), LOC_CONF | NGX_CONF_FLAG,
      ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET, LOC_OFF(ietf), NULL },
    { ngx_string("ratelimit_headers"), LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot, NGX_HTTP_LOC_CONF_OFFSET, LOC_OFF(headers),
      &ngx_http_ratelimit_headers_modes },
    { ngx_string("ratelimit_status"), LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET, LOC_OFF(status),
      &ngx_http_ratelimit_status_bounds },
    { ngx_string("ratelimit_unavailable_status"), LOC_CONF | NGX_CONF_TAKE1,
      ngx_conf_set_num_slot, NGX_HTTP_LOC_CONF_OFFSET,
      LOC_OFF(unavailable_status), &ngx_http_ratelimit_status_bounds },
    { ngx_string("ratelimit_metrics"), NGX_HTTP_LOC_CONF | NGX_CONF_NOARGS,
      ngx_http_ratelimit_metrics, 0, 0, NULL },
    ngx_null_command
};

static ngx_http_module_t ngx_http_ratelimit_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_ratelimit_init,               /* postconfiguration */
    ngx_http_ratelimit_create_main_conf,
    ngx_http_ratelimit_init_main_conf,
    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */
    ngx_http_ratelimit_create_loc_conf,
    ngx_http_ratelimit_merge_loc_conf
};

ngx_module_t ngx_http_ratelimit_module = {
    NGX_MODULE_V1,
    &ngx_http_ratelimit_module_ctx,
    ngx_http_ratelimit_commands,
    NGX_HTTP_MODULE,
    NULL,                                  /* init master */
    ngx_http_ratelimit_init_module,
    ngx_http_ratelimit_init_process,
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_ratelimit_exit_process,
    ngx_http_ratelimit_exit_master,
    NGX_MODULE_V1_PADDING
};

static void *ngx_http_ratelimit_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_ratelimit_main_conf_t *mcf;

    mcf = ngx_pcalloc(cf->pool, sizeof(*mcf));
    if (mcf == NULL)
        return NULL;
    mcf->max_in_flight = NGX_CONF_UNSET_UINT;
    mcf->options = ngx_array_create(cf->pool, 4, sizeof(ngx_keyval_t));
    return mcf->options ? mcf : NULL;
}

/* Defaults, and the check `nginx -t` runs, once the http block is read
 * (before the locations are merged: `used` is only known later, so the
 * settings are checked whether or not a location uses them). */
static char *ngx_http_ratelimit_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;

    if (mcf->store.data == NULL) {
        ngx_str_set(&mcf->store, NGX_HTTP_RATELIMIT_STORE_DEFAULT);
    }
    ngx_conf_init_uint_value(mcf->max_in_flight,
                             NGX_HTTP_RATELIMIT_IN_FLIGHT_DEFAULT);
    return ngx_http_ratelimit_validate(cf, mcf);
}

static void *ngx_http_ratelimit_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_ratelimit_loc_conf_t *lcf;

    lcf = ngx_pcalloc(cf->pool, sizeof(*lcf));
    if (lcf == NULL)
        return NULL;
    lcf->enable = NGX_CONF_UNSET;
    lcf->ietf = NGX_CONF_UNSET;
    lcf->headers = NGX_CONF_UNSET_UINT;
    lcf->status = NGX_CONF_UNSET_UINT;
    lcf->unavailable_status = NGX_CONF_UNSET_UINT;
    lcf->dims = NGX_CONF_UNSET_PTR;
    lcf->endpoint = NGX_CONF_UNSET_PTR;
    lcf->tier = NGX_CONF_UNSET_PTR;
    lcf->cost = NGX_CONF_UNSET_PTR;
    return lcf;
}

/* A location inherits each setting it does not give; the dimensions as a
 * whole (a location that names one names them all, as proxy_set_header). */
static char *ngx_http_ratelimit_merge_loc_conf(ngx_conf_t *cf, void *parent,
                                               void *child)
{
    ngx_http_ratelimit_loc_conf_t *prev = parent, *conf = child;
    ngx_http_ratelimit_main_conf_t *mcf;

    ngx_conf_merge_value(conf->enable, prev->enable, 0);
    ngx_conf_merge_value(conf->ietf, prev->ietf, 0);
    ngx_conf_merge_uint_value(conf->headers, prev->headers,
                              NGX_HTTP_RATELIMIT_HEADERS_DEFAULT);
    ngx_conf_merge_uint_value(conf->status, prev->status,
                              NGX_HTTP_RATELIMIT_STATUS_DEFAULT);
    ngx_conf_merge_uint_value(conf->unavailable_status,
                              prev->unavailable_status,
                              NGX_HTTP_RATELIMIT_UNAVAILABLE_DEFAULT);
    ngx_conf_merge_ptr_value(conf->dims, prev->dims, NULL);
    ngx_conf_merge_ptr_value(conf->endpoint, prev->endpoint, NULL);
    ngx_conf_merge_ptr_value(conf->tier, prev->tier, NULL);
    ngx_conf_merge_ptr_value(conf->cost, prev->cost, NULL);
    if (conf->enable) {
        mcf = ngx_http_conf_get_module_main_conf(cf,
                                                 ngx_http_ratelimit_module);
        mcf->used = 1;
    }
    return NGX_CONF_OK;
}

static ngx_int_t ngx_http_ratelimit_init(ngx_conf_t *cf)
{
    ngx_http_core_main_conf_t *cmcf;
    ngx_http_handler_pt *h;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_REWRITE_PHASE].handlers);
    if (h == NULL)
        return NGX_ERROR;
    *h = ngx_http_ratelimit_handler;
    if (ngx_http_ratelimit_shm_check(cf, ngx_http_conf_get_module_main_conf(
                                             cf, ngx_http_ratelimit_module)) !=
        NGX_OK)
        return NGX_ERROR;
    return ngx_http_ratelimit_filter_init(cf);
}
