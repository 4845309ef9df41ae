/*
 * rldchange.c -- see rldchange.h.  Requests go through the test harness's
 * libcurl client with the harness's token (the operator "alice").
 */
#include "rldchange.h"
#include "benchutil.h"

#define OTHER_LIMIT 1000000000LL

static int put_rule(rld *d, unsigned long long i, long long limit,
                    uint64_t *sent_ns, uint64_t *acked_ns, char *err)
{
    char path[64], body[128];
    rld_resp r;
    long st;

    snprintf(path, sizeof path, "/v1/rules/r%llu", i);
    snprintf(body, sizeof body, "{\"dimension\":\"user\",\"limit\":%lld,"
             "\"window_seconds\":60}", limit);
    *sent_ns = now_ns();
    st = rld_http(d, "PUT", path, RLD_ALICE_TOKEN, NULL, body, strlen(body),
                  &r);
    *acked_ns = now_ns();
    if (st != 200)
        snprintf(err, ERRLEN, "PUT %s: HTTP %ld %.200s", path, st, r.body);
    rld_resp_free(&r);
    return st == 200 ? 0 : -1;
}

int rldchange_start(rld *d, const char *redis_uri, unsigned long long n,
                    long long limit0, char *err)
{
    const char *args[] = {"--redis", redis_uri, NULL};
    uint64_t a, b;

    memset(d, 0, sizeof *d);
    if (!rld_available() || rld_start(d, args) != 0)
        return snprintf(err, ERRLEN, "cannot start ratelimitd (set "
                        "RATELIMITD, or build tools/ratelimitd)"), -1;
    for (unsigned long long i = 0; i < n; i++)
        if (put_rule(d, i, i ? OTHER_LIMIT : limit0, &a, &b, err) != 0)
            return -1;
    return 0;
}

int rldchange_put(rld *d, long long limit, uint64_t *sent_ns,
                  uint64_t *acked_ns, char *err)
{
    return put_rule(d, 0, limit, sent_ns, acked_ns, err);
}

void rldchange_stop(rld *d)
{
    rld_cleanup(d);
}
