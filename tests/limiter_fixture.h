/*
 * limiter_fixture.h -- what the suites of the public API through a limiter
 * share (check_limiter.c: arguments, keys, rule loading, options, stores,
 * messages, versions; check_limiter_check.c: the decisions of rl_check and
 * rl_check_many, a result's fields, the reader/loader races, the stats):
 * the JSON of a rule, a one-rule set, the check of a limiter's message,
 * and a request of one user.
 */
#ifndef RL_TESTS_LIMITER_FIXTURE_H
#define RL_TESTS_LIMITER_FIXTURE_H

#include <check.h>
#include <string.h>

#include "ratelimit.h"


#define RULE(id, dim, limit, extra)                                            \
    "{\"rule_id\":\"" id "\",\"dimension\":\"" dim "\",\"limit\":" #limit     \
    ",\"window_seconds\":60" extra "}"

#define ONE_RULE "[" RULE("r", "user", 5, "") "]"

static inline void msg_has(const rl_limiter *lim, const char *needle)
{
    const char *m = rl_errmsg(lim);

    ck_assert_msg(strstr(m, needle) != NULL, "\"%s\" not in \"%s\"", needle,
                  m);
}

static inline rl_request req_user(const char *user)
{
    return (rl_request){.size = sizeof(rl_request), .user = user, .cost = 1};
}

#endif
