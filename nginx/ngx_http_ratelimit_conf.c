/*
 * ngx_http_ratelimit_conf.c -- the directives' parsers and the check
 * `nginx -t` runs.  Every value the library takes is handed to it while
 * the configuration is read, so a bad one is refused at its line with the
 * library's own message (rl_errmsg): an option's name or value, the store
 * URI's scheme, the rules file that cannot be read or does not parse.
 * The check builds a limiter from the http block's settings in the master
 * and frees it at once (workers make their own, after the fork: a
 * limiter's threads do not survive one).
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#include "ngx_http_ratelimit.h"

/* Options given by their own directives, refused in ratelimit_option. */
static const char *const ngx_http_ratelimit_own[] = {
    "store", "rules", "rules_file", "rules_source", NULL
};

/* Set one option on cfg; the library's message logged on failure. */
static ngx_int_t ngx_http_ratelimit_set(rl_config *cfg, const char *name,
                                        const char *value, ngx_log_t *log)
{
    if (rl_config_set(cfg, name, value) == RL_OK)
        return NGX_OK;
    ngx_log_error(NGX_LOG_EMERG, log, 0, "ratelimit: %s", rl_errmsg(NULL));
    return NGX_ERROR;
}

/* A rules argument that names a rules source rather than a file. */
static ngx_flag_t ngx_http_ratelimit_is_source(const ngx_str_t *v)
{
    return ngx_strstr(v->data, "://") != NULL ||
           ngx_strncmp(v->data, "file:", 5) == 0 ||
           ngx_strcmp(v->data, "store") == 0;
}

char *ngx_http_ratelimit_store(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;

    if (mcf->store.data != NULL)
        return "is duplicate";
    if (value[1].len == 0)
        return "needs a store URI, e.g. memory:// or redis://HOST:PORT";
    mcf->store = value[1]; /* the parser NUL-terminates every word */
    return NGX_CONF_OK;
}

/* ratelimit_rules FILE | ratelimit_rules SOURCE [LAST_GOOD_FILE] */
char *ngx_http_ratelimit_rules(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_str_t file = ngx_null_string;

    if (mcf->rules_file.data != NULL || mcf->rules_source.data != NULL)
        return "is duplicate";
    if (ngx_http_ratelimit_is_source(&value[1])) {
        mcf->rules_source = value[1];
        if (cf->args->nelts == 3)
            file = value[2];
    } else if (cf->args->nelts == 3) {
        return "takes a second argument (the last good copy) only after a "
               "rules source URI";
    } else {
        file = value[1];
    }
    if (file.len == 0)
        return NGX_CONF_OK;
    /* relative to the configuration prefix; the result is NUL-terminated */
    if (ngx_conf_full_name(cf->cycle, &file, 1) != NGX_OK)
        return NGX_CONF_ERROR;
    mcf->rules_file = file;
    return NGX_CONF_OK;
}

char *ngx_http_ratelimit_option(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_main_conf_t *mcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_keyval_t *kv;
    rl_config *scratch;
    ngx_int_t rc;

    for (const char *const *own = ngx_http_ratelimit_own; *own; own++)
        if (ngx_strcmp(value[1].data, *own) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "option \"%V\" has its own directive "
                               "(ratelimit_store, ratelimit_rules)",
                               &value[1]);
            return NGX_CONF_ERROR;
        }
    scratch = rl_config_new();
    if (scratch == NULL)
        return NGX_CONF_ERROR;
    rc = rl_config_set(scratch, (char *)value[1].data, (char *)value[2].data);
    rl_config_free(scratch);
    if (rc != RL_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%s", rl_errmsg(NULL));
        return NGX_CONF_ERROR;
    }
    kv = ngx_array_push(mcf->options);
    if (kv == NULL)
        return NGX_CONF_ERROR;
    kv->key = value[1];
    kv->value = value[2];
    return NGX_CONF_OK;
}

/* A dimension's name as rl_dim's grammar has it. */
static ngx_flag_t ngx_http_ratelimit_dim_name_ok(const ngx_str_t *n)
{
    if (n->len == 0 || n->len > RL_DIM_NAME_MAX || n->data[0] < 'a' ||
        n->data[0] > 'z' || ngx_strcmp(n->data, "global") == 0)
        return 0;
    for (size_t i = 0; i < n->len; i++) {
        u_char c = n->data[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

/* The rl_request field a dimension's name goes to. */
static ngx_uint_t ngx_http_ratelimit_dim_field(const ngx_str_t *n)
{
    if (ngx_strcmp(n->data, "user") == 0)
        return NGX_HTTP_RATELIMIT_DIM_USER;
    if (ngx_strcmp(n->data, "api_key") == 0)
        return NGX_HTTP_RATELIMIT_DIM_API_KEY;
    if (ngx_strcmp(n->data, "ip") == 0)
        return NGX_HTTP_RATELIMIT_DIM_IP;
    return NGX_HTTP_RATELIMIT_DIM_OTHER;
}

/* The index of the variable v names when v is "$name" alone (read without
 * the complex value's script), else NGX_ERROR. */
static ngx_int_t ngx_http_ratelimit_lone_var(ngx_conf_t *cf,
                                             const ngx_str_t *v)
{
    ngx_str_t name = {.len = v->len - 1, .data = v->data + 1};

    if (v->len < 2 || v->data[0] != '$' ||
        (v->data[1] >= '0' && v->data[1] <= '9')) /* $1: a capture */
        return NGX_ERROR;
    for (size_t i = 0; i < name.len; i++) {
        u_char c = name.data[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_'))
            return NGX_ERROR;
    }
    return ngx_http_get_variable_index(cf, &name);
}

char *ngx_http_ratelimit_dimension(ngx_conf_t *cf, ngx_command_t *cmd,
                                   void *conf)
{
    ngx_http_ratelimit_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_compile_complex_value_t ccv;
    ngx_http_ratelimit_dim_t *d;

    if (!ngx_http_ratelimit_dim_name_ok(&value[1])) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "bad dimension name \"%V\": 1 to %d bytes of "
                           "a-z 0-9 _ . : -, starting with a letter, not "
                           "\"global\"", &value[1], RL_DIM_NAME_MAX);
        return NGX_CONF_ERROR;
    }
    if (lcf->dims == NGX_CONF_UNSET_PTR) {
        lcf->dims = ngx_array_create(cf->pool, 4, sizeof(*d));
        if (lcf->dims == NULL)
            return NGX_CONF_ERROR;
    }
    d = lcf->dims->elts;
    for (ngx_uint_t i = 0; i < lcf->dims->nelts; i++)
        if (ngx_strcmp(d[i].name.data, value[1].data) == 0)
            return "names a dimension twice";
    /* user, api_key and ip are rl_request's own; the rest go in dims */
    if (lcf->dims->nelts >= RL_DIMS_MAX + 3)
        return "gives more dimensions than a request can carry";
    d = ngx_array_push(lcf->dims);
    if (d == NULL)
        return NGX_CONF_ERROR;
    d->name = value[1];
    d->field = ngx_http_ratelimit_dim_field(&d->name);
    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = &value[2];
    ccv.complex_value = &d->value;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
        return NGX_CONF_ERROR;
    d->var = ngx_http_ratelimit_lone_var(cf, &value[2]);
    return NGX_CONF_OK;
}

/* ratelimit_cost: a complex value; a constant one is checked now. */
char *ngx_http_ratelimit_cost(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_ratelimit_loc_conf_t *lcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_int_t n;
    char *rv;

    rv = ngx_http_set_complex_value_slot(cf, cmd, conf);
    if (rv != NGX_CONF_OK || lcf->cost->lengths != NULL)
        return rv;
    n = ngx_atoi(value[1].data, value[1].len);
    if (n == NGX_ERROR || n > RL_COST_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "bad cost \"%V\": an integer from 0 to %L",
                           &value[1], (int64_t)RL_COST_MAX);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/* What an rl_config made from mcf is for. */
enum {
    NGX_HTTP_RATELIMIT_FOR_VALUES,  /* every setting, to check its value */
    NGX_HTTP_RATELIMIT_FOR_CHECK,   /* a limiter the master frees: no rules
                                       source, no events sender          */
    NGX_HTTP_RATELIMIT_FOR_WORKER   /* the worker's: the rules as text    */
};

/* The rules: the file (read by the library), the text the master read
 * from it, or the rules source with its last good copy. */
static ngx_int_t ngx_http_ratelimit_set_rules(rl_config *cfg,
                                              ngx_http_ratelimit_main_conf_t *mcf,
                                              ngx_uint_t use, ngx_log_t *log)
{
    ngx_int_t rc = NGX_OK;

    if (mcf->rules_source.len && use != NGX_HTTP_RATELIMIT_FOR_CHECK) {
        rc = ngx_http_ratelimit_set(cfg, "rules_source",
                                    (char *)mcf->rules_source.data, log);
        if (rc == NGX_OK && mcf->rules_file.len)
            rc = ngx_http_ratelimit_set(cfg, "rules_file",
                                        (char *)mcf->rules_file.data, log);
        return rc;
    }
    if (mcf->rules_source.len)
        return NGX_OK;
    if (use == NGX_HTTP_RATELIMIT_FOR_WORKER && mcf->rules_text.len)
        return ngx_http_ratelimit_set(cfg, "rules",
                                      (char *)mcf->rules_text.data, log);
    if (mcf->rules_file.len)
        rc = ngx_http_ratelimit_set(cfg, "rules_file",
                                    (char *)mcf->rules_file.data, log);
    return rc;
}

/* The limiter settings of mcf as an rl_config.  A worker starts while
 * Redis is away (degraded_start 1, which ratelimit_option may turn off):
 * its rules' failure modes decide until the store is back. */
static rl_config *ngx_http_ratelimit_make(ngx_http_ratelimit_main_conf_t *mcf,
                                          ngx_uint_t use, ngx_log_t *log)
{
    rl_config *cfg = rl_config_new();
    ngx_keyval_t *kv = mcf->options->elts;
    ngx_int_t rc;

    if (cfg == NULL)
        return NULL;
    rc = ngx_http_ratelimit_set(cfg, "store", (char *)mcf->store.data, log);
    /* The master's check limiter leaves a shm:// region alone (its URI,
     * name included, was checked just now): made by root, 0600, it would
     * shut out the workers; the first worker makes it. */
    if (rc == NGX_OK && use == NGX_HTTP_RATELIMIT_FOR_CHECK &&
        ngx_strncmp(mcf->store.data, NGX_HTTP_RATELIMIT_SHM_SCHEME,
                    sizeof(NGX_HTTP_RATELIMIT_SHM_SCHEME) - 1) == 0)
        rc = ngx_http_ratelimit_set(cfg, "store", "memory://", log);
    if (rc == NGX_OK)
        rc = ngx_http_ratelimit_set(cfg, "degraded_start", "1", log);
    if (rc == NGX_OK)
        rc = ngx_http_ratelimit_set_rules(cfg, mcf, use, log);
    for (ngx_uint_t i = 0; rc == NGX_OK && i < mcf->options->nelts; i++) {
        if (use == NGX_HTTP_RATELIMIT_FOR_CHECK &&
            ngx_strcmp(kv[i].key.data, "events_redis") == 0)
            continue;
        rc = ngx_http_ratelimit_set(cfg, (char *)kv[i].key.data,
                                    (char *)kv[i].value.data, log);
    }
    if (rc != NGX_OK) {
        rl_config_free(cfg);
        return NULL;
    }
    return cfg;
}

rl_config *ngx_http_ratelimit_config(ngx_http_ratelimit_main_conf_t *mcf,
                                     ngx_log_t *log)
{
    return ngx_http_ratelimit_make(mcf, NGX_HTTP_RATELIMIT_FOR_WORKER, log);
}

/* The rules file's text, read by the master (workers run as another user,
 * who may not read it; and every worker takes the set `nginx -t` took). */
static ngx_int_t ngx_http_ratelimit_read_rules(ngx_conf_t *cf,
                                               ngx_http_ratelimit_main_conf_t *mcf)
{
    FILE *f = fopen((char *)mcf->rules_file.data, "r");
    u_char *text;
    size_t n;

    if (f == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno, "ratelimit: "
                           "cannot open \"%V\"", &mcf->rules_file);
        return NGX_ERROR;
    }
    text = ngx_pnalloc(cf->pool, RL_RULES_TEXT_MAX + 1);
    n = text ? fread(text, 1, RL_RULES_TEXT_MAX + 1, f) : 0;
    fclose(f);
    if (text == NULL || n > RL_RULES_TEXT_MAX) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratelimit: \"%V\" is "
                           "larger than %d bytes", &mcf->rules_file,
                           RL_RULES_TEXT_MAX);
        return NGX_ERROR;
    }
    text[n] = '\0';
    mcf->rules_text.data = text;
    mcf->rules_text.len = n;
    return NGX_OK;
}

/*
 * A limiter from the settings, freed at once: the store URI is opened
 * (a Redis store with degraded_start does not wait for the server), the
 * rules file read and parsed.  A rules source is checked for its syntax
 * only (rl_config_set), not read: the master does not wait for it.
 */
char *ngx_http_ratelimit_validate(ngx_conf_t *cf,
                                  ngx_http_ratelimit_main_conf_t *mcf)
{
    rl_config *cfg;
    rl_limiter *lim;
    int rc;

    cfg = ngx_http_ratelimit_make(mcf, NGX_HTTP_RATELIMIT_FOR_VALUES, cf->log);
    if (cfg == NULL)
        return NGX_CONF_ERROR;
    rl_config_free(cfg);
    cfg = ngx_http_ratelimit_make(mcf, NGX_HTTP_RATELIMIT_FOR_CHECK, cf->log);
    if (cfg == NULL)
        return NGX_CONF_ERROR;
    rl_config_set_log(cfg, NULL, NULL);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    if (rc != RL_OK) {
        ngx_log_error(NGX_LOG_EMERG, cf->log, 0, "ratelimit: %s",
                      rl_errmsg(NULL));
        return NGX_CONF_ERROR;
    }
    rl_limiter_free(lim);
    if (mcf->rules_file.len && mcf->rules_source.len == 0 &&
        ngx_http_ratelimit_read_rules(cf, mcf) != NGX_OK)
        return NGX_CONF_ERROR;
    return NGX_CONF_OK;
}
