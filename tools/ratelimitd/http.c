/*
 * http.c -- ratelimitd's HTTP/1.1 server on libmicrohttpd: reading a
 * request, refusing what must be refused before its body is read, and
 * sending api.c's answer (see ratelimitd.h).
 *
 * Threads: libmicrohttpd's own polling threads (a pool of http_opts.threads,
 * epoll), each running the handler for its connections.  A pool rather
 * than one thread, because a PUT holds its thread through the commit's
 * fsync and reads must not queue behind it; a pool rather than a thread per
 * connection, because the number of threads stays fixed whatever clients
 * do.  Changes are serialized further down (service.c).
 *
 * Paths are NOT %-decoded: the unescape callback leaves the URL as sent,
 * so route_parse() sees "%2F" or "%2e%2e" as the bytes they are and
 * refuses them.
 *
 * Order of the checks, all made when the headers are in, before any byte
 * of the body is accepted: path (404, 400 for an id that is not one),
 * method (405), token (401 none, 403 wrong), then for a PUT the media type
 * (415) and a declared length over the cap (413, answered at once, the
 * body never read).  A body that grows over the cap without a declared
 * length (chunked) is dropped as it comes and gets 413 at its end; the
 * other refusals too are answered once the body is in, so the connection
 * stays usable.
 */
#include "ratelimitd.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CONNECTION_TIMEOUT_S 30
#define JSON_TYPE "application/json"
#define DISCARD_FACTOR 16 /* body bytes dropped, in caps, before closing */

struct http {
    struct MHD_Daemon *d;
    http_opts o;
    pthread_rwlock_t tmu;   /* guards o.tokens: SIGHUP swaps them      */
};

/* Per request, from its first call to its completion. */
typedef struct req {
    route rt;
    api_reply refusal;      /* status != 0: answer this once the body is in */
    const char *by;         /* token name: byname, or NULL */
    char byname[AUTH_NAME_MAX + 1];
    char *buf;
    size_t len, cap;
    int answered;           /* a response is queued: discard the rest */
} req;

static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static enum MHD_Result send_reply(struct MHD_Connection *c,
                                  const char *method, const char *url,
                                  int kind, api_reply *r)
{
    struct MHD_Response *resp;
    enum MHD_Result ok;

    metrics_count(kind, r->status);
    if (r->error)
        log_line("%s %s: %d %s: %s", method, url, r->status, r->error,
                 r->msg);
    resp = MHD_create_response_from_buffer(r->len, r->body,
                                           MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(r->body);
        r->body = NULL;
        return MHD_NO;
    }
    r->body = NULL; /* the response frees it */
    if (r->len)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                r->type ? r->type : JSON_TYPE);
    if (r->etag[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, r->etag);
    if (r->status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer realm=\"ratelimitd\"");
    ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* A media type is JSON: "application/json", any parameters after ';'. */
static int is_json(const char *type)
{
    size_t n = strlen(JSON_TYPE);

    if (!type || strncasecmp(type, JSON_TYPE, n) != 0)
        return 0;
    type += n;
    while (*type == ' ' || *type == '\t')
        type++;
    return *type == '\0' || *type == ';';
}

/* A declared Content-Length over the cap. */
static int declared_too_large(struct MHD_Connection *c, size_t max)
{
    const char *v = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end;
    unsigned long long n;

    if (!v)
        return 0;
    n = strtoull(v, &end, 10);
    return end != v && n > max;
}

static void too_large(api_reply *r, size_t max)
{
    char msg[96];

    snprintf(msg, sizeof msg, "the body is over %zu bytes", max);
    api_error(r, MHD_HTTP_CONTENT_TOO_LARGE, "payload_too_large", msg, NULL);
}

static int refuse_token(http *h, struct MHD_Connection *c, req *q)
{
    api_reply *r = &q->refusal;
    const char *name;
    int rc;

    /* the name is copied: the tokens may be swapped once it is read */
    pthread_rwlock_rdlock(&h->tmu);
    rc = auth_check(h->o.tokens, header(c, MHD_HTTP_HEADER_AUTHORIZATION),
                    &name);
    if (rc == AUTH_OK) {
        snprintf(q->byname, sizeof q->byname, "%s", name);
        q->by = q->byname;
    }
    pthread_rwlock_unlock(&h->tmu);
    switch (rc) {
    case AUTH_OK:
        return 0;
    case AUTH_MISSING:
        api_error(r, MHD_HTTP_UNAUTHORIZED, "unauthorized",
                  "a bearer token is needed: Authorization: Bearer <token>",
                  NULL);
        return 1;
    default:
        api_error(r, MHD_HTTP_FORBIDDEN, "forbidden",
                  "the bearer token is not one of the service's", NULL);
        return 1;
    }
}

/* What can be refused from the request line and headers alone: fills
 * q->refusal and returns 1, or 0 to go on. */
static int refuse_early(http *h, struct MHD_Connection *c,
                        const char *method, req *q)
{
    api_reply *r = &q->refusal;
    const char *allow;
    int kind = q->rt.kind;

    if (kind == ROUTE_UNKNOWN)
        return api_error(r, MHD_HTTP_NOT_FOUND, "not_found", "no such path",
                         NULL), 1;
    if (kind == ROUTE_BAD_ID)
        return api_error(r, MHD_HTTP_BAD_REQUEST, "bad_rule_id",
                         ROUTE_BAD_ID_MSG, "rule_id"), 1;
    if (!api_method_allowed(kind, method, &allow)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%.16s is not allowed here; allowed: %s",
                 method, allow);
        api_error(r, MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed", msg,
                  NULL);
        r->allow = allow;
        return 1;
    }
    if (api_needs_token(&h->o, kind, method) && refuse_token(h, c, q))
        return 1;
    if (strcmp(method, "PUT") != 0)
        return 0;
    if (!is_json(header(c, MHD_HTTP_HEADER_CONTENT_TYPE)))
        return api_error(r, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                         "unsupported_media_type",
                         "the body must be Content-Type: application/json",
                         NULL), 1;
    if (declared_too_large(c, h->o.max_body))
        return too_large(r, h->o.max_body), 1;
    return 0;
}

/* Body bytes: kept up to the cap.  Past the cap, or for a request already
 * refused, they are counted and dropped (libmicrohttpd takes an answer
 * only before the body or after all of it), and past DISCARD_FACTOR times
 * the cap the connection is closed without one. */
static enum MHD_Result take_body(const http *h, req *q, const char *data,
                                 size_t n)
{
    size_t cap;

    if (q->len + n > h->o.max_body && !q->refusal.status)
        too_large(&q->refusal, h->o.max_body);
    if (q->refusal.status) {
        q->len += n; /* counted, not kept */
        if (q->len / DISCARD_FACTOR <= h->o.max_body)
            return MHD_YES;
        log_line("closing a connection that sent over %zu bytes of body",
                 DISCARD_FACTOR * h->o.max_body);
        return MHD_NO;
    }
    if (q->len + n + 1 > q->cap) {
        char *b;
        cap = q->cap ? q->cap : 1024;
        while (cap < q->len + n + 1)
            cap *= 2;
        if (!(b = realloc(q->buf, cap)))
            return MHD_NO;
        q->buf = b;
        q->cap = cap;
    }
    memcpy(q->buf + q->len, data, n);
    q->len += n;
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *data,
                              size_t *size, void **ptr)
{
    http *h = cls;
    req *q = *ptr;
    api_reply r = {0};
    api_call call;
    size_t n;

    (void)version;
    if (!q) { /* the headers are in */
        if (!(q = calloc(1, sizeof *q)))
            return MHD_NO;
        *ptr = q;
        route_parse(url, &q->rt);
        if (refuse_early(h, c, method, q) &&
            q->refusal.status == MHD_HTTP_CONTENT_TOO_LARGE) {
            q->answered = 1;
            return send_reply(c, method, url, q->rt.kind, &q->refusal);
        }
        return MHD_YES;
    }
    if ((n = *size) != 0) {
        *size = 0;
        return take_body(h, q, data, n);
    }
    if (q->answered)
        return MHD_YES;
    q->answered = 1;
    if (q->refusal.status)
        return send_reply(c, method, url, q->rt.kind, &q->refusal);
    call = (api_call){.method = method, .rt = &q->rt, .body = q->buf,
                      .len = q->len, .by = q->by,
                      .if_match = header(c, MHD_HTTP_HEADER_IF_MATCH),
                      .if_none_match = header(c,
                                              MHD_HTTP_HEADER_IF_NONE_MATCH)};
    api_serve(&h->o, &call, &r);
    return send_reply(c, method, url, q->rt.kind, &r);
}

static void completed(void *cls, struct MHD_Connection *c, void **ptr,
                      enum MHD_RequestTerminationCode why)
{
    req *q = *ptr;

    (void)cls;
    (void)c;
    (void)why;
    if (!q)
        return;
    free(q->refusal.body);
    free(q->buf);
    free(q);
    *ptr = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    size_t n;

    (void)cls;
    vsnprintf(buf, sizeof buf, fmt, ap);
    n = strlen(buf);
    while (n && buf[n - 1] == '\n')
        buf[--n] = '\0';
    log_line("http: %s", buf);
}

int http_start(http **out, const http_opts *o, char *err, size_t errlen)
{
    http *h = calloc(1, sizeof *h);

    *out = NULL;
    if (!h)
        return snprintf(err, errlen, "out of memory"), -1;
    h->o = *o;
    pthread_rwlock_init(&h->tmu, NULL);
    h->d = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
        handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, o->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, o->threads,
        MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
        MHD_OPTION_END);
    if (!h->d) {
        pthread_rwlock_destroy(&h->tmu);
        free(h);
        return snprintf(err, errlen, "libmicrohttpd would not start"), -1;
    }
    *out = h;
    return 0;
}

void http_stop(http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d); /* joins the workers: requests in flight end */
    pthread_rwlock_destroy(&h->tmu);
    free(h);
}

const auth *http_swap_tokens(http *h, const auth *tokens)
{
    const auth *old;

    pthread_rwlock_wrlock(&h->tmu);
    old = h->o.tokens;
    h->o.tokens = tokens;
    pthread_rwlock_unlock(&h->tmu);
    return old;
}
