/*
 * redis_harness_client.c -- talking to a running server: the harness's
 * own connections (loopback, AUTHed, with timeouts) and what the server
 * says through them (INFO fields, command statistics), and the redis://
 * URI a test hands the library.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "redis_harness_impl.h"

#include <sys/time.h>

/* ---- hiredis helpers ---------------------------------------------------- */

static struct timeval tv_ms(long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    return tv;
}

/* Value of `field` in an INFO reply, or -1. */
static long long info_field(const char *text, const char *field)
{
    size_t n = strlen(field);

    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, field, n) == 0 && p[n] == ':') {
            char *end;
            long long v;

            errno = 0;
            v = strtoll(p + n + 1, &end, 10);
            if (errno == 0 && end != p + n + 1 &&
                (*end == '\r' || *end == '\n' || *end == '\0'))
                return v;
            return -1;
        }
        if ((p = strchr(p, '\n')) != NULL)
            p++;
    }
    return -1;
}

long long rhi_query_info(redisContext *c, const char *section,
                         const char *field)
{
    redisReply *r = section ? redisCommand(c, "INFO %s", section)
                            : redisCommand(c, "INFO");
    long long v = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = info_field(r->str, field);
    freeReplyObject(r);
    return v;
}

/* 0 if the reply is the status `want`; else -1 with the reason in err.
 * Frees the reply. */
int rhi_reply_ok(redisContext *c, redisReply *r, const char *want, char *err,
                 size_t len)
{
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS &&
             strcmp(r->str, want) == 0;

    if (!ok)
        snprintf(err, len, "%s", r == NULL ? c->errstr
                                 : r->type == REDIS_REPLY_ERROR ? r->str
                                 : "unexpected reply");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* A TCP context, AUTHed and PINGed, or NULL with the reason in err. */
redisContext *rhi_open_ctx(const rh_server *s, long ms, char *err,
                           size_t len)
{
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv_ms(ms));

    if (c == NULL || c->err) {
        snprintf(err, len, "connect 127.0.0.1:%d: %s", s->port,
                 c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, tv_ms(ms)) != REDIS_OK ||
        (s->password[0] != '\0' &&
         rhi_reply_ok(c, redisCommand(c, "AUTH %s", s->password), "OK",
                      err, len) != 0) ||
        rhi_reply_ok(c, redisCommand(c, "PING"), "PONG", err, len) != 0) {
        redisFree(c);
        return NULL;
    }
    return c;
}

redisContext *rh_connect(const rh_server *s)
{
    char err[256];
    redisContext *c = rhi_open_ctx(s, RH_CONNECT_MS, err, sizeof err);

    if (c == NULL)
        fprintf(stderr, "redis_harness: %s\n", err);
    return c;
}

long long rh_info_int(const rh_server *s, const char *section,
                      const char *field)
{
    char err[256];
    redisContext *c = rhi_open_ctx(s, RH_CONNECT_MS, err, sizeof err);
    long long v;

    if (c == NULL) {
        fprintf(stderr, "redis_harness: %s\n", err);
        return -1;
    }
    v = rhi_query_info(c, section, field);
    redisFree(c);
    return v;
}

/* The calls= count on the "cmdstat_<command>:" line of INFO commandstats
 * text, or 0 if there is no such line. */
static long long cmdstat_field(const char *text, const char *command)
{
    char head[96];
    int n = snprintf(head, sizeof head, "cmdstat_%s:", command);

    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, head, (size_t)n) == 0) {
            const char *calls = strstr(p + n, "calls=");

            return calls ? atoll(calls + strlen("calls=")) : -1;
        }
        if ((p = strchr(p, '\n')) != NULL)
            p++;
    }
    return 0;
}

long long rh_cmdstat_calls(const rh_server *s, const char *command)
{
    char err[256];
    redisContext *c = rhi_open_ctx(s, RH_CONNECT_MS, err, sizeof err);
    redisReply *r;
    long long v = -1;

    if (c == NULL) {
        fprintf(stderr, "redis_harness: %s\n", err);
        return -1;
    }
    r = redisCommand(c, "INFO commandstats");
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = cmdstat_field(r->str, command);
    else
        fprintf(stderr, "redis_harness: INFO commandstats: %s\n",
                r == NULL ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str
                                                          : "not a string");
    freeReplyObject(r);
    redisFree(c);
    return v;
}

char *rh_uri(const rh_server *s, char *buf, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char pw[3 * sizeof s->password] = "", *q = pw;
    int n;

    /* RFC 3986 userinfo: unreserved characters as they are, the rest %HH. */
    for (const unsigned char *p = (const unsigned char *)s->password; *p;
         p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
            (*p >= '0' && *p <= '9') || strchr("-._~", *p) != NULL) {
            *q++ = (char)*p;
        } else {
            *q++ = '%';
            *q++ = hex[*p >> 4];
            *q++ = hex[*p & 15];
        }
    }
    *q = '\0';
    n = snprintf(buf, len, "redis://%s%s%s127.0.0.1:%d/0", pw[0] ? ":" : "",
                 pw, pw[0] ? "@" : "", s->port);
    return n >= 0 && (size_t)n < len ? buf : NULL;
}
