/*
 * demo.c -- what libratelimit does, in one run: load a rule set, fire bursts
 * of requests from several threads at once, and show how many were admitted
 * against each rule's limit, with the headers and the 429 body a client
 * would see.
 *
 *   demo [rules.json] [store-uri]      (defaults: examples/rules.json,
 *                                        memory://)
 *   demo --fleet N rules.json store-uri
 *   demo --live N SECONDS store-uri     (demo_live.c)
 *
 * With the memory:// store the limits hold across every thread of this
 * process; with a shared store (redis://) they hold across every process
 * that uses it.  --fleet runs N gateway processes, each with its own
 * limiter, all serving the same client on one Redis: the limit holds for
 * the fleet, not per gateway.  examples/demo.sh starts the Redis.
 */
#include <ratelimit.h>

#include "demo.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4


typedef struct scenario {
    const char *title;
    rl_request req;
    int per_thread;          /* requests each thread fires               */
    _Atomic int admitted, rejected, soft, fallback;
    rl_result last_denial;   /* one denial, to show its headers          */
    _Atomic int have_denial;
} scenario;

static rl_limiter *lim;

static void *fire(void *arg)
{
    scenario *s = arg;
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < s->per_thread; i++) {
        if (rl_check(lim, &s->req, &res) != RL_OK) {
            fprintf(stderr, "rl_check: %s\n", rl_errmsg(lim));
            exit(1);
        }
        if (res.flags & RL_FLAG_SOFT)
            atomic_fetch_add(&s->soft, 1);
        if (res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN))
            atomic_fetch_add(&s->fallback, 1);
        if (res.allowed) {
            atomic_fetch_add(&s->admitted, 1);
        } else {
            atomic_fetch_add(&s->rejected, 1);
            if (atomic_exchange(&s->have_denial, 1) == 0)
                s->last_denial = res;
        }
    }
    return NULL;
}

static void run(scenario *s)
{
    pthread_t th[THREADS];
    char headers[512], body[128];
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, fire, s);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);

    printf("\n== %s\n", s->title);
    printf("   %d threads x %d requests: %d admitted, %d rejected",
           THREADS, s->per_thread, s->admitted, s->rejected);
    if (s->soft)
        printf(", %d flagged by a log-only rule", s->soft);
    if (s->fallback)
        printf(", %d decided locally (the store did not answer in time)",
               s->fallback);
    printf("\n");
    s->req.cost = 0; /* a free look at what is left, charging nothing */
    rl_check(lim, &s->req, &res);
    printf("   deciding rule %s: limit %lld per %lld s, %lld remaining\n",
           res.rule_id, (long long)res.limit, (long long)res.window,
           (long long)res.remaining);
    if (s->have_denial) {
        rl_headers_format(&s->last_denial, RL_HEADERS_IETF, headers,
                          sizeof headers);
        rl_body_format(&s->last_denial, body, sizeof body);
        printf("   a rejected request gets:\n   HTTP/1.1 429 Too Many "
               "Requests\n");
        for (char *line = strtok(headers, "\r\n"); line;
             line = strtok(NULL, "\r\n"))
            printf("   %s\n", line);
        printf("\n   %s\n", body);
    }
}

static int open_limiter(const char *rules, const char *store)
{
    rl_config *cfg = rl_config_new();

    /* A generous timeout: this demo shares two cores between its threads,
     * its processes and Redis.  Production keeps the 5 ms default. */
    if (!cfg || rl_config_set(cfg, "store", store) != RL_OK ||
        rl_config_set(cfg, "rules_file", rules) != RL_OK ||
        rl_config_set(cfg, "timeout_ms", "200") != RL_OK ||
        rl_limiter_new(&lim, cfg) != RL_OK) {
        fprintf(stderr, "demo: %s\n", rl_errmsg(NULL));
        rl_config_free(cfg);
        return -1;
    }
    rl_config_free(cfg);
    return 0;
}

/* One gateway of the fleet: its own process and limiter, four threads
 * serving alice's searches; writes how many it admitted to `out`. */
static void gateway(int out, const char *rules, const char *store)
{
    scenario s = {.req = {.size = sizeof(rl_request), .endpoint = "/search", .tier = "free",
                          .user = "alice", .cost = 1},
                  .per_thread = 25};
    pthread_t th[THREADS];
    int counts[3];

    if (open_limiter(rules, store) != 0)
        _exit(1);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, fire, &s);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    counts[0] = s.admitted;
    counts[1] = s.rejected;
    counts[2] = s.fallback;
    if (write(out, counts, sizeof counts) != sizeof counts)
        _exit(1);
    rl_limiter_free(lim);
    _exit(0);
}

static int fleet(int n, const char *rules, const char *store)
{
    int fds[64][2], total = 0, sent = 0, local = 0, counts[3];

    printf("libratelimit %s demo: a fleet of %d gateways on %s\n",
           rl_version_string(), n, store);
    printf("each gateway: its own process and limiter, %d threads x 25 "
           "searches by free-tier user alice (rule: 100 per minute)\n\n",
           THREADS);
    for (int i = 0; i < n; i++) {
        if (pipe(fds[i]) != 0)
            return 1;
        if (fork() == 0) {
            close(fds[i][0]);
            gateway(fds[i][1], rules, store);
        }
        close(fds[i][1]);
    }
    for (int i = 0; i < n; i++) {
        if (read(fds[i][0], counts, sizeof counts) != sizeof counts) {
            fprintf(stderr, "demo: gateway %d failed\n", i + 1);
            return 1;
        }
        printf("   gateway %d: %3d admitted, %3d rejected\n", i + 1,
               counts[0], counts[1]);
        total += counts[0];
        sent += counts[0] + counts[1];
        local += counts[2];
        close(fds[i][0]);
    }
    while (wait(NULL) > 0)
        ;
    printf("   fleet:     %3d admitted of %d sent: the limit is 100 for "
           "the fleet, not 100 per gateway (%d)\n", total, sent, 100 * n);
    if (local)
        printf("   (%d checks were decided by a gateway's local fallback: "
               "Redis did not answer within timeout_ms)\n", local);
    printf("\n");
    return total == 100 || local ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--live") == 0)
        return live(atoi(argv[2]), atoi(argv[3]), argv[4]);
    if (argc == 5 && strcmp(argv[1], "--fleet") == 0)
        return fleet(atoi(argv[2]) < 1 || atoi(argv[2]) > 64 ? 3
                                                             : atoi(argv[2]),
                     argv[3], argv[4]);

    const char *rules = argc > 1 ? argv[1] : "examples/rules.json";
    const char *store = argc > 2 ? argv[2] : "memory://";
    static scenario sc[] = {
        {.title = "GET /search as free-tier user alice (sliding window, "
                  "100/min; a log-only rule watches her IP at 50/min)",
         .req = {.size = sizeof(rl_request), .endpoint = "/search", .tier = "free", .user = "alice",
                 .ip = "203.0.113.5", .cost = 1},
         .per_thread = 50},
        {.title = "POST /api/orders with one API key (token bucket, 100/min, "
                  "burst 20)",
         .req = {.size = sizeof(rl_request), .endpoint = "/api/orders", .api_key = "k-123", .cost = 1},
         .per_thread = 10},
        {.title = "POST /login from one IP (fixed window, 5/min, fails "
                  "closed)",
         .req = {.size = sizeof(rl_request), .endpoint = "/login", .ip = "198.51.100.7", .cost = 1},
         .per_thread = 3},
    };

    if (open_limiter(rules, store) != 0)
        return 1;
    printf("libratelimit %s demo: store %s, rules %s (version %lld)\n",
           rl_version_string(), store, rules,
           (long long)rl_rules_version(lim));
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
        run(&sc[i]);
    rl_limiter_free(lim);
    return 0;
}
