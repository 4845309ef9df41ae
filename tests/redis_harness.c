/*
 * redis_harness.c -- starts, stops, crashes, restarts and freezes real
 * redis-server processes for the tests (see redis_harness.h for the rules).
 *
 * Each server gets a mkdtemp dir /tmp/rh-redis-* holding redis.conf,
 * redis.log (the server's log), stdio.log (its stdout/stderr: config errors
 * land there, before the log file is open), redis.sock, and owner (the
 * process that made it, so that the next run can sweep the dirs of runs
 * that died without cleaning up).  A small registry, keyed by
 * that dir, remembers per server which process forked it (only that one can
 * waitpid it), which process made the dir (only that one removes it at exit)
 * and whether the server rejected `enable-debug-command`.  The registry lives
 * in process memory, so a forked Check test sees a copy: its atexit handler
 * leaves the runner's servers alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "redis_harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RH_MAX_SERVERS 32
#define RH_START_TRIES 5
#define RH_READY_MS 5000   /* from exec to PONG                          */
#define RH_STOP_MS 5000    /* SIGTERM grace before SIGKILL               */
#define RH_SIGNAL_MS 2000  /* for SIGSTOP / SIGCONT / SIGKILL to land    */
#define RH_CONNECT_MS 1000 /* rh_connect()'s connect and command timeout */
#define RH_TAIL_BYTES 2048
#define RH_TMP "/tmp"
#define RH_PREFIX "rh-redis-"

typedef struct rh_entry {
    char dir[256];  /* "" = free slot */
    pid_t pid;      /* server process, 0 when not running */
    pid_t spawner;  /* the process that forked pid */
    pid_t creator;  /* the process that made dir */
    int no_debug;   /* the server rejected enable-debug-command */
} rh_entry;

static rh_entry registry[RH_MAX_SERVERS];
static int atexit_registered, swept;

/* ---- small utilities ---------------------------------------------------- */

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static struct timeval tv_ms(long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    return tv;
}

static int is_main_thread(void)
{
    return (pid_t)syscall(SYS_gettid) == getpid();
}

/* Full path of `name` from PATH into out; -1 if not there. */
static int find_exe(const char *name, char *out, size_t len)
{
    const char *path = getenv("PATH");

    if (path == NULL || *path == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        int w = snprintf(out, len, "%.*s/%s", (int)n, n ? path : ".", name);

        if (w > 0 && (size_t)w < len && access(out, X_OK) == 0)
            return 0;
        path += n + (path[n] == ':');
    }
    return -1;
}

static long file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Does the file contain `needle` at or after byte `from`? */
static int file_mentions(const char *path, long from, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int found = 0;

    if (f == NULL)
        return 0;
    if (fseek(f, from, SEEK_SET) == 0)
        while (!found && fgets(line, sizeof line, f) != NULL)
            found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* Copy the last few lines of a log to stderr, for a failed start. */
static void print_tail(const char *path)
{
    char buf[RH_TAIL_BYTES + 1];
    FILE *f = fopen(path, "r");
    long size = file_size(path);
    size_t n;
    char *p = buf;

    if (f == NULL || size == 0) {
        if (f != NULL)
            fclose(f);
        return;
    }
    if (size > RH_TAIL_BYTES)
        fseek(f, size - RH_TAIL_BYTES, SEEK_SET);
    n = fread(buf, 1, RH_TAIL_BYTES, f);
    fclose(f);
    buf[n] = '\0';
    if (size > RH_TAIL_BYTES && (p = strchr(buf, '\n')) != NULL)
        p++;  /* start on a whole line */
    else
        p = buf;
    fprintf(stderr, "---- tail of %s ----\n%s", path, p);
    if (n > 0 && buf[n - 1] != '\n')
        fputc('\n', stderr);
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

static int remove_dir(const char *dir)
{
    if (nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
        fprintf(stderr, "redis_harness: cannot remove %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the registry ------------------------------------------------------- */

static rh_entry *find_entry(const char *dir)
{
    if (dir == NULL || dir[0] == '\0')
        return NULL;
    for (int i = 0; i < RH_MAX_SERVERS; i++)
        if (strcmp(registry[i].dir, dir) == 0)
            return &registry[i];
    return NULL;
}

static rh_entry *new_entry(const char *dir)
{
    rh_entry *e = NULL;

    for (int i = 0; i < RH_MAX_SERVERS && e == NULL; i++)
        if (registry[i].dir[0] == '\0')
            e = &registry[i];
    if (e == NULL)
        return NULL;
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "%s", dir);
    e->creator = getpid();
    return e;
}

/* ---- processes ---------------------------------------------------------- */

/*
 * State letter ('R', 'S', 'T', 'Z', ...) and start time (clock ticks after
 * boot: with the pid, it names a process for good) from /proc/PID/stat;
 * state 0 if the process is gone.
 */
static char proc_state_start(pid_t pid, unsigned long long *start)
{
    char path[64], buf[1024], state = 0, *p;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ppid ...": comm may hold spaces and ')': take the last;
     * starttime is the 19th field after the state. */
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                      "%*s %*s %*s %*s %*s %*s %llu", &state, start) != 2)
        return 0;
    return state;
}

static char proc_state(pid_t pid)
{
    unsigned long long start;

    return proc_state_start(pid, &start);
}

/*
 * Has pid exited, for a process that cannot reap it?  A zombie leader is
 * not enough: redis-server has threads, the leader turns zombie first, and
 * the sockets close only when the last thread is gone from task/.
 */
static int proc_dead(pid_t pid)
{
    char state = proc_state(pid), path[64];
    struct dirent *d;
    int tasks = 0;
    DIR *dir;

    if (state != 'Z' && state != 'X')
        return state == 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    if ((dir = opendir(path)) == NULL)
        return 1;
    while ((d = readdir(dir)) != NULL)
        tasks += d->d_name[0] != '.';
    closedir(dir);
    return tasks <= 1;
}

/*
 * Wait until pid has exited.  Its parent reaps it; any other process (a
 * forked Check test acting on the runner's server) cannot, and sees the
 * zombie in /proc until the runner reaps it.
 */
static int wait_gone(const rh_entry *e, pid_t pid, long ms)
{
    long long deadline = now_ms() + ms;

    do {
        if (e->spawner == getpid()) {
            pid_t r = waitpid(pid, NULL, WNOHANG);

            if (r == pid || (r < 0 && errno == ECHILD))
                return 0;
        } else {
            if (proc_dead(pid))
                return 0;
        }
        sleep_ms(5);
    } while (now_ms() < deadline);
    return -1;
}

/* Send sig and wait for the process to end, SIGKILL if it dawdles. */
static int end_process(rh_entry *e, int sig)
{
    pid_t pid = e->pid;
    int rc = 0;

    if (pid <= 0)
        return 0;
    kill(pid, sig);
    if (sig != SIGKILL)
        kill(pid, SIGCONT); /* a paused server cannot act on SIGTERM */
    if (wait_gone(e, pid, sig == SIGKILL ? RH_SIGNAL_MS : RH_STOP_MS) != 0) {
        fprintf(stderr, "redis_harness: pid %d ignored signal %d; killing\n",
                (int)pid, sig);
        kill(pid, SIGKILL);
        rc = wait_gone(e, pid, RH_SIGNAL_MS);
    }
    e->pid = 0;
    return rc;
}

/* The atexit handler: end what this process forked, remove what it made. */
static void cleanup_at_exit(void)
{
    for (int i = 0; i < RH_MAX_SERVERS; i++) {
        rh_entry *e = &registry[i];

        if (e->dir[0] == '\0')
            continue;
        if (e->pid > 0 && e->spawner == getpid())
            end_process(e, SIGKILL);
        if (e->creator == getpid()) {
            remove_dir(e->dir);
            e->dir[0] = '\0';
        }
    }
}

/*
 * The child between fork and exec: only async-signal-safe calls.  The
 * death signal is armed before checking that the parent still lives, so
 * there is no window in which the parent can die unnoticed.
 */
static void exec_server(const char *exe, char *const argv[],
                        const char *out, pid_t parent)
{
    static const int reset[] = {SIGCHLD, SIGHUP, SIGINT, SIGPIPE, SIGTERM};
    sigset_t none;
    int fd, nul;

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(126);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    nul = open("/dev/null", O_RDONLY);
    if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 ||
        dup2(fd, 2) < 0)
        _exit(126);
    /* Inherited sockets (the test's own connections) would stay open as
     * long as the server lives. */
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
#endif
        for (int i = 3; i < 1024; i++)
            close(i);
    /* A blocked mask and ignored signals survive exec. */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++)
        signal(reset[i], SIG_DFL);
    execv(exe, argv);
    _exit(127);
}

/* ---- dirs left by crashed runs ------------------------------------------ */

/* "PIDNS PID START" naming this process: what an owner file holds. */
static int self_owner(char *buf, size_t len)
{
    char ns[64];
    unsigned long long start;
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);

    if (n <= 0 || proc_state_start(getpid(), &start) == 0)
        return -1;
    ns[n] = '\0';
    snprintf(buf, len, "%s %d %llu\n", ns, (int)getpid(), start);
    return 0;
}

static void write_owner(const char *dir)
{
    char path[320], id[128];
    FILE *f;

    snprintf(path, sizeof path, "%s/owner", dir);
    if (self_owner(id, sizeof id) == 0 && (f = fopen(path, "w")) != NULL) {
        fputs(id, f);
        fclose(f);
    }
}

/* Has the process that made dir, in our pid namespace, ended?  A dir with
 * no owner file yet may be one being made right now: keep it. */
static int owner_gone(const char *dir, const char *ns)
{
    char path[320], their_ns[64];
    unsigned long long start, now = 0;
    int pid, n;
    char st;
    FILE *f;

    snprintf(path, sizeof path, "%s/owner", dir);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fscanf(f, "%63s %d %llu", their_ns, &pid, &start);
    fclose(f);
    if (n != 3 || strcmp(their_ns, ns) != 0)
        return 0;
    st = proc_state_start((pid_t)pid, &now);
    return st == 0 || st == 'Z' || now != start;
}

/*
 * Remove the dirs of runs that ended without cleaning up.  A failing test
 * in Check's fork mode ends in _exit(), so no atexit handler runs: its
 * servers die all the same (death signal), but their dirs would stay.
 */
static void sweep_stale_dirs(void)
{
    char id[128], ns[64], path[300];
    struct dirent *d;
    DIR *tmp;

    if (self_owner(id, sizeof id) != 0 || sscanf(id, "%63s", ns) != 1 ||
        (tmp = opendir(RH_TMP)) == NULL)
        return;
    while ((d = readdir(tmp)) != NULL) {
        if (strncmp(d->d_name, RH_PREFIX, strlen(RH_PREFIX)) != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", RH_TMP, d->d_name);
        if (owner_gone(path, ns))
            remove_dir(path);
    }
    closedir(tmp);
}

/* ---- hiredis helpers ---------------------------------------------------- */

/* Value of `field` in an INFO reply, or -1. */
static long long info_field(const char *text, const char *field)
{
    size_t n = strlen(field);

    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, field, n) == 0 && p[n] == ':') {
            char *end;
            long long v;

            errno = 0;
            v = strtoll(p + n + 1, &end, 10);
            if (errno == 0 && end != p + n + 1 &&
                (*end == '\r' || *end == '\n' || *end == '\0'))
                return v;
            return -1;
        }
        if ((p = strchr(p, '\n')) != NULL)
            p++;
    }
    return -1;
}

static long long query_info(redisContext *c, const char *section,
                            const char *field)
{
    redisReply *r = section ? redisCommand(c, "INFO %s", section)
                            : redisCommand(c, "INFO");
    long long v = -1;

    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = info_field(r->str, field);
    freeReplyObject(r);
    return v;
}

/* 0 if the reply is the status `want`; else -1 with the reason in err.
 * Frees the reply. */
static int reply_ok(redisContext *c, redisReply *r, const char *want,
                    char *err, size_t len)
{
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS &&
             strcmp(r->str, want) == 0;

    if (!ok)
        snprintf(err, len, "%s", r == NULL ? c->errstr
                                 : r->type == REDIS_REPLY_ERROR ? r->str
                                 : "unexpected reply");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* A TCP context, AUTHed and PINGed, or NULL with the reason in err. */
static redisContext *open_ctx(const rh_server *s, long ms, char *err,
                              size_t len)
{
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv_ms(ms));

    if (c == NULL || c->err) {
        snprintf(err, len, "connect 127.0.0.1:%d: %s", s->port,
                 c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, tv_ms(ms)) != REDIS_OK ||
        (s->password[0] != '\0' &&
         reply_ok(c, redisCommand(c, "AUTH %s", s->password), "OK", err,
                  len) != 0) ||
        reply_ok(c, redisCommand(c, "PING"), "PONG", err, len) != 0) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* ---- starting ----------------------------------------------------------- */

/* A port nobody listens on now: the kernel's pick for port 0. */
static int pick_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* A config-file string: quoted, with \" \\ and \xHH escapes. */
static void put_quoted(FILE *f, const char *str)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void put_directive(FILE *f, const char *name, const char *value)
{
    fprintf(f, "%s ", name);
    put_quoted(f, value);
    fputc('\n', f);
}

static int write_config(const rh_server *s, const rh_entry *e,
                        const char *path)
{
    char log[320];
    FILE *f = fopen(path, "w");

    if (f == NULL)
        return -1;
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    fprintf(f, "port %d\nbind 127.0.0.1\nprotected-mode no\n"
               "daemonize no\nsave \"\"\nappendonly no\n"
               "unixsocketperm 700\nloglevel notice\n"
               "dbfilename dump.rdb\n", s->port);
    put_directive(f, "unixsocket", s->unix_path);
    put_directive(f, "dir", s->dir);
    put_directive(f, "logfile", log);
    if (s->password[0] != '\0')
        put_directive(f, "requirepass", s->password);
    /* Redis 7 refuses DEBUG (SLEEP, used to fake a slow server) without
     * it; older servers refuse the directive, and then run without. */
    if (!e->no_debug)
        fprintf(f, "enable-debug-command yes\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* Fork and exec redis-server on the config in s->dir; pid or -1. */
static pid_t spawn(const rh_server *s, const char *exe)
{
    char conf[320], out[320], name[] = "redis-server";
    char *argv[] = {name, conf, NULL};
    pid_t parent = getpid(), pid;

    snprintf(conf, sizeof conf, "%s/redis.conf", s->dir);
    snprintf(out, sizeof out, "%s/stdio.log", s->dir);
    fflush(NULL); /* or buffered output could be written twice */
    pid = fork();
    if (pid == 0)
        exec_server(exe, argv, out, parent);
    if (pid < 0)
        fprintf(stderr, "redis_harness: fork: %s\n", strerror(errno));
    return pid;
}

/*
 * Wait for pid to answer PING on s->port: 0 ready, 1 it exited, -1 it
 * did not answer in time (then killed).  INFO's process_id must be pid: a
 * server that won the race for the port is someone else's.
 */
static int wait_ready(const rh_server *s, pid_t pid)
{
    long long deadline = now_ms() + RH_READY_MS;
    char err[256] = "";

    while (now_ms() < deadline) {
        redisContext *c;

        if (waitpid(pid, NULL, WNOHANG) == pid)
            return 1;
        if ((c = open_ctx(s, 250, err, sizeof err)) != NULL) {
            long long id = query_info(c, "server", "process_id");

            redisFree(c);
            if (id == (long long)pid)
                return 0;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "redis_harness: no PONG on port %d in %d ms: %s\n",
            s->port, RH_READY_MS, err);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void report_failure(const rh_server *s)
{
    char path[320];

    fprintf(stderr, "redis_harness: redis-server did not start in %s\n",
            s->dir);
    snprintf(path, sizeof path, "%s/stdio.log", s->dir);
    print_tail(path);
    snprintf(path, sizeof path, "%s/redis.log", s->dir);
    print_tail(path);
}

/*
 * Run the server until it answers, retrying when it exits early because it
 * rejected enable-debug-command or lost the race for its port (then on a
 * new port, unless keep_port).
 */
static int launch(rh_server *s, rh_entry *e, int keep_port)
{
    char exe[PATH_MAX], conf[320], log[320], out[320];

    if (find_exe("redis-server", exe, sizeof exe) != 0) {
        fprintf(stderr, "redis_harness: redis-server not on PATH\n");
        return -1;
    }
    snprintf(conf, sizeof conf, "%s/redis.conf", s->dir);
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    snprintf(out, sizeof out, "%s/stdio.log", s->dir);
    for (int t = 0; t < RH_START_TRIES; t++) {
        long from = file_size(log);
        pid_t pid;
        int rc;

        if (!keep_port && (s->port = pick_port()) < 0) {
            fprintf(stderr, "redis_harness: no free port: %s\n",
                    strerror(errno));
            return -1;
        }
        if (write_config(s, e, conf) != 0 || (pid = spawn(s, exe)) < 0)
            return -1;
        if ((rc = wait_ready(s, pid)) == 0) {
            e->pid = s->pid = pid;
            e->spawner = getpid();
            return 0;
        }
        if (rc < 0)
            break;
        if (!e->no_debug && file_mentions(out, 0, "enable-debug-command")) {
            e->no_debug = 1;
            continue;
        }
        if (!file_mentions(log, from, "Address already in use"))
            break;
        if (keep_port)
            sleep_ms(100);
    }
    report_failure(s);
    return -1;
}

/* ---- the API ------------------------------------------------------------ */

int rh_available(void)
{
    char exe[PATH_MAX], name[] = "redis-server", ver[] = "--version";
    char *argv[] = {name, ver, NULL};
    int status = -1;
    pid_t parent = getpid(), pid;

    if (find_exe("redis-server", exe, sizeof exe) != 0) {
        fprintf(stderr, "redis_harness: redis-server is not on PATH\n");
        return 0;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        exec_server(exe, argv, "/dev/null", parent);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "redis_harness: %s --version failed (%s %d)\n",
                exe, WIFSIGNALED(status) ? "signal" : "exit",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return 0;
    }
    return 1;
}

int rh_start(rh_server *s, const char *password)
{
    char tmpl[] = RH_TMP "/" RH_PREFIX "XXXXXX";
    rh_entry *e;

    memset(s, 0, sizeof *s);
    if (!is_main_thread()) {
        fprintf(stderr, "redis_harness: rh_start from a helper thread: the "
                        "server would die with that thread\n");
        return -1;
    }
    if (password != NULL && strlen(password) >= sizeof s->password) {
        fprintf(stderr, "redis_harness: password longer than %zu bytes\n",
                sizeof s->password - 1);
        return -1;
    }
    if (!swept)
        sweep_stale_dirs();
    swept = 1;
    if (mkdtemp(tmpl) == NULL) {
        fprintf(stderr, "redis_harness: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    write_owner(tmpl);
    if ((e = new_entry(tmpl)) == NULL) {
        fprintf(stderr, "redis_harness: more than %d servers\n",
                RH_MAX_SERVERS);
        remove_dir(tmpl);
        return -1;
    }
    if (!atexit_registered)
        atexit_registered = atexit(cleanup_at_exit) == 0;
    snprintf(s->dir, sizeof s->dir, "%s", tmpl);
    snprintf(s->unix_path, sizeof s->unix_path, "%s/redis.sock", tmpl);
    snprintf(s->password, sizeof s->password, "%s", password ? password : "");
    if (launch(s, e, 0) != 0) {
        remove_dir(e->dir);
        e->dir[0] = '\0';
        return -1;
    }
    return 0;
}

int rh_stop(rh_server *s)
{
    rh_entry *e = find_entry(s->dir);
    int rc;

    s->pid = 0;
    if (e == NULL)
        return 0; /* never started, or stopped already */
    rc = end_process(e, SIGTERM);
    if (remove_dir(e->dir) != 0)
        rc = -1;
    e->dir[0] = '\0';
    return rc;
}

/* The registry entry of a server with a running process, or NULL. */
static rh_entry *running(const rh_server *s, const char *what)
{
    rh_entry *e = find_entry(s->dir);

    if (e == NULL || e->pid <= 0) {
        fprintf(stderr, "redis_harness: %s: server not running\n", what);
        return NULL;
    }
    return e;
}

int rh_kill(rh_server *s)
{
    rh_entry *e = running(s, "rh_kill");
    int rc;

    if (e == NULL)
        return -1;
    rc = end_process(e, SIGKILL);
    s->pid = 0;
    return rc;
}

int rh_restart(rh_server *s)
{
    rh_entry *e = find_entry(s->dir);
    char dump[320];

    if (e == NULL) {
        fprintf(stderr, "redis_harness: rh_restart: server not started\n");
        return -1;
    }
    if (!is_main_thread()) {
        fprintf(stderr, "redis_harness: rh_restart from a helper thread\n");
        return -1;
    }
    end_process(e, SIGTERM);
    s->pid = 0;
    snprintf(dump, sizeof dump, "%s/dump.rdb", e->dir);
    unlink(dump); /* a test may have SAVEd: the new server must be empty */
    return launch(s, e, 1);
}

/* Signal a running server and wait until /proc shows `stopped` or not. */
static int stop_cont(rh_server *s, int sig, int stopped, const char *what)
{
    rh_entry *e = running(s, what);
    long long deadline = now_ms() + RH_SIGNAL_MS;

    if (e == NULL || kill(e->pid, sig) != 0)
        return -1;
    do {
        if ((proc_state(e->pid) == 'T') == stopped)
            return 0;
        sleep_ms(1);
    } while (now_ms() < deadline);
    fprintf(stderr, "redis_harness: %s: pid %d did not change state\n",
            what, (int)e->pid);
    return -1;
}

int rh_pause(rh_server *s)
{
    return stop_cont(s, SIGSTOP, 1, "rh_pause");
}

int rh_resume(rh_server *s)
{
    return stop_cont(s, SIGCONT, 0, "rh_resume");
}

redisContext *rh_connect(const rh_server *s)
{
    char err[256];
    redisContext *c = open_ctx(s, RH_CONNECT_MS, err, sizeof err);

    if (c == NULL)
        fprintf(stderr, "redis_harness: %s\n", err);
    return c;
}

long long rh_info_int(const rh_server *s, const char *section,
                      const char *field)
{
    char err[256];
    redisContext *c = open_ctx(s, RH_CONNECT_MS, err, sizeof err);
    long long v;

    if (c == NULL) {
        fprintf(stderr, "redis_harness: %s\n", err);
        return -1;
    }
    v = query_info(c, section, field);
    redisFree(c);
    return v;
}

char *rh_uri(const rh_server *s, char *buf, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    char pw[3 * sizeof s->password] = "", *q = pw;
    int n;

    /* RFC 3986 userinfo: unreserved characters as they are, the rest %HH. */
    for (const unsigned char *p = (const unsigned char *)s->password; *p;
         p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
            (*p >= '0' && *p <= '9') || strchr("-._~", *p) != NULL) {
            *q++ = (char)*p;
        } else {
            *q++ = '%';
            *q++ = hex[*p >> 4];
            *q++ = hex[*p & 15];
        }
    }
    *q = '\0';
    n = snprintf(buf, len, "redis://%s%s%s127.0.0.1:%d/0", pw[0] ? ":" : "",
                 pw, pw[0] ? "@" : "", s->port);
    return n >= 0 && (size_t)n < len ? buf : NULL;
}
