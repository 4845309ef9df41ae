/*
 * fuzz_rules.c -- rule-set JSON, the operator's input.  Whatever parses must
 * be a set the request path can trust: valid ids, every id found by lookup,
 * limits and windows in range, and a check against every rule works.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "limiter.h"
#include "ruleset.h"

int fuzz_rules(const uint8_t *data, size_t size)
{
    rl_ruleset *rs = NULL;
    char err[256];
    int rc = ruleset_parse((const char *)data, size, 7, &rs, err, sizeof err);

    if (rc != RL_OK) {
        FUZZ_CHECK(rs == NULL && err[0] != '\0');
        return 0;
    }
    for (size_t i = 0; i < rs->n; i++) {
        const rl_rule *r = &rs->rules[i];
        FUZZ_CHECK(rule_id_check(r->id) == 0);
        FUZZ_CHECK(ruleset_find(rs, r->id) == r);
        if (r->unlimited) { /* no numbers: it never reaches a store */
            FUZZ_CHECK(r->ap.limit == 0 && !r->lease);
            continue;
        }
        FUZZ_CHECK(r->ap.limit >= 1 && r->ap.limit <= RL_LIMIT_MAX);
        FUZZ_CHECK(r->window_s >= 1 && r->window_s <= RL_WINDOW_MAX);
        FUZZ_CHECK(r->ap.p >= 1 && r->ap.q >= 1);
        (void)rule_matches(r, "/search", "free");
    }
    ruleset_free(rs);

    /* The same bytes through a limiter: a charge against every rule. */
    char *json = malloc(size + 1);
    rl_limiter *lim = NULL;
    rl_result res = RL_RESULT_INIT;
    FUZZ_CHECK(json != NULL);
    memcpy(json, data, size);
    json[size] = '\0';
    if (strlen(json) == size && rl_limiter_new(&lim, NULL) == RL_OK) {
        if (rl_rules_load_string(lim, json) == RL_OK) {
            static const rl_dim dims[] = {{"custom", "c"},
                                          {"tenant", "t-1"}};
            rl_request req = {.size = sizeof(rl_request),
                              .endpoint = "/search", .tier = "free",
                              .user = "u", .api_key = "partner-k",
                              .ip = "1.2.3.4", .dims = dims, .ndims = 2,
                              .cost = 1};
            FUZZ_CHECK(rl_check(lim, &req, &res) == RL_OK ||
                       rl_errmsg(lim)[0] != '\0');
        }
        rl_limiter_free(lim);
    }
    free(json);
    return 0;
}

#ifdef FUZZ_TARGET_rules
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_rules(data, size);
}
#endif
