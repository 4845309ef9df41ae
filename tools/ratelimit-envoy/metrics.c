/*
 * metrics.c -- ratelimit-envoy's --metrics-listen: GET /metrics over plain
 * HTTP/1.1 for a Prometheus scraper, the library's metrics
 * (rl_metrics_write_cb: per rule, per shard, latency, rule set) followed
 * by the service's own counters (rls_counters: calls by gRPC status,
 * responses by overall code, descriptors by code, health checks).  One
 * thread of its own, one connection at a time (a scrape every few
 * seconds, not the request path): it reads the request head within
 * READ_MS, answers and closes.  Anything but GET is 405, any other path
 * 404.  Stop: an eventfd in every poll, so the thread leaves at once.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/status.h>

#include "envoy_rls.h"

#define HEAD_MAX 8192 /* bytes of a request head */
#define READ_MS 2000  /* to read it              */

struct rls_metrics {
    rls_service *svc;
    int lfd, stop_fd;
    pthread_t thread;
};

typedef struct text {
    char *p;
    size_t len, cap;
    int oom;
} text;

static int add(void *arg, const char *p, size_t n)
{
    text *t = arg;

    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *q = realloc(t->p, cap);
        if (!q)
            return t->oom = 1, -1;
        t->p = q, t->cap = cap;
    }
    memcpy(t->p + t->len, p, n);
    t->len += n;
    return 0;
}

static void addf(text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void addf(text *t, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0)
        add(t, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static uint64_t get(const uint64_t *v)
{
    return __atomic_load_n(v, __ATOMIC_RELAXED);
}

/* grpc_status_code's names, by number. */
static const char *const status_names[RLS_GRPC_CODES] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};

static void service_counters(text *t, const rls_counters *k)
{
    addf(t, "# HELP ratelimit_envoy_calls_total ShouldRateLimit calls "
            "answered, by gRPC status.\n"
            "# TYPE ratelimit_envoy_calls_total counter\n");
    for (int i = 0; i < RLS_GRPC_CODES; i++)
        addf(t, "ratelimit_envoy_calls_total{code=\"%s\"} %llu\n",
             status_names[i], (unsigned long long)get(&k->status[i]));
    addf(t, "# HELP ratelimit_envoy_responses_total Responses (status OK), "
            "by overall_code.\n"
            "# TYPE ratelimit_envoy_responses_total counter\n"
            "ratelimit_envoy_responses_total{overall_code=\"OK\"} %llu\n"
            "ratelimit_envoy_responses_total{overall_code=\"OVER_LIMIT\"} "
            "%llu\n",
         (unsigned long long)get(&k->overall_ok),
         (unsigned long long)get(&k->overall_over));
    addf(t, "# HELP ratelimit_envoy_descriptors_total Descriptors answered, "
            "by code.\n"
            "# TYPE ratelimit_envoy_descriptors_total counter\n"
            "ratelimit_envoy_descriptors_total{code=\"OK\"} %llu\n"
            "ratelimit_envoy_descriptors_total{code=\"OVER_LIMIT\"} %llu\n",
         (unsigned long long)get(&k->descriptors_ok),
         (unsigned long long)get(&k->descriptors_over));
    addf(t, "# HELP ratelimit_envoy_health_checks_total grpc.health.v1 "
            "Health/Check calls.\n"
            "# TYPE ratelimit_envoy_health_checks_total counter\n"
            "ratelimit_envoy_health_checks_total %llu\n",
         (unsigned long long)get(&k->health));
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w, n -= (size_t)w;
    }
}

static void reply(int fd, const char *status, const char *type,
                  const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, type, len);

    send_all(fd, head, (size_t)n);
    send_all(fd, body, len);
}

/* The request head, NUL-terminated, or -1 (too long, too slow, closed). */
static int read_head(rls_metrics *m, int fd, char *buf)
{
    struct pollfd pf[2] = {{.fd = fd, .events = POLLIN},
                           {.fd = m->stop_fd, .events = POLLIN}};
    size_t len = 0;

    for (;;) {
        if (poll(pf, 2, READ_MS) <= 0 || pf[1].revents)
            return -1;
        ssize_t r = recv(fd, buf + len, HEAD_MAX - 1 - len, 0);
        if (r <= 0)
            return -1;
        len += (size_t)r;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
            return 0;
        if (len == HEAD_MAX - 1)
            return -1;
    }
}

static void serve(rls_metrics *m, int fd)
{
    char *head = malloc(HEAD_MAX);
    text t = {0};
    static const char plain[] = "text/plain; charset=utf-8";

    if (!head || read_head(m, fd, head)) {
        free(head);
        return;
    }
    if (strncmp(head, "GET ", 4)) {
        reply(fd, "405 Method Not Allowed", plain, "GET only\n", 9);
    } else if (strncmp(head + 4, "/metrics ", 9) &&
               strncmp(head + 4, "/metrics?", 9)) {
        reply(fd, "404 Not Found", plain, "/metrics only\n", 14);
    } else if (rl_metrics_write_cb(m->svc->lim, add, &t) != RL_OK ||
               (service_counters(&t, &m->svc->counters), t.oom)) {
        reply(fd, "500 Internal Server Error", plain, "out of memory\n", 14);
    } else {
        reply(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8",
              t.p, t.len);
    }
    free(t.p);
    free(head);
}

static void *loop(void *arg)
{
    rls_metrics *m = arg;
    struct pollfd pf[2] = {{.fd = m->lfd, .events = POLLIN},
                           {.fd = m->stop_fd, .events = POLLIN}};

    for (;;) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            return NULL;
        if (pf[1].revents)
            return NULL;
        if (!(pf[0].revents & POLLIN))
            continue;
        int fd = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        serve(m, fd);
        close(fd);
    }
}

/* A listening socket on "host:port" ("[v6]:port" too); -1 with err. */
static int listen_on(const char *addr, int *port, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE}, *res = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = -1, one = 1;
    size_t hl;

    if (!colon || (hl = (size_t)(colon - addr)) >= sizeof host)
        return snprintf(err, errlen, "%s: HOST:PORT expected", addr), -1;
    if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']')
        memcpy(host, addr + 1, hl - 2), host[hl - 2] = '\0';
    else
        memcpy(host, addr, hl), host[hl] = '\0';
    if (getaddrinfo(*host ? host : NULL, colon + 1, &hints, &res) || !res)
        return snprintf(err, errlen, "%s: no such address", addr), -1;
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 16) ||
        getsockname(fd, (struct sockaddr *)&ss, &sl)) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    *port = ntohs(ss.ss_family == AF_INET6
                      ? ((struct sockaddr_in6 *)&ss)->sin6_port
                      : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

rls_metrics *rls_metrics_start(rls_service *svc, const char *addr, char *err,
                               size_t errlen)
{
    rls_metrics *m = calloc(1, sizeof *m);
    int port = 0;

    if (!m)
        return snprintf(err, errlen, "out of memory"), NULL;
    *m = (rls_metrics){.svc = svc, .stop_fd = eventfd(0, EFD_CLOEXEC)};
    if (m->stop_fd < 0 ||
        (m->lfd = listen_on(addr, &port, err, errlen)) < 0) {
        if (m->stop_fd < 0)
            snprintf(err, errlen, "eventfd: %s", strerror(errno));
        else
            close(m->stop_fd);
        free(m);
        return NULL;
    }
    /* the port, for a listener on port 0 (tests read it) */
    printf("metrics on %s port %d\n", addr, port);
    fflush(stdout);
    pthread_create(&m->thread, NULL, loop, m);
    return m;
}

void rls_metrics_stop(rls_metrics *m)
{
    uint64_t one = 1;

    if (!m)
        return;
    if (write(m->stop_fd, &one, sizeof one) < 0)
        perror("ratelimit-envoy: eventfd");
    pthread_join(m->thread, NULL);
    close(m->lfd);
    close(m->stop_fd);
    free(m);
}
