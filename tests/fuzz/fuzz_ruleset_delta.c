/*
 * fuzz_ruleset_delta.c -- the incremental parse (src/rules/ruleset_delta.c)
 * against the full one.  A base set is taken as the set in force (the
 * built-in BASE, or the input's bytes before a 0x1e byte); the input (or
 * its bytes after the 0x1e) is then parsed both ways against it, and the
 * two must be indistinguishable: same return code, same message, same
 * rules field by field (tests/ruleset_compare.h).  When the new text is
 * taken, the base is parsed again against it, the other way round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ruleset_compare.h"
#include "fuzz.h"

#define SEP 0x1e

static const char BASE[] =
    "{\"version\":3,\"rules\":["
    "{\"rule_id\":\"a\",\"dimension\":\"user\",\"limit\":10,"
    "\"window_seconds\":60},"
    "{\"rule_id\":\"b\",\"dimension\":\"ip\",\"match\":{\"endpoint\":"
    "\"/api/**\",\"tier\":\"free\"},\"limit\":5,\"window_seconds\":1,"
    "\"burst\":20,\"algorithm\":\"token_bucket\",\"mode\":\"log\","
    "\"failure_mode\":\"open\",\"version\":4,\"updated_at\":"
    "\"2026-11-29T10:00:00Z\"},"
    "{\"ruleId\":\"c\",\"dimension\":\"api_key\",\"limit\":100,"
    "\"windowSeconds\":3600,\"algorithm\":\"gcra\"},"
    "{\"dimension\":\"global\",\"rule_id\":\"d\",\"match\":{\"tier\":"
    "\"p\\\"r\\\\o\"},\"limit\":1000,\"window_seconds\":60,"
    "\"algorithm\":\"fixed_window\"},"
    "{\"rule_id\":\"\\u0065\",\"dimension\":\"custom\",\"limit\":7,"
    "\"window_seconds\":10}]}";

int fuzz_ruleset_delta(const uint8_t *data, size_t size)
{
    const uint8_t *sep = memchr(data, SEP, size);
    const char *base = BASE, *text = (const char *)data;
    size_t blen = sizeof BASE - 1, len = size;
    rl_ruleset *prev = NULL, *next = NULL;
    delta_info info;
    char err[256], why[CMP_MSG];

    if (sep) {
        base = (const char *)data;
        blen = (size_t)(sep - data);
        text = (const char *)sep + 1;
        len = size - blen - 1;
    }
    if (ruleset_parse_delta(base, blen, 1, NULL, &prev, NULL, err,
                            sizeof err) != RL_OK)
        prev = NULL;
    if (delta_compare(text, len, prev, &info, &next, why)) {
        fprintf(stderr, "fuzz_ruleset_delta: %s\n", why);
        FUZZ_CHECK(!"the two parses differ");
    }
    FUZZ_CHECK(!info.whole || !next || !next->text);
    if (next && prev) { /* and back: the base against the new set */
        if (delta_compare(base, blen, next, &info, NULL, why)) {
            fprintf(stderr, "fuzz_ruleset_delta (back): %s\n", why);
            FUZZ_CHECK(!"the two parses differ");
        }
    }
    ruleset_free(next);
    ruleset_free(prev);
    return 0;
}

#ifdef FUZZ_TARGET_ruleset_delta
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_ruleset_delta(data, size);
}
#endif
