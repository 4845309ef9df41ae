/*
 * etag.c -- entity tags for rules and the rule set (see request.h).  A tag
 * is the version in quotes: a rule's tag changes with every write to it, the
 * set's with every change, so If-Match on a stale tag is a lost update
 * caught (412) and If-None-Match on a current one a 304.
 */
#include "request.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void etag_format(int64_t version, char *buf)
{
    snprintf(buf, ETAG_MAX, "\"%" PRId64 "\"", version);
}

static const char *skip_list_space(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == ',')
        s++;
    return s;
}

/* One entity tag at s: sets *weak, *value (-1 if not ours), returns the
 * byte after it, or NULL if it is malformed. */
static const char *one_tag(const char *s, int *weak, int64_t *value)
{
    int64_t v = 0;
    int digits = 0, ours = 1;

    *weak = strncmp(s, "W/", 2) == 0;
    if (*weak)
        s += 2;
    if (*s++ != '"')
        return NULL;
    for (; *s && *s != '"'; s++) {
        if (!isdigit((unsigned char)*s) || digits >= 18) {
            ours = 0;
            continue;
        }
        v = v * 10 + (*s - '0');
        digits++;
    }
    if (*s != '"')
        return NULL;
    *value = ours && digits ? v : -1;
    return s + 1;
}

int etag_is_any(const char *header)
{
    const char *s = skip_list_space(header);

    if (*s++ != '*')
        return 0;
    return *skip_list_space(s) == '\0';
}

int etag_matches(const char *header, int64_t version, int exists, int weak)
{
    const char *s = skip_list_space(header);
    int matched = 0, tag_weak;
    int64_t v;

    if (etag_is_any(header))
        return exists;
    if (!*s)
        return 0;
    while (*s) {
        if (!(s = one_tag(s, &tag_weak, &v)))
            return 0;
        if (exists && v == version && (weak || !tag_weak))
            matched = 1;
        if (*s && *s != ',' && *s != ' ' && *s != '\t')
            return 0;
        s = skip_list_space(s);
    }
    return matched;
}
