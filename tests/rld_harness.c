/*
 * rld_harness.c -- starts, stops and crashes a real ratelimitd for the
 * tests, and speaks HTTP to it with libcurl (see rld_harness.h).
 *
 * The server is exec()ed from a forked child with its death signal set, its
 * stdout to /dev/null and its stderr to rld.log in the temp dir; the port
 * comes back through --port-file (written whole by a rename), so a test
 * never guesses a port nor sleeps for a start.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "rld_harness.h"
#include "child_exec.h"
#include "timeutil.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RLD_READY_MS 10000
#define RLD_STOP_MS 10000
#define RLD_HTTP_TIMEOUT_MS 5000
#define RLD_TAIL 2048

static const char *binary(void)
{
    static char path[512];
    const char *env = getenv("RATELIMITD"), *top = getenv("top_builddir");

    if (env && *env)
        return env;
    snprintf(path, sizeof path, "%s/tools/ratelimitd/ratelimitd",
             top && *top ? top : ".");
    return path;
}

int rld_available(void)
{
    if (access(binary(), X_OK) != 0) {
        fprintf(stderr, "rld: %s: %s\n", binary(), strerror(errno));
        return 0;
    }
    return 1;
}

void rld_log_tail(const rld *d, char *buf, size_t len)
{
    FILE *f = fopen(d->log, "r");
    long size;
    size_t n = 0;

    buf[0] = '\0';
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size > (long)len - 1 ? size - ((long)len - 1) : 0, SEEK_SET);
    n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static int make_dir(rld *d)
{
    char path[320];
    FILE *f;

    snprintf(d->dir, sizeof d->dir, "/tmp/rld-test-XXXXXX");
    if (!mkdtemp(d->dir))
        return -1;
    snprintf(d->db, sizeof d->db, "%s/rules.db", d->dir);
    snprintf(d->log, sizeof d->log, "%s/rld.log", d->dir);
    snprintf(path, sizeof path, "%s/tokens", d->dir);
    if (!(f = fopen(path, "w")))
        return -1;
    fprintf(f, "# operators\n%s:%s\n%s:%s\n", RLD_ALICE, RLD_ALICE_TOKEN,
            RLD_BOB, RLD_BOB_TOKEN);
    fclose(f);
    return chmod(path, 0600);
}

/* In the child: death signal, stdio, clean signals, exec. */
static void child(const rld *d, char **argv, pid_t parent)
{
    int out, nul;

    child_bind(parent);
    out = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    nul = open("/dev/null", O_RDWR);
    child_exec(binary(), argv, nul, nul, out);
}

static pid_t spawn(const rld *d, const char *const *args, int standard)
{
    char *argv[RLD_ARGS_MAX + 12], tokens[320], port[320];
    int n = 0;
    pid_t parent = getpid(), pid;

    snprintf(tokens, sizeof tokens, "%s/tokens", d->dir);
    snprintf(port, sizeof port, "%s/port", d->dir);
    argv[n++] = (char *)"ratelimitd";
    if (standard) {
        const char *std[] = {"--token-file", tokens, "--db", d->db,
                             "--listen", "127.0.0.1:0", "--port-file", port};
        for (size_t i = 0; i < sizeof std / sizeof std[0]; i++)
            argv[n++] = (char *)std[i];
    }
    for (int i = 0; args && args[i] && i < RLD_ARGS_MAX; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    unlink(port);
    if ((pid = fork()) == 0)
        child(d, argv, parent);
    return pid;
}

/* The port from the port file, once the server wrote it. */
static int wait_port(rld *d)
{
    char path[320];
    int64_t end = now_ms() + RLD_READY_MS;
    int status;

    snprintf(path, sizeof path, "%s/port", d->dir);
    while (now_ms() < end) {
        FILE *f = fopen(path, "r");
        if (f) {
            int ok = fscanf(f, "%d", &d->port) == 1;
            fclose(f);
            if (ok)
                return 0;
        }
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = 0;
            return -1;
        }
        sleep_ms(5);
    }
    return -1;
}

int rld_start(rld *d, const char *const *args)
{
    char tail[RLD_TAIL];

    if (!d->dir[0] && make_dir(d)) {
        fprintf(stderr, "rld: temp dir: %s\n", strerror(errno));
        return -1;
    }
    if ((d->pid = spawn(d, args, 1)) < 0) {
        d->pid = 0;
        return -1;
    }
    if (wait_port(d)) {
        rld_kill(d);
        rld_log_tail(d, tail, sizeof tail);
        fprintf(stderr, "rld: ratelimitd did not start:\n%s\n", tail);
        return -1;
    }
    snprintf(d->url, sizeof d->url, "http://127.0.0.1:%d", d->port);
    return 0;
}

/* Wait for pid up to ms; its wait status, or -1 if still running. */
static int wait_for(pid_t pid, int ms)
{
    int64_t end = now_ms() + ms;
    int status;

    do {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
        sleep_ms(5);
    } while (now_ms() < end);
    return -1;
}

int rld_run(rld *d, const char *const *args)
{
    pid_t pid;
    int status;

    if (!d->dir[0] && make_dir(d))
        return -1;
    if ((pid = spawn(d, args, 0)) < 0)
        return -1;
    if ((status = wait_for(pid, RLD_STOP_MS)) < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int rld_stop(rld *d)
{
    int status;

    if (!d->pid)
        return -1;
    kill(d->pid, SIGTERM);
    if ((status = wait_for(d->pid, RLD_STOP_MS)) < 0) {
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
    }
    d->pid = 0;
    return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int rld_kill(rld *d)
{
    if (!d->pid)
        return -1;
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void rld_cleanup(rld *d)
{
    if (d->pid)
        rld_stop(d);
    if (d->dir[0])
        nftw(d->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    d->dir[0] = '\0';
}

/* ---- HTTP ------------------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    rld_resp *r = arg;
    char *b = realloc(r->body, r->len + size * n + 1);

    if (!b)
        return 0;
    memcpy(b + r->len, p, size * n);
    r->len += size * n;
    b[r->len] = '\0';
    r->body = b;
    return size * n;
}

/* Keep a header's value (trimmed) if it is `name`. */
static void keep(const char *line, size_t n, const char *name, char *out,
                 size_t len)
{
    size_t k = strlen(name);

    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return;
    line += k + 1;
    n -= k + 1;
    while (n && (*line == ' '))
        line++, n--;
    while (n && (line[n - 1] == '\r' || line[n - 1] == '\n'))
        n--;
    snprintf(out, len, "%.*s", (int)n, line);
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    rld_resp *r = arg;

    keep(p, size * n, "ETag", r->etag, sizeof r->etag);
    keep(p, size * n, "Allow", r->allow, sizeof r->allow);
    keep(p, size * n, "WWW-Authenticate", r->www_auth, sizeof r->www_auth);
    keep(p, size * n, "Content-Type", r->content_type,
         sizeof r->content_type);
    return size * n;
}

static struct curl_slist *header_list(const char *token,
                                      const char *const *headers, int body)
{
    struct curl_slist *h = NULL;
    char line[256];
    int typed = 0;

    if (token) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", token);
        h = curl_slist_append(h, line);
    }
    for (int i = 0; headers && headers[i]; i++) {
        typed |= strncasecmp(headers[i], "Content-Type:", 13) == 0;
        h = curl_slist_append(h, headers[i]);
    }
    if (body && !typed)
        h = curl_slist_append(h, "Content-Type: application/json");
    return curl_slist_append(h, "Expect:");
}

long rld_http(const rld *d, const char *method, const char *path,
              const char *token, const char *const *headers,
              const char *body, size_t len, rld_resp *r)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = header_list(token, headers, body != NULL);
    char url[2048];

    memset(r, 0, sizeof *r);
    r->body = calloc(1, 1);
    snprintf(url, sizeof url, "%s%s", d->url, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)RLD_HTTP_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r->status;
}

void rld_resp_free(rld_resp *r)
{
    free(r->body);
    r->body = NULL;
}

int rld_raw(const rld *d, const char *request, size_t len)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)d->port)};
    char buf[64] = "";
    size_t got = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), status = -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        send(fd, request, len, MSG_NOSIGNAL) != (ssize_t)len)
        goto out;
    while (got < sizeof buf - 1 && poll(&p, 1, RLD_HTTP_TIMEOUT_MS) == 1) {
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        if (strchr(buf, '\n'))
            break;
    }
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = -1;
out:
    if (fd >= 0)
        close(fd);
    return status;
}
