/*
 * hello.c -- the smallest embedding of libratelimit: one rule, one key,
 * five requests against a limit of three per minute.
 *
 *   cc hello.c $(pkg-config --cflags --libs ratelimit) -o hello && ./hello
 */
#include <ratelimit.h>
#include <stdio.h>

int main(void)
{
    rl_limiter *lim;
    rl_result res = RL_RESULT_INIT;
    char headers[512];

    if (rl_limiter_new(&lim, NULL) != RL_OK) { /* NULL: memory:// store */
        fprintf(stderr, "%s\n", rl_errmsg(NULL));
        return 1;
    }
    if (rl_rules_load_string(lim, "[{\"rule_id\": \"hello\", \"dimension\": "
                                  "\"user\", \"limit\": 3, "
                                  "\"window_seconds\": 60}]") != RL_OK) {
        fprintf(stderr, "%s\n", rl_errmsg(lim));
        rl_limiter_free(lim);
        return 1;
    }
    for (int i = 1; i <= 5; i++) {
        if (rl_allow(lim, "user:42", "hello", 1, &res) != RL_OK) {
            fprintf(stderr, "%s\n", rl_errmsg(lim));
            break;
        }
        rl_headers_format(&res, 0, headers, sizeof headers);
        printf("request %d: %s\n%s\n", i, res.allowed ? "200 OK" : "429",
               headers);
    }
    rl_limiter_free(lim);
    return 0;
}
