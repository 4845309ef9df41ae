/*
 * fuzz_pattern.c -- endpoint patterns (input "pattern\nendpoint").  The
 * matcher must agree with a slow, obviously-right recursive matcher on
 * every input small enough for the slow one to finish, and with the
 * dynamic programme it replaced (tests/pattern_dp.h) on every input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../pattern_dp.h"
#include "fuzz.h"
#include "pattern.h"

static int slow_match(const char *p, const char *s)
{
    if (*p == '\0')
        return *s == '\0';
    if (p[0] == '*' && p[1] == '*') {
        for (const char *t = s;; t++) {
            if (slow_match(p + 2, t))
                return 1;
            if (*t == '\0')
                return 0;
        }
    }
    if (*p == '*') {
        for (const char *t = s;; t++) {
            if (slow_match(p + 1, t))
                return 1;
            if (*t == '\0' || *t == '/')
                return 0;
        }
    }
    if (*s == '\0')
        return 0;
    if (*p == '?' ? *s != '/' : *p == *s)
        return slow_match(p + 1, s + 1);
    return 0;
}

int fuzz_pattern(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), *nl, err[128];

    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data, size);
    buf[size] = '\0';
    nl = strchr(buf, '\n');
    if (nl) {
        *nl = '\0';
        if (pattern_check(buf, err, sizeof err) == 0) {
            int fast = pattern_match(buf, nl + 1);
            FUZZ_CHECK(fast == pattern_match_dp(buf, nl + 1));
            if (strlen(buf) <= 16 && strlen(nl + 1) <= 24)
                FUZZ_CHECK(fast == slow_match(buf, nl + 1));
        }
    }
    free(buf);
    return 0;
}

#ifdef FUZZ_TARGET_pattern
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_pattern(data, size);
}
#endif
