/*
 * redis_uri.c -- see redis_uri.h.  A small hand-written parser: the URI
 * comes from an operator's configuration, so every way it can be wrong gets
 * its own message, and nothing is guessed.
 */
#include "redis_uri.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) (snprintf(err, errlen, __VA_ARGS__), -1)

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* Copy s[0..n) into out (size cap), decoding %XX; -1 if bad or too long. */
static int decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0)
                return -1;
            c = hexval(s[i + 1]) * 16 + hexval(s[i + 2]);
            i += 2;
        }
        if (c == 0 || o + 1 >= cap)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

/* A decimal number in [lo, hi] spanning exactly s[0..n). */
static int number(const char *s, size_t n, long lo, long hi, int *out)
{
    long v = 0;

    if (n == 0 || n > 9)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* Where a URI's scheme ends: just past "://" if what precedes it looks
 * like a scheme (letters, digits, '+', '-', '.'), else 0. */
static size_t authority_start(const char *uri)
{
    size_t n = strspn(uri, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                           "0123456789+-.");

    return n > 0 && strncmp(uri + n, "://", 3) == 0 ? n + 3 : 0;
}

/*
 * The credentials of uri, by the grammar of redis_uri.h: 1 with them at
 * uri[*begin .. *end) and uri[*end] == '@', or 0 if there are none.  One
 * function for the parser and for redis_uri_redact(), so the two always agree.
 */
static int credentials(const char *uri, size_t *begin, size_t *end)
{
    size_t b = authority_start(uri);
    const char *rest = uri + b, *at = strrchr(rest, '@');

    if (!at)
        return 0;
    if (strncmp(uri, "unix://", 7) == 0 && *rest == '/') {
        /* the path first: no credentials, unless someone wrote them
         * after a slash ("unix:///:pw@/path"), which parse refuses */
        const char *p = rest, *last = NULL;
        while ((p = strstr(p, "@/")) != NULL)
            last = p++;
        if (!last)
            return 0;
        at = last;
    }
    *begin = b;
    *end = (size_t)(at - uri);
    return 1;
}

/* "[user]:password@" at the start of `*rest` (uri + the scheme), if the URI
 * has credentials; *rest moves past them.  No message quotes them. */
static int userinfo(const char *uri, const char **rest, redis_uri *u,
                    char *err, size_t errlen)
{
    size_t b, e;
    const char *s, *at, *colon;

    if (!credentials(uri, &b, &e))
        return 0;
    s = uri + b;
    at = uri + e;
    if (u->is_unix && *s == '/')
        return FAIL("credentials must come before the socket path "
                    "(unix://:password@/path); a path may not hold \"@/\"");
    colon = memchr(s, ':', (size_t)(at - s));
    if (!colon)
        return FAIL("credentials must be user:password@ or :password@");
    if (decode(s, (size_t)(colon - s), u->user, sizeof u->user) ||
        decode(colon + 1, (size_t)(at - colon - 1), u->password,
               sizeof u->password))
        return FAIL("user or password: bad %%-escape, NUL or too long");
    if (!u->password[0])
        return FAIL("password: empty (leave out the '@' part for none)");
    *rest = at + 1;
    return 0;
}

static int parse_tcp(const char *s, redis_uri *u, char *err, size_t errlen)
{
    const char *host = s, *hend, *p;

    if (*s == '[') { /* [IPv6] */
        if (!(hend = strchr(s, ']')))
            return FAIL("host: '[' without ']'");
        host = s + 1;
        p = hend + 1;
    } else {
        hend = s + strcspn(s, ":/");
        p = hend;
    }
    if (hend == host)
        return FAIL("host: missing");
    if ((size_t)(hend - host) >= sizeof u->host)
        return FAIL("host: longer than %zu bytes", sizeof u->host - 1);
    memcpy(u->host, host, (size_t)(hend - host));
    u->host[hend - host] = '\0';
    u->port = 6379;
    if (*p == ':') {
        size_t n = strcspn(p + 1, "/");
        if (number(p + 1, n, 1, 65535, &u->port))
            return FAIL("port: must be 1..65535");
        p += 1 + n;
    }
    if (*p == '/' && p[1] && number(p + 1, strlen(p + 1), 0, 1000000, &u->db))
        return FAIL("db: \"%.20s\" is not a database number", p + 1);
    if (*p && *p != '/')
        return FAIL("unexpected \"%.20s\" after the host", p);
    return 0;
}

static int parse_unix(const char *s, redis_uri *u, char *err, size_t errlen)
{
    size_t n = strcspn(s, "?");

    if (*s != '/')
        return FAIL("unix socket path must be absolute (with credentials, "
                    "it may not hold '@')");
    if (n >= sizeof u->path)
        return FAIL("unix socket path: longer than %zu bytes",
                    sizeof u->path - 1);
    memcpy(u->path, s, n);
    u->path[n] = '\0';
    s += n;
    if (*s == '?') {
        if (strncmp(s, "?db=", 4) ||
            number(s + 4, strlen(s + 4), 0, 1000000, &u->db))
            return FAIL("only ?db=N may follow the socket path");
    }
    return 0;
}

int redis_uri_parse(const char *uri, redis_uri *u, char *err, size_t errlen)
{
    const char *rest;

    memset(u, 0, sizeof *u);
    if (strncmp(uri, "redis://", 8) == 0) {
        rest = uri + 8;
    } else if (strncmp(uri, "unix://", 7) == 0) {
        rest = uri + 7;
        u->is_unix = 1;
    } else if (strncmp(uri, "rediss://", 9) == 0) {
        rest = uri + 9;
        u->tls = 1;
    } else {
        return FAIL("expected redis://, rediss:// or unix://");
    }
    for (const char *c = uri; *c; c++)
        if ((unsigned char)*c < 0x21 || *c == 0x7f)
            return FAIL("space or control byte in the URI");
    if (userinfo(uri, &rest, u, err, errlen))
        return -1;
    return u->is_unix ? parse_unix(rest, u, err, errlen)
                      : parse_tcp(rest, u, err, errlen);
}

int redis_uri_parse_cluster(const char *uri, redis_uri *seeds, int max,
                            int *n, char *err, size_t errlen)
{
    const char *p, *end, *slash;
    char one[700];
    size_t cred = 0, b, e;
    int tls = strncmp(uri, "rediss-cluster://", 17) == 0;

    *n = 0;
    if (!tls && strncmp(uri, "redis-cluster://", 16) != 0)
        return FAIL("expected redis-cluster:// or rediss-cluster://");
    b = tls ? 17 : 16;
    p = uri + b;
    if (credentials(uri, &b, &e)) {
        cred = e + 1 - b; /* "user:password@", checked with each seed */
        p = uri + e + 1;
    }
    slash = strchr(p, '/');
    end = slash ? slash : p + strlen(p);
    if (slash && strcmp(slash, "/0") != 0 && strcmp(slash, "/") != 0)
        return FAIL("a cluster has database 0 only (found \"%.20s\")",
                    slash);
    if (p == end)
        return FAIL("no seed node (expected host:port[,host:port...])");
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t len = (size_t)((comma ? comma : end) - p);
        char why[200];
        if (len == 0)
            return FAIL("empty seed in the list");
        if (*n == max)
            return FAIL("more than %d seeds", max);
        if (8 + cred + len >= sizeof one)
            return FAIL("seed too long");
        memcpy(one, "redis://", 8);
        memcpy(one + 8, uri + b, cred);
        memcpy(one + 8 + cred, p, len);
        one[8 + cred + len] = 0;
        if (redis_uri_parse(one, &seeds[*n], why, sizeof why) != 0)
            return FAIL("seed %d (%.*s): %s", *n + 1, (int)len, p, why);
        seeds[*n].tls = tls;
        ++*n;
        p += len + (comma ? 1 : 0);
        if (comma && p == end)
            return FAIL("empty seed in the list");
    }
    return 0;
}

/* One sentinel's "host[:port]" (s[0..len)) into *u, port 26379 unless
 * given. */
static int parse_sentinel_addr(const char *s, size_t len, redis_uri *u,
                               char *err, size_t errlen)
{
    char one[300], why[200];
    const char *close = memchr(s, ']', len);
    int has_port = *s == '[' ? close && close + 1 < s + len
                             : memchr(s, ':', len) != NULL;

    if (len == 0)
        return FAIL("empty sentinel in the list");
    if (len + 9 >= sizeof one)
        return FAIL("sentinel too long");
    snprintf(one, sizeof one, "redis://%.*s", (int)len, s);
    if (redis_uri_parse(one, u, why, sizeof why) != 0 || strchr(one + 8, '/'))
        return FAIL("sentinel \"%.*s\": %s", (int)(len > 60 ? 60 : len), s,
                    strchr(one + 8, '/') ? "a '/' in it" : why);
    if (!has_port)
        u->port = REDIS_SENTINEL_PORT;
    return 0;
}

/* "/name" or "/name/db" at s: the master's name and database. */
static int parse_master_name(const char *s, redis_uri *master, char *name,
                             size_t namelen, char *err, size_t errlen)
{
    const char *slash;
    size_t n;

    if (*s != '/' || !s[1])
        return FAIL("no master name (expected .../<master-name>)");
    s++;
    slash = strchr(s, '/');
    n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= namelen)
        return FAIL("master name: empty or longer than %zu bytes",
                    namelen - 1);
    memcpy(name, s, n);
    name[n] = '\0';
    if (slash && slash[1] &&
        number(slash + 1, strlen(slash + 1), 0, 1000000, &master->db))
        return FAIL("db: \"%.20s\" is not a database number", slash + 1);
    return 0;
}

int redis_uri_parse_sentinel(const char *uri, redis_uri *master,
                             redis_uri *sentinels, int max, int *n,
                             char *name, size_t namelen, char *err,
                             size_t errlen)
{
    const char *p, *end;
    int tls = strncmp(uri, "rediss-sentinel://", 18) == 0;

    *n = 0;
    memset(master, 0, sizeof *master);
    if (!tls && strncmp(uri, "redis-sentinel://", 17) != 0)
        return FAIL("expected redis-sentinel:// or rediss-sentinel://");
    for (const char *c = uri; *c; c++)
        if ((unsigned char)*c < 0x21 || *c == 0x7f)
            return FAIL("space or control byte in the URI");
    p = uri + (tls ? 18 : 17);
    if (userinfo(uri, &p, master, err, errlen))
        return -1;
    end = p + strcspn(p, "/");
    if (p == end)
        return FAIL("no sentinel (expected host:port[,host:port...])");
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t len = (size_t)((comma ? comma : end) - p);
        if (*n == max)
            return FAIL("more than %d sentinels", max);
        if (parse_sentinel_addr(p, len, &sentinels[*n], err, errlen))
            return -1;
        sentinels[(*n)++].tls = tls;
        p += len + (comma ? 1 : 0);
        if (comma && p == end)
            return FAIL("empty sentinel in the list");
    }
    master->tls = tls;
    master->port = 6379;
    return parse_master_name(end, master, name, namelen, err, errlen);
}

void redis_uri_redact(const char *uri, char *out, size_t len)
{
    size_t b, e;

    if (len == 0)
        return;
    if (credentials(uri, &b, &e))
        snprintf(out, len, "%.*s***%.100s", (int)b, uri, uri + e);
    else
        snprintf(out, len, "%.120s", uri);
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x21 || *c == 0x7f)
            *c = '?';
}
