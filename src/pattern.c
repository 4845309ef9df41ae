/*
 * pattern.c -- see pattern.h.  The matcher is a dynamic programme over
 * pattern positions, rolled over the endpoint's bytes: reach[i] says whether
 * the first i pattern bytes can match the endpoint read so far.  Patterns are
 * at most RL_PATTERN_MAX bytes, so the table lives on the stack.
 */
#include "pattern.h"

#include <stdio.h>
#include <string.h>

int pattern_check(const char *pat, char *err, size_t errlen)
{
    size_t n = strlen(pat);

    if (n == 0)
        return snprintf(err, errlen, "match.endpoint: empty pattern"), -1;
    if (n > RL_PATTERN_MAX)
        return snprintf(err, errlen, "match.endpoint: longer than %d bytes",
                        RL_PATTERN_MAX), -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)pat[i];
        if (ch < 0x21 || ch == 0x7f)
            return snprintf(err, errlen,
                            "match.endpoint: control or space byte at %zu",
                            i), -1;
        if (ch == '*' && pat[i + 1] == '*' && pat[i + 2] == '*')
            return snprintf(err, errlen,
                            "match.endpoint: '***' at %zu (use * or **)",
                            i), -1;
    }
    return 0;
}

int pattern_is_exact(const char *pat)
{
    return strpbrk(pat, "*?") == NULL;
}

int pattern_match(const char *pat, const char *s)
{
    unsigned char reach[RL_PATTERN_MAX + 2], next[RL_PATTERN_MAX + 2];
    size_t m = strlen(pat);

    if (m > RL_PATTERN_MAX)
        return 0;
    if (pattern_is_exact(pat))
        return strcmp(pat, s) == 0;

    /* Closure over the empty string: stars may match nothing. */
    memset(reach, 0, m + 1);
    reach[0] = 1;
    for (size_t i = 0; i < m; i++) {
        if (!reach[i] || pat[i] != '*')
            continue;
        size_t skip = pat[i + 1] == '*' ? 2 : 1;
        reach[i + skip] = 1;
        i += skip - 1;
    }
    for (; *s; s++) {
        int any = 0;
        memset(next, 0, m + 1);
        for (size_t i = 0; i < m; i++) {
            if (!reach[i])
                continue;
            if (pat[i] == '*') {
                int dbl = pat[i + 1] == '*';
                if (dbl || *s != '/')
                    next[i] = 1; /* the star swallows this byte */
                if (dbl)
                    i++;
            } else if (pat[i] == '?' ? *s != '/' : pat[i] == *s) {
                next[i + 1] = 1;
            }
        }
        /* Stars reached by this step may also match nothing. */
        for (size_t i = 0; i < m; i++) {
            if (next[i] && pat[i] == '*') {
                size_t skip = pat[i + 1] == '*' ? 2 : 1;
                next[i + skip] = 1;
            }
            any |= next[i];
        }
        any |= next[m];
        if (!any)
            return 0;
        memcpy(reach, next, m + 1);
    }
    return reach[m];
}
