/*
 * fuzz_uri.c -- store URIs (redis://, unix://, redis-cluster://,
 * redis-sentinel://), from an operator's configuration.  Whatever parses
 * must be usable as is: a host or a socket path, a port in range, NUL-free
 * credentials; a seed list of 1..16 TCP seeds, database 0; a list of
 * 1..16 sentinels and a master name.
 *
 * And no password ever shows.  The input is also taken apart as
 * "<password middle>\t<rest>": a password made of two markers around the
 * middle is planted in every shape of credentials (":pw@", "user:pw@",
 * "pw@", the password %-encoded) of every scheme, before the rest, and
 * neither marker may appear in a parser's message, in a parsed host or
 * socket path (what messages name a server by), or in the redacted form.
 * Where the rest holds no '@' and the shape is well formed, the parsed
 * password must be exactly the planted one: raw '@', '/', '?', ':' in a
 * password are taken as they are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "redis_uri.h"

#define MARK_A "Zq7SeCrEtA"
#define MARK_B "Zq7SeCrEtB"

static int shows(const char *text, const char *mark)
{
    return strstr(text, mark) != NULL;
}

/* The sentinel parser: neither marker in its message, the sentinels'
 * hosts or the master's name; *pw: the password it took, if it parsed. */
static int sentinel_hides(const char *uri, char *pw, size_t len)
{
    char err[300], name[128];
    redis_uri m, s[16];
    int n, rc;

    memset(err, 0, sizeof err);
    rc = redis_uri_parse_sentinel(uri, &m, s, 16, &n, name, sizeof name, err,
                                  sizeof err);
    FUZZ_CHECK(!shows(err, MARK_A) && !shows(err, MARK_B));
    for (int i = 0; rc == 0 && i < n; i++)
        FUZZ_CHECK(!shows(s[i].host, MARK_A) && !shows(s[i].host, MARK_B));
    FUZZ_CHECK(rc != 0 || (!shows(name, MARK_A) && !shows(name, MARK_B)));
    if (rc == 0)
        snprintf(pw, len, "%s", m.password);
    return rc;
}

/* Neither marker in any of the texts a message could be made of. */
static void assert_hidden(const char *uri, int is_cluster)
{
    char err[300], shown[160], pw[256];
    redis_uri u, seeds[16];
    int n;

    (void)sentinel_hides(uri, pw, sizeof pw);
    memset(err, 0, sizeof err);
    if (redis_uri_parse(uri, &u, err, sizeof err) == 0) {
        FUZZ_CHECK(!shows(u.host, MARK_A) && !shows(u.host, MARK_B));
        FUZZ_CHECK(!shows(u.path, MARK_A) && !shows(u.path, MARK_B));
    }
    FUZZ_CHECK(!shows(err, MARK_A) && !shows(err, MARK_B));
    if (is_cluster) {
        memset(err, 0, sizeof err);
        if (redis_uri_parse_cluster(uri, seeds, 16, &n, err, sizeof err) == 0)
            for (int i = 0; i < n; i++)
                FUZZ_CHECK(!shows(seeds[i].host, MARK_A) &&
                           !shows(seeds[i].host, MARK_B));
        FUZZ_CHECK(!shows(err, MARK_A) && !shows(err, MARK_B));
    }
    redis_uri_redact(uri, shown, sizeof shown);
    FUZZ_CHECK(!shows(shown, MARK_A) && !shows(shown, MARK_B));
}

/* The password a well-formed URI carries is the planted one. */
static void assert_password(const char *uri, int is_cluster, const char *pw)
{
    char err[300];
    redis_uri u, seeds[16];
    int n;

    char got[256];

    if (strncmp(uri, "redis-sentinel://", 17) == 0) {
        if (sentinel_hides(uri, got, sizeof got) == 0)
            FUZZ_CHECK(strcmp(got, pw) == 0);
    } else if (is_cluster) {
        if (redis_uri_parse_cluster(uri, seeds, 16, &n, err, sizeof err) == 0)
            FUZZ_CHECK(strcmp(seeds[0].password, pw) == 0);
    } else if (redis_uri_parse(uri, &u, err, sizeof err) == 0) {
        FUZZ_CHECK(strcmp(u.password, pw) == 0);
    }
}

static void plant(const char *middle, size_t mlen, const char *rest)
{
    static const char *const schemes[] = {"redis://", "unix://",
                                          "redis-cluster://",
                                          "redis-sentinel://"};
    size_t pwlen = strlen(MARK_A) + mlen + strlen(MARK_B);
    char *pw = malloc(pwlen + 1), *enc = malloc(3 * pwlen + 1);
    char *uri = malloc(3 * pwlen + strlen(rest) + 64);
    int plain_pw = 1;

    FUZZ_CHECK(pw && enc && uri);
    snprintf(pw, pwlen + 1, "%s%.*s%s", MARK_A, (int)mlen, middle, MARK_B);
    for (size_t i = 0; i < pwlen; i++) {
        snprintf(enc + 3 * i, 4, "%%%02X", (unsigned char)pw[i]);
        if (pw[i] == '%' || (unsigned char)pw[i] < 0x21 || pw[i] == 0x7f)
            plain_pw = 0;
    }
    for (int s = 0; s < 4; s++) {
        /* ":pw@", "app:pw@", "pw@" (refused, yet hidden), ":%XX..@" */
        static const char *const before[] = {":", "app:", "", ":"};
        for (int k = 0; k < 4; k++) {
            sprintf(uri, "%s%s%s@%s", schemes[s], before[k],
                    k == 3 ? enc : pw, rest);
            assert_hidden(uri, s == 2);
            if (!strchr(rest, '@') && (k == 3 || (k < 2 && plain_pw)))
                assert_password(uri, s == 2, pw);
        }
    }
    free(pw);
    free(enc);
    free(uri);
}

int fuzz_uri(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), err[200], shown[160];
    redis_uri u, seeds[16];
    int n = -1;

    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data, size);
    buf[size] = '\0';
    if (redis_uri_parse(buf, &u, err, sizeof err) == 0) {
        FUZZ_CHECK(u.is_unix ? u.path[0] == '/' : u.host[0] != '\0');
        FUZZ_CHECK(u.is_unix || (u.port >= 1 && u.port <= 65535));
        FUZZ_CHECK(u.db >= 0);
        FUZZ_CHECK(!u.user[0] || u.password[0]);
        FUZZ_CHECK(!strchr(u.host, '@')); /* the credentials end at the last */
    } else {
        FUZZ_CHECK(err[0] != '\0');
    }
    if (redis_uri_parse_cluster(buf, seeds, 16, &n, err, sizeof err) == 0) {
        FUZZ_CHECK(n >= 1 && n <= 16);
        for (int i = 0; i < n; i++) {
            FUZZ_CHECK(!seeds[i].is_unix && seeds[i].host[0] != '\0');
            FUZZ_CHECK(seeds[i].port >= 1 && seeds[i].port <= 65535);
            FUZZ_CHECK(seeds[i].db == 0);
            FUZZ_CHECK(strcmp(seeds[i].password, seeds[0].password) == 0);
        }
    } else {
        FUZZ_CHECK(err[0] != '\0');
    }
    {
        char name[128];
        redis_uri m;
        if (redis_uri_parse_sentinel(buf, &m, seeds, 16, &n, name,
                                     sizeof name, err, sizeof err) == 0) {
            FUZZ_CHECK(n >= 1 && n <= 16 && name[0] != '\0');
            FUZZ_CHECK(!strchr(name, '/') && m.db >= 0);
            FUZZ_CHECK(!m.user[0] || m.password[0]);
            for (int i = 0; i < n; i++) {
                FUZZ_CHECK(!seeds[i].is_unix && seeds[i].host[0] != '\0');
                FUZZ_CHECK(seeds[i].port >= 1 && seeds[i].port <= 65535);
            }
        } else {
            FUZZ_CHECK(err[0] != '\0');
        }
    }
    /* the redacted form is printable, whatever the input */
    redis_uri_redact(buf, shown, sizeof shown);
    for (const char *c = shown; *c; c++)
        FUZZ_CHECK((unsigned char)*c >= 0x21 && *c != 0x7f);

    /* the planted password, before whatever follows the first tab */
    const char *tab = memchr(buf, '\t', strlen(buf)), *rest;
    size_t mlen = tab ? (size_t)(tab - buf) : strlen(buf);
    rest = tab ? tab + 1 : "127.0.0.1:6379/0";
    if (!strstr(rest, MARK_A) && !strstr(rest, MARK_B)) {
        plant(buf, mlen, rest);
        if (!tab) {
            plant(buf, mlen, "/tmp/redis.sock?db=1");
            plant(buf, mlen, "10.0.0.1:7000,10.0.0.2:7001");
            plant(buf, mlen, "10.0.0.1,10.0.0.2:26380/mymaster/2");
        }
    }
    free(buf);
    return 0;
}

#ifdef FUZZ_TARGET_uri
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_uri(data, size);
}
#endif
