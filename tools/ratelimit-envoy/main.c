/*
 * main.c -- ratelimit-envoy(8): the command line, the library's limiter
 * (every -o name=value goes to rl_config_set, so the store URI, timeouts,
 * failure handling, deny cache and the rest are the library's options;
 * -o rules_source=... instead of -c takes the rules from ratelimitd's
 * set), the service, its server and its metrics listener, and the main
 * thread's signal loop: SIGHUP
 * reloads the configuration, so does a change seen by the once-a-second
 * look at its files; SIGTERM and SIGINT stop gracefully (the calls in
 * flight answered, cancelled past --grace).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "envoy_rls.h"

#define LISTEN_MAX 16

typedef struct args {
    const char *config;
    rls_listen listen[LISTEN_MAX];
    size_t nlisten;
    rls_tls tls;
    int threads, grace_ms;
    const char *algorithm;
    unsigned headers;
    int rules_source; /* -o rules_source=... given */
    const char *metrics_listen;
} args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ratelimit-envoy -c CONFIG [-l ADDR]... [-L ADDR]...\n"
            "         [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM]]\n"
            "         [-o NAME=VALUE]... [-t THREADS] [-a ALGORITHM]\n"
            "         [--headers x|ietf|none] [--grace MS]\n"
            "         [--metrics-listen HOST:PORT]\n"
            "  -c  a YAML file or a directory of them (envoyproxy/ratelimit's format);\n"
            "      without it, -o rules_source=... (ratelimitd's rules) is required\n"
            "  -l  a plain-text listener (default 127.0.0.1:8081); -L a TLS one\n"
            "  -o  a library option (store=redis://..., timeout_ms=50, ...)\n");
}

static int parse_headers(const char *s, unsigned *out)
{
    if (!strcmp(s, "x"))
        return *out = 0, 0;
    if (!strcmp(s, "ietf"))
        return *out = RL_HEADERS_IETF, 0;
    if (!strcmp(s, "none"))
        return *out = RLS_HEADERS_NONE, 0;
    return -1;
}

static int set_option(args *a, rl_config *cfg, char *kv)
{
    char *eq = strchr(kv, '=');
    int rc;

    if (!eq) {
        fprintf(stderr, "ratelimit-envoy: -o %s: NAME=VALUE expected\n", kv);
        return -1;
    }
    *eq = '\0';
    rc = rl_config_set(cfg, kv, eq + 1);
    if (!strcmp(kv, "rules_source"))
        a->rules_source = *(eq + 1) != '\0';
    if (rc != RL_OK)
        fprintf(stderr, "ratelimit-envoy: option %s: %s\n", kv,
                rl_strerror(rc));
    *eq = '=';
    return rc == RL_OK ? 0 : -1;
}

static int add_listen(args *a, const char *addr, int tls)
{
    if (a->nlisten == LISTEN_MAX)
        return -1;
    a->listen[a->nlisten++] = (rls_listen){.addr = addr, .tls = tls};
    return 0;
}

static int parse_args(int argc, char **argv, args *a, rl_config *cfg)
{
    enum { O_CERT = 256, O_KEY, O_CA, O_HEADERS, O_GRACE, O_METRICS };
    static const struct option longs[] = {
        {"config", 1, NULL, 'c'},       {"listen", 1, NULL, 'l'},
        {"listen-tls", 1, NULL, 'L'},   {"option", 1, NULL, 'o'},
        {"threads", 1, NULL, 't'},      {"algorithm", 1, NULL, 'a'},
        {"tls-cert", 1, NULL, O_CERT},  {"tls-key", 1, NULL, O_KEY},
        {"tls-client-ca", 1, NULL, O_CA}, {"headers", 1, NULL, O_HEADERS},
        {"grace", 1, NULL, O_GRACE},    {"help", 0, NULL, 'h'},
        {"metrics-listen", 1, NULL, O_METRICS},
        {NULL, 0, NULL, 0}};
    int c;

    *a = (args){.threads = 2, .grace_ms = 10000,
                .algorithm = "sliding_window"};
    while ((c = getopt_long(argc, argv, "c:l:L:o:t:a:h", longs, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'c': a->config = optarg; break;
        case 'l': bad = add_listen(a, optarg, 0); break;
        case 'L': bad = add_listen(a, optarg, 1); break;
        case 'o': bad = set_option(a, cfg, optarg); break;
        case 't': a->threads = atoi(optarg); bad = a->threads < 1; break;
        case 'a': a->algorithm = optarg; break;
        case O_CERT: a->tls.cert_file = optarg; break;
        case O_KEY: a->tls.key_file = optarg; break;
        case O_CA: a->tls.client_ca_file = optarg; break;
        case O_HEADERS: bad = parse_headers(optarg, &a->headers); break;
        case O_GRACE: a->grace_ms = atoi(optarg); bad = a->grace_ms < 0; break;
        case O_METRICS: a->metrics_listen = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: bad = 1;
        }
        if (bad) {
            usage(stderr);
            return -1;
        }
    }
    if (!a->config == !a->rules_source || optind != argc) {
        if (a->config && a->rules_source)
            fprintf(stderr, "ratelimit-envoy: -c or -o rules_source, not "
                    "both: a limiter holds one rule set\n");
        usage(stderr);
        return -1;
    }
    if (!a->nlisten)
        add_listen(a, "127.0.0.1:8081", 0);
    return 0;
}

static void reload(rls_service *svc, const char *why)
{
    char err[512];

    if (rls_service_reload(svc, err, sizeof err))
        fprintf(stderr, "ratelimit-envoy: %s: configuration refused, the "
                "last good one stays: %s\n", why, err);
    else
        fprintf(stderr, "ratelimit-envoy: %s: configuration reloaded\n", why);
}

/* Until SIGTERM or SIGINT: reload on SIGHUP and when the files change. */
static void signal_loop(rls_service *svc, const sigset_t *set)
{
    uint64_t sig = svc->config_path ? ecfg_signature(svc->config_path) : 0;
    struct timespec second = {.tv_sec = 1};

    for (;;) {
        int s = sigtimedwait(set, NULL, &second);
        if (s == SIGTERM || s == SIGINT)
            return;
        if (!svc->config_path)
            continue; /* the rules_source follows its set by itself */
        uint64_t now = ecfg_signature(svc->config_path);
        if (s == SIGHUP)
            reload(svc, "SIGHUP");
        else if (now != sig)
            reload(svc, "files changed");
        sig = now;
    }
}

int main(int argc, char **argv)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    rls_service svc;
    rls_server *srv;
    rls_metrics *met = NULL;
    sigset_t set;
    args a;
    char err[512];
    int rc;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    /* before any thread starts (the library's, gRPC's): the main thread
     * alone takes them, in signal_loop */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (!cfg || parse_args(argc, argv, &a, cfg)) {
        rl_config_free(cfg);
        return 2;
    }
    if ((rc = rl_limiter_new(&lim, cfg)) != RL_OK) {
        fprintf(stderr, "ratelimit-envoy: limiter: %s (%s)\n",
                rl_errmsg(lim), rl_strerror(rc));
        return 1;
    }
    rl_config_free(cfg);
    if (rls_service_init(&svc, lim, a.config, a.algorithm, a.headers, err,
                         sizeof err)) {
        fprintf(stderr, "ratelimit-envoy: %s\n", err);
        rls_service_destroy(&svc);
        rl_limiter_free(lim);
        return 1;
    }
    if (!(srv = rls_server_start(&svc, a.listen, a.nlisten, &a.tls, a.threads,
                                 err, sizeof err))) {
        fprintf(stderr, "ratelimit-envoy: %s\n", err);
        rls_service_destroy(&svc);
        rl_limiter_free(lim);
        return 1;
    }
    if (a.metrics_listen &&
        !(met = rls_metrics_start(&svc, a.metrics_listen, err, sizeof err))) {
        fprintf(stderr, "ratelimit-envoy: metrics: %s\n", err);
        rls_server_stop(srv, 0);
        rls_service_destroy(&svc);
        rl_limiter_free(lim);
        return 1;
    }
    signal_loop(&svc, &set);
    fprintf(stderr, "ratelimit-envoy: stopping\n");
    rls_server_stop(srv, a.grace_ms);
    rls_metrics_stop(met);
    rls_service_destroy(&svc);
    rl_limiter_free(lim);
    return 0;
}
