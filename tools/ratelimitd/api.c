/*
 * api.c -- the endpoints of contracts.md section 5: what each method on each
 * path does once http.c has routed, authenticated and read the request.
 *
 *   GET    /healthz                {"ok":true,"version":N,"generation":G,
 *                                   "redis":"up"|"down"|"off"}; 503 with
 *                                   "ok":false and a "reason" while the
 *                                   fleet cannot run this database's set
 *   GET    /v1/rules               the set, ETag = set version; If-None-Match: 304
 *   GET    /v1/rules/{id}          one rule, ETag = rule version; 404
 *   PUT    /v1/rules/{id}          store a rule; If-Match / If-None-Match: 412
 *   DELETE /v1/rules/{id}          {"version":N,"deleted":id}; If-Match: 412
 *   GET    /v1/rules/{id}/history  {"rule_id":id,"history":[...]} oldest first
 *   GET    /metrics                Prometheus text (metrics.c)
 *
 * Rules are read from the snapshot in memory (never from SQLite), so reads
 * never wait for a write's fsync.  Every rule and set in an answer is the
 * library's canonical JSON (rule_json.h), as the snapshot holds it.
 */
#include "ratelimitd.h"
#include "rule_json.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const allowed[] = {
    [ROUTE_HEALTHZ] = "GET, HEAD",
    [ROUTE_RULES] = "GET, HEAD",
    [ROUTE_RULE] = "GET, HEAD, PUT, DELETE",
    [ROUTE_HISTORY] = "GET, HEAD",
    [ROUTE_METRICS] = "GET, HEAD",
};

static int is_read(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

int api_method_allowed(int kind, const char *method, const char **allow)
{
    *allow = allowed[kind];
    if (is_read(method))
        return 1;
    return kind == ROUTE_RULE &&
           (strcmp(method, "PUT") == 0 || strcmp(method, "DELETE") == 0);
}

int api_needs_token(const http_opts *o, int kind, const char *method)
{
    if (kind == ROUTE_HEALTHZ)
        return 0;
    return !is_read(method) || o->read_auth;
}

/* A JSON body and its newline; steals j. */
static void reply_json(api_reply *r, int status, json_t *j)
{
    char *text = j ? json_dumps(j, RULE_JSON_DUMP_FLAGS) : NULL;
    size_t n = text ? strlen(text) : 0;

    json_decref(j);
    r->status = status;
    r->body = text ? realloc(text, n + 2) : NULL;
    if (!r->body) {
        free(text);
        api_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
                  "out of memory", NULL);
        return;
    }
    memcpy(r->body + n, "\n", 2);
    r->len = n + 1;
}

void api_error(api_reply *r, int status, const char *code, const char *msg,
               const char *field)
{
    json_t *j = json_pack("{s:s, s:s}", "error", code, "message", msg);

    if (j && field && *field)
        json_object_set_new(j, "field", json_string(field));
    free(r->body);
    r->body = NULL;
    r->etag[0] = '\0';
    r->error = code;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    if (j)
        reply_json(r, status, j);
    r->status = status;
}

static void not_modified(api_reply *r, int64_t version)
{
    r->status = MHD_HTTP_NOT_MODIFIED;
    etag_format(version, r->etag);
}

static void healthz(const http_opts *o, api_reply *r)
{
    snapshot *s = service_snapshot(o->svc);
    char why[API_MSG_MAX];
    int bad = publisher_health(o->pub, why, sizeof why) != 0;
    json_t *j = json_pack("{s:b, s:I, s:s, s:s}", "ok", !bad, "version",
                          (json_int_t)s->version, "generation", s->gen,
                          "redis", publisher_state(o->pub));

    if (j && bad)
        json_object_set_new(j, "reason", json_string(why));
    reply_json(r, bad ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, j);
    snapshot_unref(s);
}

/* A slice of the snapshot's text, a newline added. */
static void reply_text(api_reply *r, const char *text, size_t len)
{
    if (!(r->body = malloc(len + 1))) {
        api_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
                  "out of memory", NULL);
        return;
    }
    memcpy(r->body, text, len);
    r->body[len] = '\n';
    r->len = len + 1;
    r->status = MHD_HTTP_OK;
}

static void list(const http_opts *o, const api_call *c, api_reply *r)
{
    snapshot *s = service_snapshot(o->svc);

    if (c->if_none_match && etag_matches(c->if_none_match, s->version, 1, 1))
        not_modified(r, s->version);
    else
        reply_text(r, s->json, s->len);
    if (r->status == MHD_HTTP_OK)
        etag_format(s->version, r->etag);
    snapshot_unref(s);
}

static void get_rule(const http_opts *o, const api_call *c, api_reply *r)
{
    snapshot *s = service_snapshot(o->svc);
    const snap_rule *rule = snapshot_find(s, c->rt->id);
    char msg[128];

    if (!rule) {
        snprintf(msg, sizeof msg, "no rule %s", c->rt->id);
        api_error(r, MHD_HTTP_NOT_FOUND, "not_found", msg, NULL);
    } else if (c->if_none_match &&
               etag_matches(c->if_none_match, rule->version, 1, 1)) {
        not_modified(r, rule->version);
    } else {
        reply_text(r, rule->json, rule->len);
        if (r->status == MHD_HTTP_OK)
            etag_format(rule->version, r->etag);
    }
    snapshot_unref(s);
}

/* A refused or failed change to its HTTP answer. */
static void change_error(api_reply *r, int code, const char *msg)
{
    switch (code) {
    case SVC_NOT_FOUND:
        api_error(r, MHD_HTTP_NOT_FOUND, "not_found", msg, NULL);
        break;
    case SVC_PRECONDITION:
        api_error(r, MHD_HTTP_PRECONDITION_FAILED, "precondition_failed",
                  msg, NULL);
        break;
    case SVC_INVALID:
        api_error(r, MHD_HTTP_BAD_REQUEST, "invalid_rule_set", msg, NULL);
        break;
    default:
        api_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", msg, NULL);
    }
}

static change_req change_of(const api_call *c)
{
    return (change_req){.if_match = c->if_match,
                        .if_none_match = c->if_none_match, .by = c->by};
}

static void put_rule(const http_opts *o, const api_call *c, api_reply *r)
{
    char err[512], field[80];
    change_req req = change_of(c);
    change_res res;
    rl_rule rule;
    int rc = body_parse(c->body ? c->body : "", c->len, c->rt->id, &rule,
                        err, sizeof err, field, sizeof field);

    if (rc != BODY_OK) {
        api_error(r, MHD_HTTP_BAD_REQUEST,
                  rc == BODY_BAD_JSON ? "bad_json" : "invalid_rule", err,
                  field);
        return;
    }
    rc = service_put(o->svc, &rule, &req, &res);
    rule_clear(&rule);
    if (rc != SVC_OK) {
        change_error(r, rc, res.msg);
        return;
    }
    log_line("put rule %s version %lld by %s", c->rt->id,
             (long long)res.version, c->by);
    /* The rule as stored: its canonical text, a newline added. */
    r->len = strlen(res.json);
    if (!(r->body = realloc(res.json, r->len + 2))) {
        free(res.json);
        api_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
                  "out of memory", NULL);
        return;
    }
    memcpy(r->body + r->len++, "\n", 2);
    r->status = MHD_HTTP_OK;
    etag_format(res.version, r->etag);
}

static void delete_rule(const http_opts *o, const api_call *c,
                        api_reply *r)
{
    change_req req = change_of(c);
    change_res res;
    int rc = service_delete(o->svc, c->rt->id, &req, &res);

    if (rc != SVC_OK) {
        change_error(r, rc, res.msg);
        return;
    }
    log_line("deleted rule %s version %lld by %s", c->rt->id,
             (long long)res.version, c->by);
    reply_json(r, MHD_HTTP_OK,
               json_pack("{s:I, s:s}", "version", (json_int_t)res.version,
                         "deleted", c->rt->id));
}

static void history(const http_opts *o, const api_call *c, api_reply *r)
{
    char err[DB_ERR_MAX];
    json_t *h = NULL;
    int rc = service_history(o->svc, c->rt->id, &h, err, sizeof err);

    if (rc != SVC_OK) {
        change_error(r, rc, err);
        return;
    }
    reply_json(r, MHD_HTTP_OK,
               json_pack("{s:s, s:o}", "rule_id", c->rt->id, "history", h));
}

void api_serve(const http_opts *o, const api_call *c, api_reply *r)
{
    int read = is_read(c->method);

    switch (c->rt->kind) {
    case ROUTE_HEALTHZ:
        healthz(o, r);
        break;
    case ROUTE_RULES:
        list(o, c, r);
        break;
    case ROUTE_HISTORY:
        history(o, c, r);
        break;
    case ROUTE_METRICS:
        if (metrics_text(o, &r->body, &r->len) == 0) {
            r->status = MHD_HTTP_OK;
            r->type = METRICS_TYPE;
        } else {
            api_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
                      "out of memory", NULL);
        }
        break;
    case ROUTE_RULE:
        if (read)
            get_rule(o, c, r);
        else if (strcmp(c->method, "PUT") == 0)
            put_rule(o, c, r);
        else
            delete_rule(o, c, r);
        break;
    default:
        api_error(r, MHD_HTTP_NOT_FOUND, "not_found", "no such path", NULL);
    }
}
