/* readme_example.c -- README.md's example: 5 requests a minute per API key, then a 429. */
#include <ratelimit.h>
#include <stdio.h>

int main(void)
{
    rl_limiter *lim;
    if (rl_limiter_new(&lim, NULL) != RL_OK)            /* NULL: memory:// store */
        return fprintf(stderr, "%s\n", rl_errmsg(NULL)), 1;
    if (rl_rules_load_string(lim, "[{\"rule_id\": \"per-key\", \"dimension\": \"api_key\","
                                  " \"limit\": 5, \"window_seconds\": 60}]") != RL_OK)
        return fprintf(stderr, "%s\n", rl_errmsg(lim)), 1;
    for (int i = 1; i <= 6; i++) {
        rl_request req = {.size = sizeof req, .endpoint = "/search", .api_key = "k-123", .cost = 1};
        rl_result res = RL_RESULT_INIT;
        char hdrs[RL_HEADERS_FORMAT_MAX], body[RL_BODY_FORMAT_MAX];
        if (rl_check(lim, &req, &res) != RL_OK)
            return fprintf(stderr, "%s\n", rl_errmsg(lim)), 1;
        if (res.allowed) {
            printf("request %d: 200 OK, %lld left\n", i, (long long)res.remaining);
            continue;
        }
        rl_headers_format(&res, 0, hdrs, sizeof hdrs);  /* X-RateLimit-*, Retry-After */
        rl_body_format(&res, body, sizeof body);        /* {"error":"rate_limited",...} */
        printf("request %d: HTTP/1.1 429 Too Many Requests\r\n%s\r\n%s\n", i, hdrs, body);
    }
    rl_limiter_free(lim);
    return 0;
}
