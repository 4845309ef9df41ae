/*
 * check_dims.c -- named dimensions and the growable structs, through the
 * public API on the memory store: a rule counts by any name of the
 * grammar, a request carries name/value pairs beside the user, api_key
 * and ip shortcuts, keys stay "<dimension>:<value>", and the callers'
 * sizes are honoured.  (tests/check_abi.c runs a caller built against
 * the first 1.0 header.)
 */
#include <check.h>
#include <string.h>

#include "testutil.h"

#define RULE(id, dim, limit)                                               \
    "{\"rule_id\":\"" id "\",\"dimension\":\"" dim "\",\"limit\":" #limit  \
    ",\"window_seconds\":60}"

static rl_request req_dims(const rl_dim *dims, size_t n)
{
    return (rl_request){.size = sizeof(rl_request), .dims = dims,
                        .ndims = n, .cost = 1};
}

static int check_ok(rl_limiter *lim, const rl_request *req, rl_result *res)
{
    int rc = rl_check(lim, req, res);

    ck_assert_msg(rc == RL_OK, "rl_check: %s", rl_errmsg(lim));
    return res->allowed;
}

static void fails_with(rl_limiter *lim, const rl_request *req,
                       const char *needle)
{
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, req, &res), RL_EINVAL);
    ck_assert_msg(strstr(rl_errmsg(lim), needle), "\"%s\" not in \"%s\"",
                  needle, rl_errmsg(lim));
}

/* ---- named dimensions --------------------------------------------------- */

START_TEST(named_dimension_counts_by_its_value)
{
    rl_limiter *lim = limiter_with("[" RULE("t", "tenant", 2) "]");
    rl_dim acme[] = {{"tenant", "acme"}}, other[] = {{"tenant", "other"}};
    rl_request a = req_dims(acme, 1), b = req_dims(other, 1);
    rl_result res = RL_RESULT_INIT;

    ck_assert(check_ok(lim, &a, &res));
    ck_assert_str_eq(res.rule_id, "t");
    ck_assert_int_eq(res.remaining, 1);
    ck_assert(check_ok(lim, &b, &res)); /* another tenant, another key */
    /* The key is "tenant:acme": rl_allow() on it charges the same state. */
    ck_assert_int_eq(rl_allow(lim, "tenant:acme", "t", 1, &res), RL_OK);
    ck_assert(res.allowed);
    ck_assert(!check_ok(lim, &a, &res));
    rl_limiter_free(lim);
}
END_TEST

START_TEST(header_dimension_and_shortcuts_together)
{
    rl_limiter *lim = limiter_with("[" RULE("v", "header:x-api-version", 1)
                                   "," RULE("u", "user", 5) "]");
    rl_dim d[] = {{"header:x-api-version", "2"}};
    rl_request req = req_dims(d, 1);
    rl_result res = RL_RESULT_INIT;

    req.user = "alice";
    ck_assert(check_ok(lim, &req, &res));
    ck_assert(!check_ok(lim, &req, &res));
    ck_assert_str_eq(res.rule_id, "v");
    ck_assert_int_eq(rl_allow(lim, "header:x-api-version:2", "v", 1, &res),
                     RL_OK);
    ck_assert(!res.allowed);
    rl_limiter_free(lim);
}
END_TEST

/* A rule file counting by "custom" keeps working: the request names it. */
START_TEST(custom_is_an_ordinary_name)
{
    rl_limiter *lim = limiter_with("[" RULE("c", "custom", 1) "]");
    rl_dim d[] = {{"custom", "job-7"}};
    rl_request req = req_dims(d, 1);
    rl_result res = RL_RESULT_INIT;

    ck_assert(check_ok(lim, &req, &res));
    ck_assert(!check_ok(lim, &req, &res));
    ck_assert_int_eq(rl_allow(lim, "custom:job-7", "c", 1, &res), RL_OK);
    ck_assert(!res.allowed);
    rl_limiter_free(lim);
}
END_TEST

/* A rule whose dimension the request does not carry does not apply; a
 * request's dimension no rule counts by is ignored. */
START_TEST(unknown_dimension_rule_does_not_apply)
{
    rl_limiter *lim = limiter_with("[" RULE("o", "org", 1) "]");
    rl_dim d[] = {{"tenant", "acme"}, {"route", "/x"}};
    rl_request req = req_dims(d, 2);
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 3; i++) {
        ck_assert(check_ok(lim, &req, &res));
        ck_assert_uint_eq(res.flags, RL_FLAG_NO_RULE);
    }
    rl_limiter_free(lim);
}
END_TEST

START_TEST(null_or_empty_value_is_not_carried)
{
    rl_limiter *lim = limiter_with("[" RULE("t", "tenant", 1) "]");
    rl_dim d[] = {{"tenant", NULL}, {"org", ""}};
    rl_request req = req_dims(d, 2);
    rl_result res = RL_RESULT_INIT;

    ck_assert(check_ok(lim, &req, &res));
    ck_assert_uint_eq(res.flags, RL_FLAG_NO_RULE);
    rl_limiter_free(lim);
}
END_TEST

/* dims may name a shortcut's dimension when the shortcut is NULL. */
START_TEST(shortcut_name_in_dims)
{
    rl_limiter *lim = limiter_with("[" RULE("u", "user", 1) "]");
    rl_dim d[] = {{"user", "bob"}};
    rl_request req = req_dims(d, 1);
    rl_result res = RL_RESULT_INIT;

    ck_assert(check_ok(lim, &req, &res));
    ck_assert_int_eq(rl_allow(lim, "user:bob", "u", 1, &res), RL_OK);
    ck_assert(!res.allowed);
    rl_limiter_free(lim);
}
END_TEST

/* A name given twice is an error, whether a rule counts by it or not. */
START_TEST(duplicate_names_rejected)
{
    rl_limiter *lim = limiter_with("[" RULE("t", "tenant", 5) "]");
    rl_dim known[] = {{"tenant", "a"}, {"tenant", "b"}};
    rl_dim unknown[] = {{"zone", "a"}, {"org", "x"}, {"zone", "a"}};
    rl_dim user[] = {{"user", "b"}};
    rl_dim empty_twice[] = {{"tenant", ""}, {"tenant", "b"}};
    rl_request req = req_dims(known, 2);
    rl_stats st = RL_STATS_INIT;

    fails_with(lim, &req, "dims: \"tenant\" given twice");
    req = req_dims(unknown, 3);
    fails_with(lim, &req, "dims: \"zone\" given twice");
    req = req_dims(user, 1);
    req.user = "a";
    fails_with(lim, &req, "dims: \"user\" given twice");
    req = req_dims(empty_twice, 2);
    fails_with(lim, &req, "dims: \"tenant\" given twice");
    ck_assert_int_eq(rl_stats_get(lim, &st), RL_OK);
    ck_assert_uint_eq(st.checks, 0); /* nothing was charged */
    rl_limiter_free(lim);
}
END_TEST

START_TEST(dims_bounds)
{
    rl_limiter *lim = limiter_with("[" RULE("t", "tenant", 100) "]");
    rl_dim d[RL_DIMS_MAX + 1];
    char names[RL_DIMS_MAX + 1][16], longest[RL_DIM_NAME_MAX + 2];
    rl_request req;
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i <= RL_DIMS_MAX; i++) {
        snprintf(names[i], sizeof names[i], "d%d", i);
        d[i] = (rl_dim){names[i], "v"};
    }
    d[0] = (rl_dim){"tenant", "acme"};
    req = req_dims(d, RL_DIMS_MAX);
    ck_assert(check_ok(lim, &req, &res)); /* 16: the most */
    ck_assert_str_eq(res.rule_id, "t");
    req = req_dims(d, RL_DIMS_MAX + 1);
    fails_with(lim, &req, "ndims: 17, more than 16");
    req = req_dims(NULL, 1);
    fails_with(lim, &req, "dims: NULL with ndims 1");
    memset(longest, 'x', sizeof longest);
    longest[RL_DIM_NAME_MAX] = '\0';
    d[1].name = longest;
    req = req_dims(d, 2);
    ck_assert(check_ok(lim, &req, &res)); /* 64 bytes: the longest */
    longest[RL_DIM_NAME_MAX] = 'x';
    longest[RL_DIM_NAME_MAX + 1] = '\0';
    fails_with(lim, &req, "dims[1].name: must be 1..64 bytes");
    d[1].name = "Tenant";
    fails_with(lim, &req, "dims[1].name: must be 1..64 bytes");
    d[1].name = NULL;
    fails_with(lim, &req, "dims[1].name: must be 1..64 bytes");
    d[1].name = "global";
    fails_with(lim, &req, "dims[1].name: \"global\" is reserved");
    rl_limiter_free(lim);
}
END_TEST

/* Name and value together make a key of at most RL_KEY_MAX bytes. */
START_TEST(named_key_length_bound)
{
    rl_limiter *lim = limiter_with("[" RULE("t", "tenant", 100) "]");
    char value[RL_KEY_MAX];
    rl_dim d[] = {{"tenant", value}};
    rl_request req = req_dims(d, 1);
    rl_result res = RL_RESULT_INIT;

    memset(value, 'v', sizeof value);
    value[RL_KEY_MAX - 7] = '\0'; /* "tenant:" + 249 = 256 */
    ck_assert(check_ok(lim, &req, &res));
    value[RL_KEY_MAX - 7] = 'v';
    value[RL_KEY_MAX - 6] = '\0';
    fails_with(lim, &req, "tenant: longer than 249 bytes");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(check_many_with_named_dimensions)
{
    rl_limiter *lim = limiter_with("[" RULE("t", "tenant", 2) "]");
    rl_dim a[] = {{"tenant", "a"}}, b[] = {{"tenant", "b"}};
    rl_request reqs[5];
    rl_result res[5];
    int codes[5];

    results_init(res, 5);
    for (int i = 0; i < 5; i++)
        reqs[i] = req_dims(i < 3 ? a : b, 1);
    ck_assert_int_eq(rl_check_many(lim, reqs, res, codes, 5), RL_OK);
    ck_assert(res[0].allowed && res[1].allowed && !res[2].allowed);
    ck_assert(res[3].allowed && res[4].allowed);
    rl_limiter_free(lim);
}
END_TEST

/* ---- sizes ------------------------------------------------------------- */

START_TEST(result_size_below_first_layout_rejected)
{
    rl_limiter *lim = limiter_with("[" RULE("u", "user", 1) "]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .cost = 1};
    rl_result res = {.size = 0};
    rl_stats st = {.size = 8};

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_EINVAL);
    ck_assert(strstr(rl_errmsg(lim), "rl_check: result->size is 0, below "
                     "the 120 bytes of the first 1.0 rl_result: set it to "
                     "sizeof(rl_result) (RL_RESULT_INIT)"));
    ck_assert_int_eq(rl_allow(lim, "k", "u", 1, &res), RL_EINVAL);
    res.size = sizeof res;
    req.size = RL_REQUEST_SIZE_MIN - 8;
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_EINVAL);
    ck_assert(strstr(rl_errmsg(lim), "rl_check: req->size is 64, below"));
    ck_assert_int_eq(rl_stats_get(lim, &st), RL_EINVAL);
    ck_assert(strstr(rl_errmsg(lim), "rl_stats_get: out->size is 8"));
    rl_limiter_free(lim);
}
END_TEST

/* The first layout's size: filled up to rule_id, not a byte further. */
START_TEST(result_filled_only_as_far_as_its_size)
{
    rl_limiter *lim = limiter_with("[" RULE("u", "user", 1) "]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .cost = 1};
    rl_result res;

    memset(&res, 0x5a, sizeof res);
    res.size = RL_RESULT_SIZE_MIN;
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_str_eq(res.rule_id, "u");
    ck_assert_uint_eq(res.size, RL_RESULT_SIZE_MIN);
    ck_assert_int_eq(res.retry_after_ms, 0x5a5a5a5a5a5a5a5aLL);
    ck_assert_int_eq(res.reset_at_ms, 0x5a5a5a5a5a5a5a5aLL);
    rl_limiter_free(lim);
}
END_TEST

/* ---- counted strings (rl_request's lengths, since 1.1.0) --------------- */

/* A request whose endpoint, tier and ip are counted: each followed by
 * bytes that are not its own and no NUL (the lengths say where it ends). */
static rl_request counted_req(char *ep, char *tier, char *ip)
{
    memcpy(ep, "/searchXX", 9);
    memcpy(tier, "proZ", 4);
    memcpy(ip, "10.0.0.1ZZZZ", 12);
    return (rl_request){.size = sizeof(rl_request), .endpoint = ep,
                        .endpoint_len = 7, .tier = tier, .tier_len = 3,
                        .ip = ip, .ip_len = 8, .cost = 1};
}

/* req with *s (a field of it, its length *len) one byte over
 * RL_ENDPOINT_MAX, counted: refused with needle in the message; the
 * field and its length put back. */
static void refuses_over_long(rl_limiter *lim, rl_request *req,
                              const char **s, size_t *len,
                              const char *needle)
{
    char big[RL_ENDPOINT_MAX + 1];
    const char *was = *s;
    size_t was_len = *len;

    memset(big, 'p', sizeof big);
    *s = big;
    *len = sizeof big;
    fails_with(lim, req, needle);
    *s = was;
    *len = was_len;
}

/* A set that reads no endpoint nor tier (its index's one run): the value
 * is read as counted, the key the same as a C string's. */
START_TEST(counted_strings_plain_set)
{
    rl_limiter *lim = limiter_with("[" RULE("i", "ip", 2) "]");
    char ep[9], tier[4], ip[12];
    rl_request req = counted_req(ep, tier, ip);
    rl_result res = RL_RESULT_INIT;

    ck_assert(check_ok(lim, &req, &res));
    ck_assert_str_eq(res.rule_id, "i");
    ck_assert_int_eq(res.remaining, 1);
    ck_assert_int_eq(rl_allow(lim, "ip:10.0.0.1", "i", 1, &res), RL_OK);
    ck_assert(res.allowed);
    ck_assert(!check_ok(lim, &req, &res)); /* the same key: spent */
    rl_limiter_free(lim);
}
END_TEST

/* A set that matches endpoints and tiers: the counted strings match as
 * their bytes, not past them. */
START_TEST(counted_strings_matched)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"e\",\"dimension\":\"ip\",\"limit\":2,"
        "\"window_seconds\":60,\"match\":{\"endpoint\":\"/search\","
        "\"tier\":\"pro\"}}]");
    char ep[9], tier[4], ip[12];
    rl_request req = counted_req(ep, tier, ip);
    rl_result res = RL_RESULT_INIT;

    ck_assert(check_ok(lim, &req, &res));
    ck_assert_str_eq(res.rule_id, "e");
    ck_assert_int_eq(res.remaining, 1);
    ck_assert_int_eq(rl_allow(lim, "ip:10.0.0.1", "e", 1, &res), RL_OK);
    ck_assert(res.allowed);
    ck_assert(!check_ok(lim, &req, &res));
    req.endpoint_len = 9; /* "/searchXX": another endpoint, no rule */
    ck_assert(check_ok(lim, &req, &res));
    ck_assert(res.flags & RL_FLAG_NO_RULE);
    refuses_over_long(lim, &req, &req.endpoint, &req.endpoint_len,
                      "endpoint: longer than");
    rl_limiter_free(lim);
}
END_TEST

/* A glob endpoint and a per-value rule read the counted strings where
 * they lie (no copy): the value rule replaces the plain one only if the
 * value is read as its 8 bytes, and the glob matches only "/search". */
START_TEST(counted_strings_glob_and_value)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"g\",\"dimension\":\"ip\",\"limit\":3,"
        "\"window_seconds\":60,\"match\":{\"endpoint\":\"/sea?ch\","
        "\"tier\":\"pro\"}},"
        "{\"rule_id\":\"v\",\"dimension\":\"ip\",\"limit\":1,"
        "\"window_seconds\":60,\"match\":{\"endpoint\":\"/sea?ch\","
        "\"tier\":\"pro\",\"value\":\"10.0.0.1\"}}]");
    char ep[9], tier[4], ip[12];
    rl_request req = counted_req(ep, tier, ip);
    rl_result res = RL_RESULT_INIT;

    ck_assert(check_ok(lim, &req, &res));
    ck_assert_str_eq(res.rule_id, "v");
    ck_assert_int_eq(res.remaining, 0);
    ck_assert(!check_ok(lim, &req, &res));
    req.ip_len = 7; /* "10.0.0.": the plain rule */
    ck_assert(check_ok(lim, &req, &res));
    ck_assert_str_eq(res.rule_id, "g");
    ck_assert_int_eq(res.remaining, 2);
    req.tier_len = 4; /* "proZ": no rule */
    ck_assert(check_ok(lim, &req, &res));
    ck_assert(res.flags & RL_FLAG_NO_RULE);
    refuses_over_long(lim, &req, &req.tier, &req.tier_len,
                      "tier: longer than");
    rl_limiter_free(lim);
}
END_TEST

/* A counted tier holding a NUL (outside rl_request's contract, yet read
 * within its length): "pr\0X" is not the per-value rule's "pr", and
 * nothing past the rule's own tier is read to say so (valgrind and ASan
 * saw the read past it before rule_matches_n() compared lengths). */
START_TEST(counted_tier_with_nul_is_not_shorter_tier)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"t\",\"dimension\":\"ip\",\"limit\":2,"
        "\"window_seconds\":60,\"match\":{\"tier\":\"pr\","
        "\"value\":\"10.0.0.1\"}}]");
    rl_request req = {.size = sizeof(rl_request), .tier = "pr\0X",
                      .tier_len = 4, .ip = "10.0.0.1", .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert(check_ok(lim, &req, &res));
    ck_assert(res.flags & RL_FLAG_NO_RULE);
    req.tier_len = 2; /* "pr": the rule */
    ck_assert(check_ok(lim, &req, &res));
    ck_assert_str_eq(res.rule_id, "t");
    rl_limiter_free(lim);
}
END_TEST

/* Since 1.0: the unrounded times, retry_after and reset_at rounded up. */
START_TEST(millisecond_times)
{
    rl_limiter *lim = limiter_with("[{\"rule_id\":\"u\",\"dimension\":"
                                   "\"user\",\"limit\":1,\"window_seconds\":"
                                   "10,\"algorithm\":\"fixed_window\"}]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .cost = 1};
    rl_result res = RL_RESULT_INIT;

    clock_add(2500); /* 2.5 s into the 10 s window */
    ck_assert(check_ok(lim, &req, &res));
    ck_assert_int_eq(res.retry_after_ms, 0);
    ck_assert_int_gt(res.reset_at_ms, 0);
    ck_assert_int_eq(res.reset_at, (res.reset_at_ms + 999) / 1000);
    ck_assert(!check_ok(lim, &req, &res));
    ck_assert_int_eq(res.retry_after_ms, 7500);
    ck_assert_int_eq(res.retry_after, 8);
    ck_assert_int_eq(res.reset_at, (res.reset_at_ms + 999) / 1000);
    rl_limiter_free(lim);
}
END_TEST

/* rl_check_many: a bigger stride (a caller with padding in its elements,
 * as a later header's would have) and an element of another size. */
START_TEST(check_many_strides)
{
    typedef struct {
        rl_request r;
        char later[24];
    } big_req;
    typedef struct {
        rl_result r;
        char later[40];
    } big_res;
    rl_limiter *lim = limiter_with("[" RULE("u", "user", 2) "]");
    big_req reqs[4];
    big_res res[4];
    int codes[4];

    memset(reqs, 0x7e, sizeof reqs);
    memset(res, 0x7e, sizeof res);
    for (int i = 0; i < 4; i++) {
        reqs[i].r = (rl_request){.size = sizeof(big_req), .user = "s",
                                 .cost = 1};
        res[i].r.size = sizeof(big_res);
    }
    res[2].r.size = sizeof(rl_result);
    ck_assert_int_eq(rl_check_many(lim, &reqs[0].r, &res[0].r, codes, 4),
                     RL_EINVAL);
    ck_assert_int_eq(codes[0], RL_OK);
    ck_assert_int_eq(codes[1], RL_OK);
    ck_assert_int_eq(codes[2], RL_EINVAL);
    ck_assert_int_eq(codes[3], RL_OK);
    ck_assert(res[0].r.allowed && res[1].r.allowed && !res[3].r.allowed);
    ck_assert_uint_eq(res[2].r.size, sizeof(rl_result));
    ck_assert_int_eq(res[2].r.allowed, 0); /* zeroed, by its own size */
    for (int i = 0; i < 4; i++)
        for (size_t k = 0; k < sizeof res[i].later; k++)
            ck_assert_int_eq(res[i].later[k], 0x7e);
    res[0].r.size = 4; /* the first size decides: the whole call fails */
    ck_assert_int_eq(rl_check_many(lim, &reqs[0].r, &res[0].r, codes, 4),
                     RL_EINVAL);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(codes[i], RL_EINVAL);
    res[0].r.size = sizeof(rl_result) + 4; /* misaligned stride */
    ck_assert_int_eq(rl_check_many(lim, &reqs[0].r, &res[0].r, codes, 1),
                     RL_EINVAL);
    ck_assert(strstr(rl_errmsg(lim), "not a multiple of 8"));
    rl_limiter_free(lim);
}
END_TEST

static Suite *dims_suite(void)
{
    Suite *s = suite_create("dims");
    TCase *tc = tcase_create("named");

    tcase_add_test(tc, named_dimension_counts_by_its_value);
    tcase_add_test(tc, header_dimension_and_shortcuts_together);
    tcase_add_test(tc, custom_is_an_ordinary_name);
    tcase_add_test(tc, unknown_dimension_rule_does_not_apply);
    tcase_add_test(tc, null_or_empty_value_is_not_carried);
    tcase_add_test(tc, shortcut_name_in_dims);
    tcase_add_test(tc, duplicate_names_rejected);
    tcase_add_test(tc, dims_bounds);
    tcase_add_test(tc, named_key_length_bound);
    tcase_add_test(tc, check_many_with_named_dimensions);
    suite_add_tcase(s, tc);
    tc = tcase_create("sizes");
    tcase_add_test(tc, result_size_below_first_layout_rejected);
    tcase_add_test(tc, result_filled_only_as_far_as_its_size);
    tcase_add_test(tc, millisecond_times);
    tcase_add_test(tc, counted_strings_plain_set);
    tcase_add_test(tc, counted_strings_matched);
    tcase_add_test(tc, counted_strings_glob_and_value);
    tcase_add_test(tc, counted_tier_with_nul_is_not_shorter_tier);
    tcase_add_test(tc, check_many_strides);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(dims_suite());
}
