/*
 * gateway.c -- examples/gateway: a small HTTP gateway that runs rl_check()
 * on every request and answers 429 (with X-RateLimit-*, RateLimit-Policy /
 * RateLimit, Retry-After and the JSON body) or passes the request on: to
 * a fixed upstream (--upstream, gateway_upstream.c) or, without one, with
 * a canned 200.  GET /metrics serves rl_metrics_write_cb()'s Prometheus
 * text.  `gateway --help` says where the check's inputs come from.
 *
 * Threads: libmicrohttpd's thread per connection (an internal poll thread
 * accepts; each connection then has a thread of its own, at most
 * CONNECTION_LIMIT).  The two calls a request makes that may wait are
 * rl_check() (at most the limiter's timeout_ms, 5 ms by default) and, for
 * an admitted request, the upstream exchange (up to
 * GW_UPSTREAM_TIMEOUT_MS): in a thread pool either wait would stall every
 * other connection polled by that thread, with a thread per connection it
 * stalls only its own client.  One rl_limiter serves all the threads at
 * once, which is what the library is built for.  The asynchronous API
 * (rl_check_start() with libmicrohttpd's suspend / resume) would save the
 * threads but needs a loop thread owning the rl_async and a hand-off
 * between it and libmicrohttpd's threads, and the upstream call would then
 * have to be asynchronous too; for an example, the blocking call with its
 * deadline is the clearer one.  nginx/ shows the asynchronous way.
 *
 * Bounds: a request line and headers over CONNECTION_MEMORY bytes are
 * refused by libmicrohttpd itself (414 / 431, or the connection closed);
 * a path over RL_ENDPOINT_MAX gets 414 before any check; a body over
 * GW_REQUEST_BODY_MAX gets 413.  The rule's key is built by the library
 * from the header values, which it bounds (RL_KEY_MAX: 400 beyond).
 */
#include "gateway.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <ratelimit.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNECTION_LIMIT 1024
#define CONNECTION_MEMORY (16u << 10)
#define CONNECTION_TIMEOUT_S 30
#define LISTEN_BACKLOG 256
#define SETS_MAX 32
#define METRICS_PATH "/metrics"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define JSON_TYPE "application/json"
#define CANNED_BODY "OK\n"

static const char usage_text[] =
    "usage: gateway --listen [ADDR:]PORT [--store URI] [--rules FILE]\n"
    "               [--upstream http://HOST[:PORT][/PREFIX]] [--metrics on|off]\n"
    "               [--set NAME=VALUE]... [--port-file FILE]\n"
    "       gateway --version | --help\n"
    "\n"
    "An HTTP gateway that runs rl_check() on every request.\n"
    "  --listen [ADDR:]PORT  IPv4 address (default 0.0.0.0) and port; 0: a free one\n"
    "  --store URI           where the limits live (default memory://), e.g.\n"
    "                        redis://127.0.0.1:6379/0: every gateway on it shares them\n"
    "  --rules FILE          the rule set (JSON; see docs/USING.md, Rules)\n"
    "  --upstream URL        pass admitted requests on to this http:// server\n"
    "                        (without it: a canned 200 \"OK\")\n"
    "  --metrics on|off      serve GET /metrics in Prometheus text (default on)\n"
    "  --set NAME=VALUE      any rl_config_set() option, e.g. timeout_ms=50\n"
    "                        (the longest a check waits for the store)\n"
    "  --port-file FILE      write the port listened on to FILE\n"
    "\n"
    "Each request is checked as:\n"
    "  endpoint  its path, %-decoded, without the query\n"
    "  tier      header X-Tier (trust it only from a front proxy that sets it)\n"
    "  api_key   header X-API-Key\n"
    "  user      header X-User, else the query argument user=\n"
    "  ip        the peer's address\n"
    "  cost      1\n"
    "A denial gets 429 (503 when the store failed and the rule fails closed,\n"
    "told on stderr at most once a second)\n"
    "with Retry-After, X-RateLimit-*, RateLimit-Policy, RateLimit and a JSON\n"
    "body; an admitted request's answer carries the X-RateLimit-* headers too.\n";

typedef struct gw_opts {
    const char *listen, *store, *rules, *upstream, *port_file;
    int metrics;
    const char *sets[SETS_MAX];
    size_t nsets;
} gw_opts;

typedef struct gw {
    rl_limiter *lim;
    int metrics;
    int upstream;
} gw;

/* One request, from the URI log callback to its completion. */
typedef struct gw_req {
    char *target;    /* the request-target as sent: what is passed on */
    int started;     /* the headers were seen */
    int answered;    /* a response is queued */
    int decided;     /* res holds the check's answer */
    int metrics;     /* answer with the metrics */
    int check_rc;    /* rl_check()'s failure, to answer */
    unsigned status; /* a refusal before any check (400, 414) */
    const char *error, *message; /* its JSON body's members */
    rl_result res;
    char *body;
    size_t len, cap;
    int too_large;
    char ip[INET6_ADDRSTRLEN];
} gw_req;

/* A connection's state: its libcurl handle to the upstream. */
typedef struct gw_conn {
    void *upstream;
} gw_conn;

/* ---- responses ---------------------------------------------------------- */

static void add_rate_headers(struct MHD_Response *r, const rl_result *res)
{
    rl_header h[RL_HEADERS_MAX];
    int n;

    if (!res || (res->flags & RL_FLAG_NO_RULE))
        return;
    n = rl_headers(res, RL_HEADERS_IETF, h, RL_HEADERS_MAX);
    for (int i = 0; i < n; i++)
        MHD_add_response_header(r, h[i].name, h[i].value);
}

/* Queue status with body (copied) of media type type, and res's headers
 * when res holds a decision. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *type, const char *body,
                             const rl_result *res)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ok;

    if (!r)
        return MHD_NO;
    if (type)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    add_rate_headers(r, res);
    ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status,
                                   const char *error, const char *message)
{
    char body[256];

    snprintf(body, sizeof body, "{\"error\":\"%s\",\"message\":\"%s\"}",
             error, message);
    return reply(c, status, JSON_TYPE, body, NULL);
}

/* A rule failed closed because the store is away: one line on stderr a
 * second at most, the answers in between counted into it (ratelimit(7):
 * an outage is never mistaken for limiting). */
static void tell_unavailable(const rl_result *res)
{
    static _Atomic long long last_s = -1;
    static _Atomic long since;
    long long now = (long long)time(NULL), last = atomic_load(&last_s);
    long n;

    atomic_fetch_add(&since, 1);
    if (now == last || !atomic_compare_exchange_strong(&last_s, &last, now))
        return;
    n = atomic_exchange(&since, 0);
    fprintf(stderr, "gateway: the store is unavailable: rule \"%s\" fails "
            "closed, answered 503 (%ld such answers since the last line)\n",
            res->rule_id, n);
}

static enum MHD_Result reply_denied(struct MHD_Connection *c,
                                    const rl_result *res)
{
    char body[RL_BODY_FORMAT_MAX];
    unsigned status = (res->flags & RL_FLAG_FAIL_CLOSED)
                          ? MHD_HTTP_SERVICE_UNAVAILABLE
                          : MHD_HTTP_TOO_MANY_REQUESTS;

    if (rl_body_format(res, body, sizeof body) < 0)
        body[0] = '\0';
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        tell_unavailable(res);
    return reply(c, status, JSON_TYPE, body, res);
}

/* rl_check() could not decide: say why without echoing the request. */
static enum MHD_Result reply_check_failed(struct MHD_Connection *c, int rc)
{
    if (rc == RL_EINVAL)
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "bad_request",
                           "a header or the path is outside the limiter's "
                           "bounds");
    if (rc == RL_ESTORE)
        return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                           "limiter_unavailable",
                           "the rate limiter's store cannot decide now");
    return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal_error",
                       rl_strerror(rc));
}

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static int text_append(void *arg, const char *p, size_t n)
{
    text *t = arg;

    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 16384;
        char *b;
        while (cap < t->len + n)
            cap *= 2;
        if (!(b = realloc(t->p, cap)))
            return -1;
        t->p = b;
        t->cap = cap;
    }
    memcpy(t->p + t->len, p, n);
    t->len += n;
    return 0;
}

static enum MHD_Result reply_metrics(const gw *g, struct MHD_Connection *c)
{
    text t = {0};
    struct MHD_Response *r;
    enum MHD_Result ok;

    if (rl_metrics_write_cb(g->lim, text_append, &t) != RL_OK) {
        free(t.p);
        return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           "internal_error", "the metrics could not be written");
    }
    r = MHD_create_response_from_buffer(t.len, t.p, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(t.p);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_TYPE);
    ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- the request -------------------------------------------------------- */

static void peer_address(struct MHD_Connection *c, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;

    out[0] = '\0';
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
                  (socklen_t)cap);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
                  out, (socklen_t)cap);
}

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* What the request would be refused for before any check: sets q->status
 * and returns 1, or returns 0. */
static int refuse(const char *path, gw_req *q)
{
    if (q->target[0] != '/')
        q->status = MHD_HTTP_BAD_REQUEST, q->error = "bad_request",
        q->message = "the request-target must be a path";
    else if (strlen(path) > RL_ENDPOINT_MAX)
        q->status = MHD_HTTP_URI_TOO_LONG, q->error = "uri_too_long",
        q->message = "the path is too long";
    return q->status != 0;
}

/* The headers are in: check the request and keep the verdict. */
static void begin(gw *g, struct MHD_Connection *c, const char *path,
                  const char *method, gw_req *q)
{
    const char *user = header(c, "X-User");
    rl_request req = RL_REQUEST_INIT;

    q->started = 1;
    if (g->metrics && strcmp(path, METRICS_PATH) == 0 &&
        (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
        q->metrics = 1;
        return;
    }
    if (refuse(path, q))
        return;
    peer_address(c, q->ip, sizeof q->ip);
    if (!user)
        user = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "user");
    req.endpoint = path;
    req.tier = header(c, "X-Tier");
    req.api_key = header(c, "X-API-Key");
    req.user = user;
    req.ip = q->ip;
    req.cost = 1;
    q->check_rc = rl_check(g->lim, &req, &q->res);
    q->decided = q->check_rc == RL_OK;
}

/* Whether the request carries a body (a length or a transfer coding). */
static int has_body(struct MHD_Connection *c)
{
    const char *n = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);

    return (n && strcmp(n, "0") != 0) ||
           header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL;
}

/* Whether the request is refused (denied, or not checked). */
static int refused(const gw_req *q)
{
    return q->status || q->check_rc != RL_OK ||
           (q->decided && !q->res.allowed);
}

/* Body bytes: kept (up to GW_REQUEST_BODY_MAX) when there is an upstream
 * to give them to, else dropped. */
static void take_body(const gw *g, gw_req *q, const char *data, size_t n)
{
    if (!g->upstream || q->too_large)
        return;
    if (q->len + n > GW_REQUEST_BODY_MAX) {
        q->too_large = 1;
        return;
    }
    if (q->len + n > q->cap) {
        size_t cap = q->cap ? q->cap : 4096;
        char *b;
        while (cap < q->len + n)
            cap *= 2;
        if (!(b = realloc(q->body, cap))) {
            q->too_large = 1;
            return;
        }
        q->body = b;
        q->cap = cap;
    }
    memcpy(q->body + q->len, data, n);
    q->len += n;
}

static enum MHD_Result reply_upstream(struct MHD_Connection *c, gw_answer *a,
                                      const rl_result *res)
{
    struct MHD_Response *r;
    enum MHD_Result ok;

    r = MHD_create_response_from_buffer(a->body_len, a->body,
                                        MHD_RESPMEM_MUST_FREE);
    if (!r)
        return MHD_NO;
    a->body = NULL; /* the response frees it */
    for (size_t i = 0; i < a->nheaders; i++)
        MHD_add_response_header(r, a->headers[i].name, a->headers[i].value);
    add_rate_headers(r, res);
    ok = MHD_queue_response(c, a->status, r);
    MHD_destroy_response(r);
    return ok;
}

/* Answer the request: its refusal, the metrics, or (the whole request
 * in and admitted) the upstream's answer or 200. */
static enum MHD_Result finish(const gw *g, struct MHD_Connection *c,
                              const char *method, gw_req *q)
{
    const union MHD_ConnectionInfo *ci;
    gw_conn *conn;
    gw_answer a;
    enum MHD_Result ok;

    q->answered = 1;
    if (q->metrics)
        return reply_metrics(g, c);
    if (q->status)
        return reply_error(c, q->status, q->error, q->message);
    if (q->check_rc != RL_OK)
        return reply_check_failed(c, q->check_rc);
    if (!q->res.allowed)
        return reply_denied(c, &q->res);
    if (q->too_large)
        return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "payload_too_large",
                           "the body is over the gateway's limit");
    if (!g->upstream)
        return reply(c, MHD_HTTP_OK, "text/plain", CANNED_BODY, &q->res);
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (!ci || !(conn = ci->socket_context))
        return MHD_NO;
    gw_upstream_forward(&conn->upstream,
                        &(gw_forward){.method = method, .target = q->target,
                                      .client_ip = q->ip, .body = q->body,
                                      .body_len = q->len, .conn = c},
                        &a);
    if (a.error[0]) {
        fprintf(stderr, "gateway: %s %s: %u: %s\n", method, q->target,
                a.status, a.error);
        gw_answer_free(&a);
        return reply_error(c, a.status,
                           a.status == MHD_HTTP_GATEWAY_TIMEOUT
                               ? "gateway_timeout" : "bad_gateway",
                           "the upstream did not answer");
    }
    ok = reply_upstream(c, &a, &q->res);
    gw_answer_free(&a);
    return ok;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *data,
                              size_t *size, void **ptr)
{
    gw *g = cls;
    gw_req *q = *ptr;

    (void)version;
    if (!q)
        return MHD_NO; /* the URI log callback ran out of memory */
    if (!q->started) {
        /* A refusal of a request with a body is answered now, so that
         * the body is never read (libmicrohttpd then closes the
         * connection); without one it waits for the end of the request,
         * which keeps the connection alive. */
        begin(g, c, url, method, q);
        if (refused(q) && has_body(c))
            return finish(g, c, method, q);
        return MHD_YES;
    }
    if (*size) {
        if (!q->answered)
            take_body(g, q, data, *size);
        *size = 0;
        return MHD_YES;
    }
    if (q->answered)
        return MHD_YES;
    return finish(g, c, method, q);
}

/* Called with the request-target as the client sent it, before
 * libmicrohttpd decodes it: its answer becomes the request's *ptr. */
static void *request_start(void *cls, const char *uri,
                           struct MHD_Connection *c)
{
    gw_req *q = calloc(1, sizeof *q);

    (void)cls;
    (void)c;
    if (q && !(q->target = strdup(uri))) {
        free(q);
        return NULL;
    }
    if (q)
        q->res = (rl_result)RL_RESULT_INIT;
    return q;
}

static void request_done(void *cls, struct MHD_Connection *c, void **ptr,
                         enum MHD_RequestTerminationCode why)
{
    gw_req *q = *ptr;

    (void)cls;
    (void)c;
    (void)why;
    if (q) {
        free(q->target);
        free(q->body);
        free(q);
    }
    *ptr = NULL;
}

static void connection_event(void *cls, struct MHD_Connection *c,
                             void **socket_context,
                             enum MHD_ConnectionNotificationCode what)
{
    gw_conn *conn = *socket_context;

    (void)cls;
    (void)c;
    if (what == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = calloc(1, sizeof(gw_conn));
    } else if (conn) {
        gw_upstream_handle_free(conn->upstream);
        free(conn);
        *socket_context = NULL;
    }
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
    fprintf(stderr, "gateway: http: %s\n", buf);
}

/* ---- the command line ---------------------------------------------------- */

static int bad_arg(const char *fmt, const char *arg)
{
    fprintf(stderr, "gateway: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'gateway --help'.\n");
    return -1;
}

/* 0: run; 1: --help or --version was printed; -1: a message was
 * printed. */
static int parse_args(int argc, char **argv, gw_opts *o)
{
    static const struct option longs[] = {
        {"listen", required_argument, NULL, 'l'},
        {"store", required_argument, NULL, 's'},
        {"rules", required_argument, NULL, 'r'},
        {"upstream", required_argument, NULL, 'u'},
        {"metrics", required_argument, NULL, 'm'},
        {"set", required_argument, NULL, 'o'},
        {"port-file", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    int ch;

    *o = (gw_opts){.store = "memory://", .metrics = 1};
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":", longs, NULL)) != -1) {
        switch (ch) {
        case 'l': o->listen = optarg; break;
        case 's': o->store = optarg; break;
        case 'r': o->rules = optarg; break;
        case 'u': o->upstream = optarg; break;
        case 'p': o->port_file = optarg; break;
        case 'h': fputs(usage_text, stdout); return 1;
        case 'V':
            printf("gateway (libratelimit) %s\n", rl_version_string());
            return 1;
        case 'm':
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                return bad_arg("--metrics: '%s' is neither on nor off", optarg);
            o->metrics = strcmp(optarg, "on") == 0;
            break;
        case 'o':
            if (!strchr(optarg, '=') || optarg[0] == '=')
                return bad_arg("--set: '%s' is not NAME=VALUE", optarg);
            if (o->nsets == SETS_MAX)
                return bad_arg("--set: more than %s options", "32");
            o->sets[o->nsets++] = optarg;
            break;
        case ':':
            return bad_arg("%s needs a value", argv[optind - 1]);
        default:
            return bad_arg("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return bad_arg("unexpected argument '%s'", argv[optind]);
    if (!o->listen)
        return bad_arg("%s is required", "--listen [ADDR:]PORT");
    return 0;
}

/* "PORT" or "ADDR:PORT" (IPv4) into *sa; -1 with a message. */
static int parse_listen(const char *s, struct sockaddr_in *sa)
{
    const char *colon = strrchr(s, ':'), *port = colon ? colon + 1 : s;
    char addr[INET_ADDRSTRLEN];
    char *end;
    long n;

    *sa = (struct sockaddr_in){.sin_family = AF_INET,
                               .sin_addr.s_addr = htonl(INADDR_ANY)};
    errno = 0;
    n = strtol(port, &end, 10);
    if (*port < '0' || *port > '9' || *end || errno || n < 0 || n > 65535)
        return bad_arg("--listen: '%s' has no port 0..65535", s);
    sa->sin_port = htons((uint16_t)n);
    if (!colon)
        return 0;
    if ((size_t)(colon - s) >= sizeof addr)
        return bad_arg("--listen: '%s' has no IPv4 address", s);
    memcpy(addr, s, (size_t)(colon - s));
    addr[colon - s] = '\0';
    if (inet_pton(AF_INET, addr, &sa->sin_addr) != 1)
        return bad_arg("--listen: '%s' has no IPv4 address", s);
    return 0;
}

/* ---- start and stop --------------------------------------------------------- */

/* 0, or the exit status: 2 for an option the library refused, 1 when the
 * limiter would not open (the store away, the rules unreadable). */
static int open_limiter(const gw_opts *o, rl_limiter **lim)
{
    rl_config *cfg = rl_config_new();
    int rc = cfg ? RL_OK : RL_ENOMEM;
    char name[64];

    if (rc == RL_OK)
        rc = rl_config_set(cfg, "store", o->store);
    if (rc == RL_OK && o->rules)
        rc = rl_config_set(cfg, "rules_file", o->rules);
    if (rc == RL_OK)
        rc = rl_config_set(cfg, "metrics", o->metrics ? "1" : "0");
    for (size_t i = 0; rc == RL_OK && i < o->nsets; i++) {
        size_t n = (size_t)(strchr(o->sets[i], '=') - o->sets[i]);
        snprintf(name, sizeof name, "%.*s", (int)n, o->sets[i]);
        rc = rl_config_set(cfg, name, o->sets[i] + n + 1);
    }
    if (rc != RL_OK) { /* an argument the library refused */
        fprintf(stderr, "gateway: %s\nTry 'gateway --help'.\n",
                rl_errmsg(NULL));
        rl_config_free(cfg);
        return 2;
    }
    if ((rc = rl_limiter_new(lim, cfg)) != RL_OK)
        fprintf(stderr, "gateway: %s\n", rl_errmsg(NULL));
    rl_config_free(cfg);
    return rc == RL_OK ? 0 : 1;
}

/* A listening socket on sa; its port in *port.  -1 with a message. */
static int listen_on(const char *spec, struct sockaddr_in *sa, unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    socklen_t len = sizeof *sa;

    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)sa, sizeof *sa) != 0 ||
        listen(fd, LISTEN_BACKLOG) != 0 ||
        getsockname(fd, (struct sockaddr *)sa, &len) != 0) {
        fprintf(stderr, "gateway: cannot listen on %s: %s\n", spec,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa->sin_port);
    return fd;
}

static struct MHD_Daemon *start_http(gw *g, int fd)
{
    return MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, handle, g,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_URI_LOG_CALLBACK, request_start, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL,
        MHD_OPTION_NOTIFY_CONNECTION, connection_event, NULL,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTION_LIMIT,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
        MHD_OPTION_END);
}

static int write_port(const char *path, unsigned port)
{
    FILE *f = fopen(path, "w");

    if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0) {
        fprintf(stderr, "gateway: cannot write %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* Serve until SIGINT or SIGTERM. */
static int serve(gw *g, const gw_opts *o, int fd, unsigned port)
{
    struct MHD_Daemon *d = start_http(g, fd);
    int sig;
    sigset_t stop;

    if (!d) {
        fprintf(stderr, "gateway: libmicrohttpd would not start\n");
        close(fd);
        return -1;
    }
    if (o->port_file && write_port(o->port_file, port) != 0) {
        MHD_stop_daemon(d);
        return -1;
    }
    fprintf(stderr, "gateway: listening on port %u; %s; /metrics %s\n", port,
            o->upstream ? "admitted requests go upstream"
                        : "admitted requests get 200",
            o->metrics ? "on" : "off");
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigwait(&stop, &sig);
    MHD_stop_daemon(d); /* joins the connections' threads, closes fd */
    return 0;
}

int main(int argc, char **argv)
{
    gw_opts o;
    gw g = {0};
    struct sockaddr_in sa;
    sigset_t stop;
    char err[256];
    unsigned port;
    int fd, rc;

    if ((rc = parse_args(argc, argv, &o)) != 0)
        return rc > 0 ? 0 : 2;
    if (parse_listen(o.listen, &sa) != 0)
        return 2;
    if (gw_upstream_init(o.upstream, err, sizeof err) != 0) {
        fprintf(stderr, "gateway: %s\n", err);
        return 2;
    }
    /* Every thread started from here on inherits these: the signals
     * reach sigwait() only, and a write to a closed socket is an error. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = open_limiter(&o, &g.lim)) != 0 ||
        (fd = listen_on(o.listen, &sa, &port)) < 0) {
        rl_limiter_free(g.lim);
        gw_upstream_cleanup();
        return rc ? rc : 1;
    }
    g.metrics = o.metrics;
    g.upstream = o.upstream != NULL;
    rc = serve(&g, &o, fd, port);
    rl_limiter_free(g.lim);
    gw_upstream_cleanup();
    return rc == 0 ? 0 : 1;
}
