/*
 * abi_layout.c -- the layout of the public structs as the C compiler sees
 * include/ratelimit.h: one line per struct ("rl_result 168") and per
 * member ("rl_result.allowed 8 4": offset and size).  The Python
 * binding's tests (test_abi.py) hold its ctypes mirrors to these figures,
 * so a member added to the header without its mirror fails make check.
 */
#include <ratelimit.h>

#include <stddef.h>
#include <stdio.h>

#define STRUCT(T) printf("%s %zu\n", #T, sizeof(T))
#define MEMBER(T, m)                                                        \
    printf("%s.%s %zu %zu\n", #T, #m, offsetof(T, m), sizeof(((T *)0)->m))

static void result_layout(void)
{
    STRUCT(rl_result);
    MEMBER(rl_result, size);
    MEMBER(rl_result, allowed);
    MEMBER(rl_result, flags);
    MEMBER(rl_result, limit);
    MEMBER(rl_result, remaining);
    MEMBER(rl_result, reset_at);
    MEMBER(rl_result, retry_after);
    MEMBER(rl_result, window);
    MEMBER(rl_result, rule_id);
    MEMBER(rl_result, retry_after_ms);
    MEMBER(rl_result, reset_at_ms);
}

static void request_layout(void)
{
    STRUCT(rl_dim);
    MEMBER(rl_dim, name);
    MEMBER(rl_dim, value);
    STRUCT(rl_request);
    MEMBER(rl_request, size);
    MEMBER(rl_request, endpoint);
    MEMBER(rl_request, tier);
    MEMBER(rl_request, user);
    MEMBER(rl_request, api_key);
    MEMBER(rl_request, ip);
    MEMBER(rl_request, dims);
    MEMBER(rl_request, ndims);
    MEMBER(rl_request, cost);
    MEMBER(rl_request, endpoint_len);
    MEMBER(rl_request, tier_len);
    MEMBER(rl_request, user_len);
    MEMBER(rl_request, api_key_len);
    MEMBER(rl_request, ip_len);
}

static void rules_layout(void)
{
    STRUCT(rl_dryrun);
    MEMBER(rl_dryrun, size);
    MEMBER(rl_dryrun, mode);
    MEMBER(rl_dryrun, version);
    MEMBER(rl_dryrun, checks);
    MEMBER(rl_dryrun, would_deny);
    MEMBER(rl_dryrun, distinct);
    MEMBER(rl_dryrun, since_ms);
    STRUCT(rl_rules_status);
    MEMBER(rl_rules_status, size);
    MEMBER(rl_rules_status, version);
    MEMBER(rl_rules_status, origin);
    MEMBER(rl_rules_status, source);
    MEMBER(rl_rules_status, loads);
    MEMBER(rl_rules_status, refused_bad);
    MEMBER(rl_rules_status, refused_stale);
    MEMBER(rl_rules_status, source_errors);
    MEMBER(rl_rules_status, last_read_ms);
    MEMBER(rl_rules_status, last_load_ms);
    MEMBER(rl_rules_status, last_refusal);
}

static void stats_layout(void)
{
    STRUCT(rl_stats);
    MEMBER(rl_stats, size);
    MEMBER(rl_stats, checks);
    MEMBER(rl_stats, allowed);
    MEMBER(rl_stats, denied);
    MEMBER(rl_stats, soft);
    MEMBER(rl_stats, fail_open);
    MEMBER(rl_stats, fallback);
    MEMBER(rl_stats, fail_closed);
    MEMBER(rl_stats, store_errors);
    MEMBER(rl_stats, breaker_opens);
    MEMBER(rl_stats, breaker_closes);
    MEMBER(rl_stats, fleet_size);
    MEMBER(rl_stats, breaker_state);
    STRUCT(rl_header);
    MEMBER(rl_header, name);
    MEMBER(rl_header, value);
    STRUCT(rl_reservation);
    MEMBER(rl_reservation, size);
    MEMBER(rl_reservation, opaque);
}

int main(void)
{
    result_layout();
    request_layout();
    rules_layout();
    stats_layout();
    /* The constants the mirror copies. */
    printf("RL_HEADERS_MAX %d\n", RL_HEADERS_MAX);
    printf("RL_HEADERS_FORMAT_MAX %d\n", RL_HEADERS_FORMAT_MAX);
    printf("RL_BODY_FORMAT_MAX %d\n", RL_BODY_FORMAT_MAX);
    printf("RL_HEADERS_IETF %d\n", RL_HEADERS_IETF);
    printf("RL_HEADERS_DRAFT10 %d\n", RL_HEADERS_DRAFT10);
    printf("RL_COST_MAX %lld\n", (long long)RL_COST_MAX);
    printf("RL_EINVAL %d\nRL_ENOMEM %d\nRL_ENORULE %d\nRL_ERULE %d\n",
           RL_EINVAL, RL_ENOMEM, RL_ENORULE, RL_ERULE);
    printf("RL_EPARSE %d\nRL_EIO %d\nRL_EOPTION %d\nRL_ESTORE %d\n",
           RL_EPARSE, RL_EIO, RL_EOPTION, RL_ESTORE);
    printf("RL_ERANGE %d\nRL_EBUSY %d\n", RL_ERANGE, RL_EBUSY);
    printf("RL_ESETTLED %d\n", RL_ESETTLED);
    return 0;
}
