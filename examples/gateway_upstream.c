/*
 * gateway_upstream.c -- the gateway's way to its upstream: an admitted
 * request passed on over HTTP/1.1 with libcurl, its answer brought back.
 *
 * One libcurl easy handle per client connection (created on its first
 * forwarded request, freed when the connection closes), so the upstream
 * connection is kept alive across that client's requests; a connection
 * is served by one thread (gateway.c), so a handle never has two users.
 * Every exchange is bounded: GW_UPSTREAM_CONNECT_MS to connect,
 * GW_UPSTREAM_TIMEOUT_MS in all (504 past it), GW_RESPONSE_BODY_MAX bytes
 * of answer (502 past it).  Hop-by-hop headers (RFC 9110 section 7.6.1)
 * are not passed on in either direction; X-Forwarded-For gets the client.
 */
#include "gateway.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char upstream_base[1024]; /* scheme://host[:port][/prefix], no '/' at the end */

/* Headers a proxy must not pass on, and those libcurl or libmicrohttpd
 * write themselves. */
static int skipped_header(const char *name, size_t n)
{
    static const char *const names[] = {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
        "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "host", "content-length", "expect", "x-forwarded-for"};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncasecmp(name, names[i], n) == 0)
            return 1;
    return 0;
}

int gw_upstream_init(const char *url, char *err, size_t errlen)
{
    CURLU *u;
    char *scheme = NULL, *host = NULL;
    size_t n;
    int bad;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return snprintf(err, errlen, "libcurl would not start"), -1;
    if (!url)
        return 0;
    if (!(u = curl_url()))
        return snprintf(err, errlen, "out of memory"), -1;
    bad = curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
          curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
          curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
          strcmp(scheme, "http") != 0 || strchr(url, '?') || strchr(url, '#');
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    if (bad || n >= sizeof upstream_base)
        return snprintf(err, errlen,
                        "--upstream: not an http://HOST[:PORT][/PREFIX] URL "
                        "(no query, at most %zu bytes)",
                        sizeof upstream_base - 1), -1;
    memcpy(upstream_base, url, n);
    upstream_base[n] = '\0';
    return 0;
}

void gw_upstream_cleanup(void)
{
    curl_global_cleanup();
}

void gw_upstream_handle_free(void *handle)
{
    if (handle)
        curl_easy_cleanup(handle);
}

void gw_answer_free(gw_answer *a)
{
    for (size_t i = 0; i < a->nheaders; i++)
        free(a->headers[i].name);
    a->nheaders = 0;
    free(a->body);
    a->body = NULL;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    gw_answer *a = arg;
    size_t len = size * n;

    if (a->body_len + len > GW_RESPONSE_BODY_MAX) {
        a->too_large = 1;
        return 0; /* libcurl stops: CURLE_WRITE_ERROR */
    }
    if (a->body_len + len > a->body_cap) {
        size_t cap = a->body_cap ? a->body_cap : 4096;
        char *b;
        while (cap < a->body_len + len)
            cap *= 2;
        if (!(b = realloc(a->body, cap)))
            return 0;
        a->body = b;
        a->body_cap = cap;
    }
    memcpy(a->body + a->body_len, p, len);
    a->body_len += len;
    return len;
}

/* One header line of the answer; a status line starts the headers over
 * (a 100 Continue before the real answer). */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    gw_answer *a = arg;
    size_t len = size * n, name_len;
    const char *colon = memchr(p, ':', len);
    gw_header *h;

    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        gw_answer_free(a);
        return len;
    }
    while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == '\n'))
        len--;
    if (!colon || (size_t)(colon - p) >= len ||
        a->nheaders == GW_UPSTREAM_HEADERS_MAX)
        return size * n;
    name_len = (size_t)(colon - p);
    if (name_len == 0 || skipped_header(p, name_len))
        return size * n;
    h = &a->headers[a->nheaders];
    if (!(h->name = malloc(len + 1)))
        return 0;
    memcpy(h->name, p, len);
    h->name[name_len] = '\0';
    h->name[len] = '\0';
    h->value = h->name + name_len + 1;
    while (*h->value == ' ' || *h->value == '\t')
        h->value++;
    a->nheaders++;
    return size * n;
}

typedef struct header_list {
    struct curl_slist *list;
    const char *client_ip;
    int forwarded_for; /* the client's own X-Forwarded-For was extended */
    int failed;
} header_list;

static int add_line(header_list *hl, const char *name, const char *sep,
                    const char *value)
{
    char line[8192];
    struct curl_slist *l;

    if (snprintf(line, sizeof line, "%s%s%s", name, sep, value) >=
        (int)sizeof line)
        return 0; /* longer than libmicrohttpd's limits let through */
    if (!(l = curl_slist_append(hl->list, line)))
        return hl->failed = 1, -1;
    hl->list = l;
    return 0;
}

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind,
                                   const char *name, const char *value)
{
    header_list *hl = cls;
    char xff[4096];

    (void)kind;
    if (strcasecmp(name, "X-Forwarded-For") == 0 && value && !hl->forwarded_for) {
        hl->forwarded_for = 1;
        snprintf(xff, sizeof xff, "%s, %s", value, hl->client_ip);
        return add_line(hl, name, ": ", xff) ? MHD_NO : MHD_YES;
    }
    if (skipped_header(name, strlen(name)))
        return MHD_YES;
    /* "Name;" is libcurl's way to send a header with an empty value. */
    return add_line(hl, name, value && *value ? ": " : ";", value ? value : "")
               ? MHD_NO : MHD_YES;
}

static void set_method(CURL *h, const gw_forward *f)
{
    int has_body = f->body_len > 0 || strcmp(f->method, "POST") == 0 ||
                   strcmp(f->method, "PUT") == 0 ||
                   strcmp(f->method, "PATCH") == 0;

    if (strcmp(f->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (has_body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, f->body ? f->body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)f->body_len);
        if (strcmp(f->method, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, f->method);
    } else if (strcmp(f->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, f->method);
    }
}

static void set_options(CURL *h, const gw_forward *f, const char *url,
                        struct curl_slist *headers, gw_answer *a)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, GW_UPSTREAM_CONNECT_MS);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, GW_UPSTREAM_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
    set_method(h, f);
}

static void fail(gw_answer *a, unsigned status, const char *why)
{
    gw_answer_free(a);
    a->status = status;
    a->body_len = 0;
    snprintf(a->error, sizeof a->error, "%s", why);
}

void gw_upstream_forward(void **handle, const gw_forward *f, gw_answer *a)
{
    header_list hl = {.client_ip = f->client_ip};
    char url[sizeof upstream_base + 8192];
    CURLcode rc;
    long code = 0;

    *a = (gw_answer){0};
    if (!*handle && !(*handle = curl_easy_init()))
        return fail(a, 502, "out of memory");
    curl_easy_reset(*handle); /* the options go; the connection stays */
    if (snprintf(url, sizeof url, "%s%s", upstream_base, f->target) >=
        (int)sizeof url)
        return fail(a, 502, "the target is too long");
    MHD_get_connection_values(f->conn, MHD_HEADER_KIND, copy_header, &hl);
    if (!hl.forwarded_for)
        add_line(&hl, "X-Forwarded-For", ": ", f->client_ip);
    add_line(&hl, "Expect", ":", ""); /* no 100-continue round trip */
    if (hl.failed) {
        curl_slist_free_all(hl.list);
        return fail(a, 502, "out of memory");
    }
    set_options(*handle, f, url, hl.list, a);
    rc = curl_easy_perform(*handle);
    curl_slist_free_all(hl.list);
    curl_easy_getinfo(*handle, CURLINFO_RESPONSE_CODE, &code);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return fail(a, 504, "the upstream timed out");
    if (a->too_large)
        return fail(a, 502, "the upstream's answer is too large");
    if (rc != CURLE_OK || code < 100 || code > 999)
        return fail(a, 502, curl_easy_strerror(rc));
    a->status = (unsigned)code;
}
