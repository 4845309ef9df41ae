/*
 * async_libuv.c -- checks started from a libuv loop: twenty requests of
 * one user against a limit of ten per minute, their answers printed by
 * the callbacks the loop runs.  The store is the first argument (default
 * memory://; e.g. redis-cluster://127.0.0.1:7000).
 *
 *   cc async_libuv.c $(pkg-config --cflags --libs ratelimit libuv)
 */
#include <ratelimit/libuv.h>
#include <stdio.h>

#define N 20

static int done;

static void answered(rl_async_check *chk, int rc)
{
    if (rc != RL_OK)
        printf("check %d: %s\n", done, rl_strerror(rc));
    else
        printf("check %d: %s (%lld left)\n", done,
               chk->result->allowed ? "allowed" : "denied",
               (long long)chk->result->remaining);
    if (++done == N)
        uv_stop(chk->data);
}

int main(int argc, char **argv)
{
    rl_config *cfg = rl_config_new();
    rl_request req = {.size = sizeof(rl_request), .user = "42", .cost = 1};
    rl_async_check chk[N];
    rl_result res[N];
    uv_loop_t *loop = uv_default_loop();
    rl_limiter *lim;
    rl_async *a;
    rl_uv w;

    rl_config_set(cfg, "store", argc > 1 ? argv[1] : "memory://");
    rl_config_set(cfg, "rules", "[{\"rule_id\":\"r\",\"dimension\":\"user\","
                                "\"limit\":10,\"window_seconds\":60}]");
    if (rl_limiter_new(&lim, cfg) != RL_OK) {
        fprintf(stderr, "%s\n", rl_errmsg(NULL));
        return 1;
    }
    rl_config_free(cfg);
    if (rl_async_new(lim, N, &a) != RL_OK || rl_uv_attach(&w, loop, a)) {
        fprintf(stderr, "%s\n", rl_errmsg(lim));
        return 1;
    }
    for (int i = 0; i < N; i++) {
        chk[i] = (rl_async_check)RL_ASYNC_CHECK_INIT;
        chk[i].cb = answered;
        chk[i].data = loop;
        res[i] = (rl_result)RL_RESULT_INIT;
        chk[i].result = &res[i];
        if (rl_check_start(a, &req, &chk[i]) != RL_OK)
            fprintf(stderr, "%s\n", rl_errmsg(lim));
    }
    uv_run(loop, UV_RUN_DEFAULT); /* the callbacks run in here */
    rl_uv_detach(&w, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    rl_async_free(a);
    rl_limiter_free(lim);
    return done == N ? 0 : 1;
}
