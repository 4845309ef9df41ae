/*
 * pattern_dp.h -- the endpoint matcher as it was before issue 11: a
 * dynamic programme over pattern positions rolled over the endpoint's
 * bytes, O(pattern x endpoint).  Kept as the reference the bit-parallel
 * matcher (src/rules/pattern.c) is tested against (tests/check_match.c) and
 * timed beside (bench/matchbench.c).
 */
#ifndef RL_TESTS_PATTERN_DP_H
#define RL_TESTS_PATTERN_DP_H

#include <string.h>

#include "pattern.h"

static inline int pattern_match_dp(const char *pat, const char *s)
{
    unsigned char reach[RL_PATTERN_MAX + 2], next[RL_PATTERN_MAX + 2];
    size_t m = strlen(pat);

    if (m > RL_PATTERN_MAX)
        return 0;
    if (pattern_is_exact(pat))
        return strcmp(pat, s) == 0;
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
                    next[i] = 1;
                if (dbl)
                    i++;
            } else if (pat[i] == '?' ? *s != '/' : pat[i] == *s) {
                next[i + 1] = 1;
            }
        }
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

#endif
