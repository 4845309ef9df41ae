/*
 * check_rulechange_inherit.c -- what a reload remembers and converts,
 * without a store (issue 9): ruleset_inherit() keeps each rule's replaced
 * shapes (the newest first, never twice, at most RULE_PREV_MAX, those
 * whose time is over dropped), the shapes name their units, and
 * algo_convert()'s table from every algorithm to every other.  Apart from
 * check_rulechange.c (every change on every store, against real Redis and
 * a Redis Cluster) because these are pure functions on a hand clock.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"
#include "ratelimit.h"
#include "ruleset.h"
#include "testutil.h"


/* ---- ruleset_inherit ---------------------------------------------------- */

static rl_ruleset *set_of(const char *json)
{
    rl_ruleset *rs;
    char err[200];

    ck_assert_msg(ruleset_parse(json, strlen(json), 1, &rs, err,
                                sizeof err) == RL_OK, "%s", err);
    return rs;
}

static char *bucket_set(int limit, int window, int burst)
{
    static char buf[256];

    snprintf(buf, sizeof buf,
             "[{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":%d,"
             "\"window_seconds\":%d,\"burst\":%d,"
             "\"algorithm\":\"token_bucket\"},"
             " {\"rule_id\":\"same\",\"dimension\":\"ip\",\"limit\":3,"
             "\"window_seconds\":60}]",
             limit, window, burst);
    return buf;
}

/* Each change adds the replaced shape first; the same shape is never
 * listed twice nor beside itself; at most RULE_PREV_MAX, the oldest
 * dropped; those whose time is over are dropped; a rule that did not
 * change keeps its list; one that is new or came back gets none. */
START_TEST(inherit_remembers_replaced_shapes)
{
    rl_ruleset *rs = set_of(bucket_set(10, 10, 10)), *next;
    const rl_rule *r;

    ruleset_set_clock(test_clock, NULL);
    clock_set(T0);
    for (int v = 1; v <= 6; v++) { /* limits 11 .. 16 */
        clock_add(1000);
        next = set_of(bucket_set(10 + v, 10, 10));
        ruleset_inherit(next, rs);
        ruleset_free(rs);
        rs = next;
    }
    r = ruleset_find(rs, "r");
    ck_assert_int_eq(r->nprev, RULE_PREV_MAX);
    for (int i = 0; i < RULE_PREV_MAX; i++) { /* newest first */
        char name[32];
        snprintf(name, sizeof name, "t10:%d:10", 15 - i);
        ck_assert_str_eq(r->prev[i].name, name);
        ck_assert_int_eq(r->prev[i].since_ms, T0 + (6 - i) * 1000);
        ck_assert_int_eq(r->prev[i].until_ms,
                         r->prev[i].since_ms + RULE_SHAPE_GRACE_MS +
                             algo_state_life_ms(&r->prev[i].ap));
    }
    ck_assert_int_eq(ruleset_find(rs, "same")->nprev, 0);
    /* back to limit 13: that shape leaves the list, limit 16 joins it */
    clock_add(1000);
    next = set_of(bucket_set(13, 10, 10));
    ruleset_inherit(next, rs);
    ruleset_free(rs);
    rs = next;
    r = ruleset_find(rs, "r");
    ck_assert_int_eq(r->nprev, RULE_PREV_MAX);
    ck_assert_str_eq(r->prev[0].name, "t10:16:10");
    ck_assert_str_eq(r->prev[1].name, "t10:15:10");
    ck_assert_str_eq(r->prev[2].name, "t10:14:10");
    ck_assert_str_eq(r->prev[3].name, "t10:12:10");
    /* unchanged: the list stays until each entry's time is over */
    clock_set(r->prev[3].until_ms - 1);
    next = set_of(bucket_set(13, 10, 10));
    ruleset_inherit(next, rs);
    ck_assert_int_eq(ruleset_find(next, "r")->nprev, RULE_PREV_MAX);
    ruleset_free(next);
    clock_set(r->prev[0].until_ms);
    next = set_of(bucket_set(13, 10, 10));
    ruleset_inherit(next, rs);
    ck_assert_int_eq(ruleset_find(next, "r")->nprev, 0);
    ruleset_free(next);
    /* removed, then back: nothing remembered */
    next = set_of("[]");
    ruleset_inherit(next, rs);
    ruleset_free(rs);
    rs = next;
    next = set_of(bucket_set(99, 10, 10));
    ruleset_inherit(next, rs);
    ck_assert_int_eq(ruleset_find(next, "r")->nprev, 0);
    ruleset_free(next);
    ruleset_free(rs);
}
END_TEST

/* What names a state: algorithm and window; for buckets limit and burst
 * too (a window's counts have no units). */
START_TEST(shapes_name_the_units)
{
    rl_ruleset *rs = set_of(
        "[{\"rule_id\":\"a\",\"dimension\":\"user\",\"limit\":100,"
        "\"window_seconds\":60},"
        " {\"rule_id\":\"b\",\"dimension\":\"user\",\"limit\":100,"
        "\"window_seconds\":60,\"burst\":20,\"algorithm\":\"token_bucket\"},"
        " {\"rule_id\":\"c\",\"dimension\":\"user\",\"limit\":100,"
        "\"window_seconds\":60,\"algorithm\":\"gcra\"},"
        " {\"rule_id\":\"d\",\"dimension\":\"user\",\"limit\":7,"
        "\"window_seconds\":3600,\"algorithm\":\"fixed_window\"}]");

    ck_assert_str_eq(ruleset_find(rs, "a")->shape.name, "s60");
    ck_assert_str_eq(ruleset_find(rs, "b")->shape.name, "t60:100:20");
    ck_assert_str_eq(ruleset_find(rs, "c")->shape.name, "g60:100:100");
    ck_assert_str_eq(ruleset_find(rs, "d")->shape.name, "f3600");
    ruleset_free(rs);
}
END_TEST

/* The decision table, one row at a time, on the pure functions. */
START_TEST(convert_table)
{
    algo_params tb, tb2, g, sw, fw, sw2;
    algo_state st = {0}, out;
    algo_decision d;
    char err[100];

    ck_assert_int_eq(algo_params_init(&tb, RL_ALGO_TOKEN_BUCKET, 10, 10, 10,
                                      err, sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&tb2, RL_ALGO_TOKEN_BUCKET, 1, 20, 10,
                                      err, sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&g, RL_ALGO_GCRA, 10, 5, 10, err,
                                      sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&sw, RL_ALGO_SLIDING_WINDOW, 10, 0, 10,
                                      err, sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&sw2, RL_ALGO_SLIDING_WINDOW, 10, 0, 20,
                                      err, sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&fw, RL_ALGO_FIXED_WINDOW, 10, 0, 10,
                                      err, sizeof err), 0);
    /* bucket: 7 charged at T0, 500 ms later 3.5 tokens: 3 whole ones */
    for (int i = 0; i < 7; i++)
        algo_apply(&tb, &st, T0, 1, &d);
    ck_assert_int_eq(algo_convert(&tb, &st, &tb2, T0 + 500,
                                  T0 + 500, &out), 1);
    algo_apply(&tb2, &out, T0 + 500, 0, &d);
    ck_assert_int_eq(d.remaining, 3);     /* not 20: no free refill   */
    ck_assert_int_eq(algo_convert(&tb, &st, &g, T0 + 500,
                                  T0 + 500, &out), 1);
    algo_apply(&g, &out, T0 + 500, 0, &d);
    ck_assert_int_eq(d.remaining, 3);     /* capped at 5: 3 fits      */
    ck_assert_int_eq(algo_convert(&tb, &st, &sw, T0 + 500,
                                  T0 + 500, &out), 1);
    algo_apply(&sw, &out, T0 + 500, 0, &d);
    ck_assert_int_eq(d.remaining, 3);     /* used 10 - 3 = 7          */
    /* later calls convert alike: the level as at the change */
    ck_assert_int_eq(algo_convert(&tb, &st, &tb2, T0 + 500,
                                  T0 + 900, &out), 1);
    algo_apply(&tb2, &out, T0 + 900, 0, &d);
    ck_assert_int_eq(d.remaining, 3);
    /* full again by now under the old rule (1 a second): never refilled
     * by it, taken as a state that expired by now (algo_convert_unknown):
     * at the change at least 10 - 6.5 s x 1/s, rounded down: 3, refilled
     * at the new 1 per 10 s since; not 20 */
    ck_assert_int_eq(algo_convert(&tb, &st, &tb2, T0 + 500,
                                  T0 + 7000, &out), 1);
    algo_apply(&tb2, &out, T0 + 7000, 0, &d);
    ck_assert_int_eq(d.remaining, 3);
    ck_assert_int_eq(algo_convert_unknown(&tb, &tb2, T0 + 500, T0 + 7000,
                                          &out), 1);
    algo_apply(&tb2, &out, T0 + 7000, 0, &d);
    ck_assert_int_eq(d.remaining, 3);
    /* nothing known right at the change: the old burst, at most the new */
    ck_assert_int_eq(algo_convert_unknown(&tb, &g, T0, T0, &out), 1);
    algo_apply(&g, &out, T0, 0, &d);
    ck_assert_int_eq(d.remaining, 5);
    /* a window replaced: passed windows count nothing, fresh */
    ck_assert_int_eq(algo_convert_unknown(&sw, &tb2, T0, T0 + 10, &out), 0);
    /* sliding window: 6 in the previous window, 2 now, 2.5 s in: the
     * estimate 6 * 0.75 + 2 = 6.5, rounded up: 7 used */
    memset(&st, 0, sizeof st);
    for (int i = 0; i < 6; i++)
        algo_apply(&sw, &st, T0 + 5000, 1, &d);
    for (int i = 0; i < 2; i++)
        algo_apply(&sw, &st, T0 + 12500, 1, &d);
    ck_assert_int_eq(algo_convert(&sw, &st, &g, T0 + 12500,
                                  T0 + 12500, &out), 1);
    algo_apply(&g, &out, T0 + 12500, 0, &d);
    ck_assert_int_eq(d.remaining, 0);     /* 5 - 7, at least 0        */
    ck_assert_int_eq(algo_convert(&sw, &st, &fw, T0 + 12500,
                                  T0 + 12500, &out), 1);
    algo_apply(&fw, &out, T0 + 12500, 0, &d);
    ck_assert_int_eq(d.remaining, 3);
    ck_assert_int_eq(algo_convert(&sw, &st, &sw2, T0 + 12500,
                                  T0 + 12500, &out), 1);
    ck_assert_int_eq(out.b, 7);           /* curr = used, prev = 0    */
    ck_assert_int_eq(out.c, 0);
    /* converted in the next window, the change as before: the previous
     * count (6) no longer counts by now, so used = 2, available 20 - 2 */
    ck_assert_int_eq(algo_convert(&sw, &st, &tb2, T0 + 12500,
                                  T0 + 20500, &out), 1);
    algo_apply(&tb2, &out, T0 + 20500, 0, &d);
    ck_assert_int_eq(d.remaining, 18);    /* 18.8 at 1 per 10 s       */
    /* the same units: copied as they are */
    ck_assert_int_eq(algo_convert(&sw, &st, &sw, T0 + 12500,
                                  T0 + 12500, &out), 1);
    ck_assert(out.a == st.a && out.b == st.b && out.c == st.c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rulechange_inherit");
    TCase *pure = tcase_create("memory");

    tcase_add_test(pure, convert_table);
    tcase_add_test(pure, shapes_name_the_units);
    tcase_add_test(pure, inherit_remembers_replaced_shapes);
    suite_add_tcase(s, pure);
    return run_suite(s);
}
