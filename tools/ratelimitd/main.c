/*
 * main.c -- ratelimitd's flags, start-up and shutdown (see ratelimitd(8)).
 *
 * Start-up, each step refusing to go on with a message on failure: read the
 * tokens, start the Redis publisher (it connects on its own, Redis may be
 * away), open the database and load the stored set (offered to the
 * publisher at once), bind, serve, then say where ("listening on
 * ADDR:PORT" on stdout, and the port in --port-file).  Signals are blocked
 * in every thread and taken by the main thread with sigwait(): SIGTERM or
 * SIGINT stops the server (requests in flight finish; a change either
 * commits and is answered, or never started), the publisher and the
 * database, in that order; SIGHUP reads the token file again (swapped
 * under the HTTP side's lock: a request checks against the old set or
 * the new) and reopens --log-file.
 */
#include "ratelimitd.h"
#include "ratelimit.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEFAULT_LISTEN "127.0.0.1:8089"
#define DEFAULT_DB "/var/lib/ratelimitd/rules.db"
#define DEFAULT_KEY "rl:rules"
#define DEFAULT_MAX_BODY 65536
#define DEFAULT_THREADS 4
#define DEFAULT_REDIS_TIMEOUT_MS 1000
#define DEFAULT_REDIS_GRACE_MS 10000
#define LISTEN_BACKLOG 128
#define URI_FILE_MAX 1024

typedef struct flags {
    const char *listen, *db, *redis, *key, *token_file, *port_file;
    const char *log_file;
    const char *tls_ca_file, *tls_ca_dir, *tls_cert_file, *tls_key_file;
    long long max_body, threads, redis_timeout_ms, redis_grace_ms;
    int read_auth;
} flags;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: ratelimitd --token-file PATH [--db PATH] [--listen ADDR:PORT]\n"
        "                  [--redis URI|@FILE] [--redis-key NAME]\n"
        "                  [--redis-timeout-ms MS] [--redis-grace-ms MS]\n"
        "                  [--read-auth]\n"
        "                  [--tls-ca-file FILE] [--tls-ca-dir DIR]\n"
        "                  [--tls-cert-file FILE --tls-key-file FILE]\n"
        "                  [--max-body BYTES] [--threads N]\n"
        "                  [--port-file PATH] [--log-file PATH]\n"
        "       ratelimitd --version | --help\n"
        "defaults: --listen " DEFAULT_LISTEN " --db " DEFAULT_DB
        " --redis-key " DEFAULT_KEY "\n"
        "see ratelimitd(8)\n");
}

static int number(const char *name, const char *s, long long lo,
                  long long hi, long long *out)
{
    char *end;

    errno = 0;
    *out = strtoll(s, &end, 10);
    if (errno || end == s || *end || *out < lo || *out > hi) {
        fprintf(stderr, "ratelimitd: --%s: must be %lld..%lld\n", name, lo,
                hi);
        return -1;
    }
    return 0;
}

static int parse_flags(int argc, char **argv, flags *f)
{
    static const struct option opts[] = {
        {"listen", required_argument, 0, 'l'},
        {"db", required_argument, 0, 'd'},
        {"redis", required_argument, 0, 'r'},
        {"redis-key", required_argument, 0, 'k'},
        {"redis-timeout-ms", required_argument, 0, 'T'},
        {"redis-grace-ms", required_argument, 0, 'G'},
        {"tls-ca-file", required_argument, 0, 'C'},
        {"tls-ca-dir", required_argument, 0, 'D'},
        {"tls-cert-file", required_argument, 0, 'E'},
        {"tls-key-file", required_argument, 0, 'K'},
        {"token-file", required_argument, 0, 't'},
        {"read-auth", no_argument, 0, 'a'},
        {"max-body", required_argument, 0, 'm'},
        {"threads", required_argument, 0, 'n'},
        {"port-file", required_argument, 0, 'p'},
        {"log-file", required_argument, 0, 'L'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    int c, bad = 0;

    *f = (flags){.listen = DEFAULT_LISTEN, .db = DEFAULT_DB,
                 .key = DEFAULT_KEY, .max_body = DEFAULT_MAX_BODY,
                 .threads = DEFAULT_THREADS,
                 .redis_timeout_ms = DEFAULT_REDIS_TIMEOUT_MS,
                 .redis_grace_ms = DEFAULT_REDIS_GRACE_MS};
    while (!bad && (c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'l': f->listen = optarg; break;
        case 'd': f->db = optarg; break;
        case 'r': f->redis = optarg; break;
        case 'k': f->key = optarg; break;
        case 'C': f->tls_ca_file = optarg; break;
        case 'D': f->tls_ca_dir = optarg; break;
        case 'E': f->tls_cert_file = optarg; break;
        case 'K': f->tls_key_file = optarg; break;
        case 't': f->token_file = optarg; break;
        case 'p': f->port_file = optarg; break;
        case 'L': f->log_file = optarg; break;
        case 'a': f->read_auth = 1; break;
        case 'T':
            bad = number("redis-timeout-ms", optarg, 10, 60000,
                         &f->redis_timeout_ms);
            break;
        case 'G':
            bad = number("redis-grace-ms", optarg, 0, 3600000,
                         &f->redis_grace_ms);
            break;
        case 'm':
            bad = number("max-body", optarg, 1024, 16 << 20, &f->max_body);
            break;
        case 'n': bad = number("threads", optarg, 1, 64, &f->threads); break;
        case 'h': usage(stdout); exit(0);
        case 'V':
            printf("ratelimitd (libratelimit) %s\n", rl_version_string());
            exit(0);
        default: bad = 1;
        }
    }
    if (!bad && optind < argc) {
        fprintf(stderr, "ratelimitd: unexpected argument %s\n", argv[optind]);
        bad = 1;
    }
    if (!bad && !f->token_file) {
        fprintf(stderr, "ratelimitd: --token-file is required (tokens are "
                        "never taken from the command line)\n");
        bad = 1;
    }
    if (bad)
        usage(stderr);
    return bad ? -1 : 0;
}

/* Bind and listen on "host:port" ("[v6]:port" too; port 0: any free). */
static int listen_on(const char *spec, char *shown, size_t len)
{
    char host[256], port[16];
    const char *colon = strrchr(spec, ':');
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE}, *ai;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = -1, one = 1, rc;
    size_t hl;

    if (!colon || (hl = (size_t)(colon - spec)) == 0 || hl >= sizeof host ||
        strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof port) {
        fprintf(stderr, "ratelimitd: --listen %s: expected ADDR:PORT\n",
                spec);
        return -1;
    }
    memcpy(host, spec[0] == '[' ? spec + 1 : spec, hl);
    host[spec[0] == '[' && hl >= 2 ? hl - 2 : hl] = '\0';
    strcpy(port, colon + 1);
    if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0) {
        fprintf(stderr, "ratelimitd: --listen %s: %s\n", spec,
                gai_strerror(rc));
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) ||
        listen(fd, LISTEN_BACKLOG) ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) ||
        getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port,
                    sizeof port, NI_NUMERICHOST | NI_NUMERICSERV)) {
        fprintf(stderr, "ratelimitd: --listen %s: %s\n", spec,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    snprintf(shown, len, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
    freeaddrinfo(ai);
    return fd;
}

/* The port alone in PATH, written whole (a temp file renamed). */
static int write_port_file(const char *path, const char *shown)
{
    char tmp[PATH_MAX];
    FILE *f;

    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "w")) ||
        fprintf(f, "%s\n", strrchr(shown, ':') + 1) < 0 || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
        fprintf(stderr, "ratelimitd: --port-file %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* --redis @FILE: the URI (and so its password) kept out of the command
 * line, like the tokens. */
static const char *redis_uri(const char *arg, char *buf, size_t len)
{
    FILE *f;

    if (arg[0] != '@')
        return arg;
    if (!(f = fopen(arg + 1, "r")) || !fgets(buf, (int)len, f)) {
        fprintf(stderr, "ratelimitd: --redis %s: %s\n", arg,
                f ? "empty" : strerror(errno));
        if (f)
            fclose(f);
        return NULL;
    }
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
    return buf;
}

typedef struct parts {
    auth *tokens;
    publisher *pub;
    service *svc;
    http *srv;
    int fd;
} parts;

/* --log-file: the log (stderr) appended to PATH, opened anew, so that a
 * file moved away by logrotate is left behind.  0, or -1 (said on the
 * log as it was). */
static int open_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);

    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
        log_line("--log-file %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* SIGHUP: the token file read again (kept as it was if it cannot be: the
 * log says why) and the log file reopened. */
static void reload(const flags *f, parts *p)
{
    char err[1024];
    auth *fresh;

    if (f->log_file && open_log(f->log_file) == 0)
        log_line("SIGHUP: log file %s reopened", f->log_file);
    if (auth_load(f->token_file, &fresh, err, sizeof err)) {
        log_line("SIGHUP: the tokens stay as they were: %s", err);
        return;
    }
    auth_free((auth *)http_swap_tokens(p->srv, fresh));
    p->tokens = fresh;
    log_line("SIGHUP: tokens read again from %s", f->token_file);
}

static int start(const flags *f, parts *p)
{
    char err[1024], shown[300], uri[URI_FILE_MAX];
    const char *u;

    if (f->log_file && open_log(f->log_file))
        return -1;
    if (auth_load(f->token_file, &p->tokens, err, sizeof err))
        goto fail;
    if (f->redis) {
        publisher_opts po = {.key = f->key,
                             .timeout_ms = (int)f->redis_timeout_ms,
                             .grace_ms = f->redis_grace_ms,
                             .tls_ca_file = f->tls_ca_file,
                             .tls_ca_dir = f->tls_ca_dir,
                             .tls_cert_file = f->tls_cert_file,
                             .tls_key_file = f->tls_key_file};
        if (!(u = redis_uri(f->redis, uri, sizeof uri)))
            return -1;
        po.uri = u;
        if (publisher_start(&p->pub, &po, err, sizeof err))
            goto fail;
    }
    if (service_open(&p->svc, f->db, p->pub, err, sizeof err))
        goto fail;
    if ((p->fd = listen_on(f->listen, shown, sizeof shown)) < 0)
        return -1;
    http_opts ho = {.listen_fd = p->fd, .threads = (unsigned)f->threads,
                    .max_body = (size_t)f->max_body,
                    .read_auth = f->read_auth, .tokens = p->tokens,
                    .svc = p->svc, .pub = p->pub};
    if (http_start(&p->srv, &ho, err, sizeof err))
        goto fail;
    if (f->port_file && write_port_file(f->port_file, shown))
        return -1;
    log_line("listening on %s, database %s, redis %s%s", shown, f->db,
             p->pub ? "on" : "off", f->read_auth ? ", reads need a token" : "");
    printf("listening on %s\n", shown);
    fflush(stdout);
    return 0;
fail:
    log_line("%s", err);
    return -1;
}

static void stop(parts *p)
{
    http_stop(p->srv);
    if (p->fd >= 0)
        close(p->fd);
    publisher_stop(p->pub);
    service_close(p->svc);
    auth_free(p->tokens);
}

int main(int argc, char **argv)
{
    flags f;
    parts p = {.fd = -1};
    sigset_t set;
    int sig = 0, rc;

    if (parse_flags(argc, argv, &f))
        return 2;
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts */
    rc = start(&f, &p);
    while (rc == 0 && sigwait(&set, &sig) == 0 && sig == SIGHUP)
        reload(&f, &p);
    if (rc == 0)
        log_line("%s: stopping", strsignal(sig));
    stop(&p);
    if (rc == 0)
        log_line("stopped");
    return rc == 0 ? 0 : 1;
}
