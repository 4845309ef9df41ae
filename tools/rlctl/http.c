/*
 * http.c -- rlctl's one HTTP call to ratelimitd, over libcurl: a method, a
 * path under the server's base URL, an optional JSON body and conditional
 * header, a bearer token, one deadline for the whole exchange.  The answer
 * (status, ETag, body) comes back whole; nothing here interprets it, but
 * rlctl_status_exit() turns a refusal into plain words and an exit code.
 */
#include "rlctl.h"
#include "redis_uri.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BODY_MAX (64u << 20) /* bytes of an answer rlctl keeps */

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    rlctl_reply *r = arg;
    size_t add = size * n;
    char *grown;

    if (r->len + add > BODY_MAX)
        return 0; /* curl reports a write error */
    if (!(grown = realloc(r->body, r->len + add + 1)))
        return 0;
    memcpy(grown + r->len, data, add);
    r->body = grown;
    r->len += add;
    r->body[r->len] = 0;
    return add;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    rlctl_reply *r = arg;
    size_t len = size * n, v = 5;

    if (len > 5 && strncasecmp(data, "ETag:", 5) == 0) {
        while (v < len && (data[v] == ' ' || data[v] == '\t'))
            v++;
        while (len > v && (data[len - 1] == '\r' || data[len - 1] == '\n' ||
                           data[len - 1] == ' '))
            len--;
        if (len - v < sizeof r->etag) {
            memcpy(r->etag, data + v, len - v);
            r->etag[len - v] = 0;
        }
    }
    return size * n;
}

/* Add "Name: value" to the list unless value is NULL. */
static struct curl_slist *add_header(struct curl_slist *h, const char *name,
                                     const char *value)
{
    char line[RLCTL_TOKEN_MAX + 64];

    if (!value)
        return h;
    snprintf(line, sizeof line, "%s: %s", name, value);
    return curl_slist_append(h, line);
}

/* The body's raw control bytes (not its line breaks and tabs, which JSON
 * allows between tokens) made '?': whatever prints it whole prints no
 * terminal escape. */
static void clean_body(char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)b[i] < 0x20 && b[i] != '\n' && b[i] != '\t' &&
             b[i] != '\r') || b[i] == 0x7f)
            b[i] = '?';
}

int rlctl_http(const rlctl_opts *o, const char *method, const char *path,
               const char *body, const char *if_match,
               const char *if_none_match, rlctl_reply *r)
{
    char url[2048], auth[RLCTL_TOKEN_MAX + 16], shown[128];
    struct curl_slist *h = NULL;
    CURL *c = curl_easy_init();
    CURLcode rc;

    memset(r, 0, sizeof *r);
    if (!c) {
        snprintf(r->error, sizeof r->error, "cannot start libcurl");
        return RLCTL_UNREACHABLE;
    }
    snprintf(url, sizeof url, "%s%s", o->server, path);
    if (o->token[0]) {
        snprintf(auth, sizeof auth, "Bearer %s", o->token);
        h = add_header(h, "Authorization", auth);
    }
    h = add_header(h, "Content-Type", body ? "application/json" : NULL);
    h = add_header(h, "If-Match", if_match);
    h = add_header(h, "If-None-Match", if_none_match);
    h = add_header(h, "Expect", body ? "" : NULL); /* no 100-continue wait */
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, o->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, o->timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)strlen(body));
    }
    rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    } else { /* the URL may carry user:password@: never shown */
        redis_uri_redact(o->server, shown, sizeof shown);
        snprintf(r->error, sizeof r->error, "%s: %s", shown,
                 curl_easy_strerror(rc));
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r->body && (r->body = malloc(1)))
        r->body[0] = 0;
    if (r->body)
        clean_body(r->body, r->len);
    if (rc != CURLE_OK || !r->body) {
        r->status = 0;
        if (!r->error[0])
            snprintf(r->error, sizeof r->error, "out of memory");
        return RLCTL_UNREACHABLE;
    }
    return RLCTL_DONE;
}

void rlctl_reply_free(rlctl_reply *r)
{
    free(r->body);
    r->body = NULL;
}

void rlctl_put_clean(FILE *f, const char *s)
{
    for (; s && *s; s++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}


int rlctl_status_exit(const rlctl_reply *r, const char *what)
{
    json_t *doc, *msg;

    if (r->status == 0) {
        fprintf(stderr, "rlctl: %s: the rules service did not answer (",
                what);
        rlctl_put_clean(stderr, r->error);
        fputs(")\n", stderr);
        return RLCTL_UNREACHABLE;
    }
    if ((r->status >= 200 && r->status < 300) || r->status == 304)
        return RLCTL_DONE;
    fprintf(stderr, "rlctl: %s: refused (HTTP %ld)", what, r->status);
    doc = json_loads(r->body, 0, NULL);
    msg = doc ? json_object_get(doc, "message") : NULL;
    if (json_is_string(msg)) {
        fputs(": ", stderr);
        rlctl_put_clean(stderr, json_string_value(msg));
    }
    fputc('\n', stderr);
    json_decref(doc);
    if (r->status == 401)
        fputs("rlctl: give a token with --token-file or RLCTL_TOKEN_FILE\n",
              stderr);
    return r->status >= 500 ? RLCTL_UNREACHABLE : RLCTL_REFUSED;
}

int rlctl_read_token(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n;

    if (!f) {
        fprintf(stderr, "rlctl: cannot open the token file %s\n", path);
        return -1;
    }
    if (!fgets(out, (int)len, f)) {
        fclose(f);
        fprintf(stderr, "rlctl: the token file %s is empty\n", path);
        return -1;
    }
    fclose(f);
    n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r' ||
                 out[n - 1] == ' ' || out[n - 1] == '\t'))
        out[--n] = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] < 0x21 || out[i] == 0x7f) {
            fprintf(stderr, "rlctl: the token in %s holds a blank or a "
                    "control byte\n", path);
            return -1;
        }
    if (!n) {
        fprintf(stderr, "rlctl: the token file %s is empty\n", path);
        return -1;
    }
    return 0;
}

int rlctl_request(const rlctl_opts *o, const char *method, const char *path,
                  const char *body, const char *if_match,
                  const char *if_none_match, const char *what,
                  rlctl_reply *r)
{
    rlctl_http(o, method, path, body, if_match, if_none_match, r);
    return rlctl_status_exit(r, what);
}

const char *rlctl_etag(const char *v, char *buf, size_t len)
{
    if (!v || v[0] == '"' || strcmp(v, "*") == 0)
        return v;
    snprintf(buf, len, "\"%s\"", v);
    return buf;
}
