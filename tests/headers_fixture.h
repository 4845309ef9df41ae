/*
 * headers_fixture.h -- what the suites of rl_headers() and its text forms
 * share (check_headers.c: the header values; check_headers_format.c:
 * rl_headers_format(), rl_body_format(), bounds, arguments and the
 * property test): a hand-made rl_result, and the parser of an IETF value
 * that checks its policy's bytes, which both judge the pair by.
 */
#ifndef RL_TESTS_HEADERS_FIXTURE_H
#define RL_TESTS_HEADERS_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ratelimit.h"

static inline rl_result make_result(int allowed, int64_t limit, int64_t remaining,
                             int64_t reset_at, int64_t retry_after,
                             int64_t window, const char *rule_id)
{
    rl_result r;

    memset(&r, 0, sizeof(r));
    r.size = sizeof(r);
    r.allowed = allowed;
    r.limit = limit;
    r.remaining = remaining;
    r.reset_at = reset_at;
    r.retry_after = retry_after;
    r.window = window;
    snprintf(r.rule_id, sizeof(r.rule_id), "%s", rule_id);
    return r;
}

static inline int is_policy_byte(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
           c == '-';
}

/*
 * Parses an IETF value '"<policy>";<k1>=<n1>;<k2>=<n2>' (digits only) and
 * checks the policy is made of safe bytes.  Returns NULL or what is wrong;
 * no Check assertions, so the property test can call it in a hot loop.
 */
static inline const char *parse_ietf(const char *value, char *pol,
                                     size_t polsz, const char *k1,
                                     long long *n1, const char *k2,
                                     long long *n2)
{
    const char *p, *end;
    const char *keys[2] = {k1, k2};
    long long *nums[2] = {n1, n2};
    size_t plen;

    if (value[0] != '"')
        return "no opening quote";
    end = strchr(value + 1, '"');
    if (end == NULL)
        return "no closing quote";
    plen = (size_t)(end - (value + 1));
    if (plen == 0 || plen >= polsz)
        return "policy empty or too long";
    memcpy(pol, value + 1, plen);
    pol[plen] = '\0';
    for (size_t i = 0; i < plen; i++)
        if (!is_policy_byte((unsigned char)pol[i]))
            return "unsafe policy byte";
    p = end + 1;
    for (int k = 0; k < 2; k++) {
        size_t kl = strlen(keys[k]);
        long long v = 0;
        int digits = 0;

        if (*p++ != ';' || strncmp(p, keys[k], kl) != 0 || p[kl] != '=')
            return "bad parameter";
        p += kl + 1;
        while (*p >= '0' && *p <= '9') {
            if (digits++ == 15)
                return "more than 15 digits";
            v = v * 10 + (*p++ - '0');
        }
        if (digits == 0)
            return "no digits";
        *nums[k] = v;
    }
    return *p == '\0' ? NULL : "trailing bytes";
}

#endif
