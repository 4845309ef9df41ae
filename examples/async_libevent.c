/*
 * async_libevent.c -- checks started from a libevent loop: twenty
 * requests of one user against a limit of ten per minute, their answers
 * printed by the callbacks the loop runs.  The store is the first
 * argument (default memory://; e.g. redis://127.0.0.1:6379/0).
 *
 *   cc async_libevent.c $(pkg-config --cflags --libs ratelimit libevent)
 */
#include <event2/event.h>
#include <ratelimit/libevent.h>
#include <stdio.h>

#define N 20

static int done;

static void answered(rl_async_check *chk, int rc)
{
    struct event_base *base = chk->data;

    if (rc != RL_OK)
        printf("check %d: %s\n", done, rl_strerror(rc));
    else
        printf("check %d: %s (%lld left)\n", done,
               chk->result->allowed ? "allowed" : "denied",
               (long long)chk->result->remaining);
    if (++done == N)
        event_base_loopbreak(base);
}

int main(int argc, char **argv)
{
    rl_config *cfg = rl_config_new();
    rl_request req = {.size = sizeof(rl_request), .user = "42", .cost = 1};
    rl_async_check chk[N];
    rl_result res[N];
    struct event_base *base = event_base_new();
    rl_limiter *lim;
    rl_async *a;
    rl_event w;

    rl_config_set(cfg, "store", argc > 1 ? argv[1] : "memory://");
    rl_config_set(cfg, "rules", "[{\"rule_id\":\"r\",\"dimension\":\"user\","
                                "\"limit\":10,\"window_seconds\":60}]");
    if (!base || rl_limiter_new(&lim, cfg) != RL_OK) {
        fprintf(stderr, "%s\n", rl_errmsg(NULL));
        return 1;
    }
    rl_config_free(cfg);
    if (rl_async_new(lim, N, &a) != RL_OK || rl_event_attach(&w, base, a)) {
        fprintf(stderr, "%s\n", rl_errmsg(lim));
        return 1;
    }
    for (int i = 0; i < N; i++) {
        chk[i] = (rl_async_check)RL_ASYNC_CHECK_INIT;
        chk[i].cb = answered;
        chk[i].data = base;
        res[i] = (rl_result)RL_RESULT_INIT;
        chk[i].result = &res[i];
        if (rl_check_start(a, &req, &chk[i]) != RL_OK)
            fprintf(stderr, "%s\n", rl_errmsg(lim));
    }
    event_base_dispatch(base); /* the callbacks run in here */
    rl_event_detach(&w);
    rl_async_free(a);
    rl_limiter_free(lim);
    event_base_free(base);
    return done == N ? 0 : 1;
}
