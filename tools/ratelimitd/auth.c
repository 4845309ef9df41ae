/*
 * auth.c -- bearer tokens from a file (see ratelimitd.h).
 *
 * The file holds "name:token" lines; the name is what the history records
 * as the author of a change, the token what a client sends as
 * "Authorization: Bearer <token>".  Tokens never come from the command line
 * (other users can read it in /proc) and are never logged.
 *
 * A presented token is compared with every known one in time that does not
 * depend on where they differ or on which one matches: both sides are
 * hashed (SHA-1, only to make them the same length) and the digests
 * compared with an OR of XORs, over all entries, without an early exit.
 */
#include "ratelimitd.h"
#include "sha1.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define DIGEST 41 /* sha1_hex: 40 digits and a NUL */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
#define LINE_MAX_BYTES 2048

typedef struct token {
    char name[AUTH_NAME_MAX + 1];
    char digest[DIGEST];
} token;

struct auth {
    size_t n;
    token *t;
};

void auth_free(auth *a)
{
    if (!a)
        return;
    if (a->t)
        memset(a->t, 0, a->n * sizeof *a->t);
    free(a->t);
    free(a);
}

static int token_valid(const char *s)
{
    size_t n = strlen(s);

    if (n < AUTH_TOKEN_MIN || n > AUTH_TOKEN_MAX)
        return 0;
    for (; *s; s++)
        if (*s <= ' ' || *s > '~')
            return 0;
    return 1;
}

/* One "name:token" line (trimmed) into a->t[a->n]. */
static int add_line(auth *a, char *line, int lineno, char *err, size_t errlen)
{
    char *colon = strchr(line, ':');
    size_t nlen;

    if (!colon)
        return snprintf(err, errlen, "line %d: not name:token", lineno), -1;
    *colon = '\0';
    nlen = strlen(line);
    if (nlen == 0 || nlen > AUTH_NAME_MAX || strspn(line, NAME_CHARS) != nlen)
        return snprintf(err, errlen,
                        "line %d: the name must be 1..%d bytes of A-Z a-z "
                        "0-9 . _ -", lineno, AUTH_NAME_MAX), -1;
    if (!token_valid(colon + 1))
        return snprintf(err, errlen,
                        "line %d: the token of %.64s must be %d..%d printable "
                        "bytes without spaces", lineno, line, AUTH_TOKEN_MIN,
                        AUTH_TOKEN_MAX), -1;
    token *t = realloc(a->t, (a->n + 1) * sizeof *t);
    if (!t)
        return snprintf(err, errlen, "out of memory"), -1;
    a->t = t;
    t = &a->t[a->n];
    memcpy(t->name, line, nlen + 1);
    sha1_hex(colon + 1, strlen(colon + 1), t->digest);
    memset(colon + 1, 0, strlen(colon + 1));
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->t[i].name, t->name) == 0)
            return snprintf(err, errlen, "line %d: name %s given twice",
                            lineno, t->name), -1;
        if (strcmp(a->t[i].digest, t->digest) == 0)
            return snprintf(err, errlen, "line %d: %s has the token of %s",
                            lineno, t->name, a->t[i].name), -1;
    }
    a->n++;
    return 0;
}

static char *trim(char *s)
{
    size_t n = strlen(s);

    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' ||
                 s[n - 1] == '\t'))
        s[--n] = '\0';
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* Refuse a file others may read or write; warn when the group may read. */
static int check_mode(FILE *f, const char *path, char *err, size_t errlen)
{
    struct stat st;

    if (fstat(fileno(f), &st) != 0)
        return snprintf(err, errlen, "%s: %s", path, strerror(errno)), -1;
    if (!S_ISREG(st.st_mode))
        return snprintf(err, errlen, "%s: not a regular file", path), -1;
    if (st.st_mode & S_IRWXO)
        return snprintf(err, errlen,
                        "%s: others may read or write it (mode %04o); "
                        "chmod o-rwx it", path,
                        (unsigned)(st.st_mode & 07777)), -1;
    if (st.st_mode & (S_IRGRP | S_IWGRP))
        log_line("warning: %s: its group may read or write it (mode %04o)",
                 path, (unsigned)(st.st_mode & 07777));
    return 0;
}

static int read_lines(auth *a, FILE *f, char *err, size_t errlen)
{
    char buf[LINE_MAX_BYTES];
    int lineno = 0, rc = 0;

    while (rc == 0 && fgets(buf, sizeof buf, f)) {
        size_t n = strlen(buf);
        int cut = n == sizeof buf - 1 && buf[n - 1] != '\n' && !feof(f);
        char *line = trim(buf);
        lineno++;
        if (cut) {
            snprintf(err, errlen, "line %d: too long", lineno);
            rc = -1;
        } else if (*line && *line != '#') {
            rc = add_line(a, line, lineno, err, errlen);
        }
    }
    memset(buf, 0, sizeof buf);
    if (rc == 0 && a->n == 0) {
        snprintf(err, errlen, "no name:token line");
        rc = -1;
    }
    return rc;
}

int auth_load(const char *path, auth **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    auth *a;
    char why[256];
    int rc;

    *out = NULL;
    if (!f)
        return snprintf(err, errlen, "%s: %s", path, strerror(errno)), -1;
    if (check_mode(f, path, err, errlen)) {
        fclose(f);
        return -1;
    }
    if (!(a = calloc(1, sizeof *a))) {
        fclose(f);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    rc = read_lines(a, f, why, sizeof why);
    fclose(f);
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, why);
        auth_free(a);
        return -1;
    }
    *out = a;
    return 0;
}

int auth_check(const auth *a, const char *header, const char **name)
{
    static const char scheme[] = "Bearer ";
    char digest[DIGEST];
    size_t found = 0;

    *name = NULL;
    if (!header || strncasecmp(header, scheme, sizeof scheme - 1) != 0)
        return AUTH_MISSING;
    header += sizeof scheme - 1;
    while (*header == ' ')
        header++;
    if (!*header)
        return AUTH_MISSING;
    sha1_hex(header, strlen(header), digest);
    for (size_t i = 0; i < a->n; i++) {
        unsigned diff = 0;
        for (size_t k = 0; k < DIGEST - 1; k++)
            diff |= (unsigned)(digest[k] ^ a->t[i].digest[k]);
        /* i + 1 when this one matched, else 0: no branch on the bytes */
        found |= (i + 1) & ((size_t)0 - (size_t)(diff == 0));
    }
    if (!found)
        return AUTH_WRONG;
    *name = a->t[found - 1].name;
    return AUTH_OK;
}
