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
 * waitpid it), which process made the dir (only that one removes it at exit),
 * which optional directives the server rejected and whether it is a cluster
 * node (whose config rh_restart() must write again).  The registry lives
 * in process memory, so a forked Check test sees a copy: its atexit handler
 * leaves the runner's servers alone.
 *
 * A cluster node is such a server with cluster directives in its redis.conf
 * and its nodes.conf beside it; the rh_cluster_* calls only ask the nodes
 * (CLUSTER NODES / SLOTS / INFO, ROLE) and tell them (CLUSTER SETSLOT,
 * MIGRATE), keeping no state of their own beyond the rh_cluster, so the
 * answer is always the cluster's current one.  redis-cli, run once to
 * create the cluster, is forked like a server (death signal, stdio to
 * cluster-create.log in node 0's dir) and killed if it takes too long.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "redis_harness.h"
#include "child_exec.h"
#include "timeutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
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
#define RH_EXE(e) ((e)->sentinel ? "redis-sentinel" : "redis-server")

typedef struct rh_entry {
    char dir[256];  /* "" = free slot */
    pid_t pid;      /* server process, 0 when not running */
    pid_t spawner;  /* the process that forked pid */
    pid_t creator;  /* the process that made dir */
    unsigned rejected; /* optional directives the server rejected (bits) */
    int cluster_ms; /* > 0: a cluster node with this cluster-node-timeout */
    int tls;        /* rh_start_tls(): the directives below */
    char tls_cert[256], tls_key[256], tls_ca[256], tls_auth[16];
    int replica_of; /* > 0: replica (sentinel: monitor) of this port */
    int sentinel;   /* rh_start_sentinel(): runs redis-sentinel   */
    char monitor[64];   /* sentinel: the master's name            */
    char master_pw[64]; /* replica, sentinel: the master's password */
} rh_entry;

/*
 * Directives a server may not know (older versions): written until the
 * server refuses one, then left out.  DEBUG (SLEEP, used to fake a slow
 * server) needs enable-debug-command from Redis 7; shutdown-timeout (7.0)
 * 0 makes SIGTERM end a master at once, without first waiting up to 10 s
 * for its replicas to acknowledge the last writes.
 */
static const struct {
    const char *name, *line;
    int cluster_only;
} optional[] = {
    {"enable-debug-command", "enable-debug-command yes\n", 0},
    {"shutdown-timeout", "shutdown-timeout 0\n", 1},
};
#define RH_N_OPTIONAL (sizeof optional / sizeof optional[0])

static rh_entry registry[RH_MAX_SERVERS];
const char *rh_loadmodule;
static int atexit_registered, swept;

/* ---- small utilities ---------------------------------------------------- */

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

/* The child between fork and exec (child_exec.h): stdout and stderr to
 * the file `out`, stdin from /dev/null. */
static void exec_server(const char *exe, char *const argv[],
                        const char *out, pid_t parent)
{
    int fd, nul;

    child_bind(parent);
    fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    nul = open("/dev/null", O_RDONLY);
    child_exec(exe, argv, nul, fd, fd);
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

/* Can a listener bind 127.0.0.1:port now?  (No SO_REUSEADDR: a port in
 * TIME_WAIT counts as taken, which only errs on the safe side.) */
static int port_free(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/*
 * A port for a cluster node: it and port + 10000 (the cluster bus) both
 * free, below 55535.  Picked at random, preferring pairs outside the
 * kernel's ephemeral range, where the outgoing connections of this and
 * every other process cannot take the bus port between our look and the
 * server's bind.  A race lost anyway ends in "Address already in use" and
 * a retry on another port.
 */
static int pick_cluster_port(void)
{
    static unsigned long long state;
    static pid_t seeded_by;
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

    if (f != NULL) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768, hi = 60999;
        fclose(f);
    }
    if (seeded_by != getpid()) { /* a forked test must not pick our ports */
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        state = (unsigned long long)ts.tv_nsec * 2654435761ULL ^
                (unsigned long long)getpid() << 32 ^
                (unsigned long long)ts.tv_sec;
        state += state == 0; /* xorshift's one fixed point */
        seeded_by = getpid();
    }
    for (int t = 0; t < 2000; t++) {
        int port, bus;

        state ^= state << 13; /* xorshift64 */
        state ^= state >> 7;
        state ^= state << 17;
        port = 10000 + (int)(state % (55535 - 10000));
        bus = port + 10000;
        if (t < 1000 && ((port >= lo && port <= hi) ||
                         (bus >= lo && bus <= hi)))
            continue;
        if (port_free(port) && port_free(bus))
            return port;
    }
    errno = EADDRINUSE;
    return -1;
}

/* Did the server's early exit come from an optional directive it does not
 * know?  Then remember to leave that one out. */
static int rejected_optional(rh_entry *e, const char *out)
{
    for (size_t i = 0; i < RH_N_OPTIONAL; i++)
        if (!(e->rejected & 1U << i) &&
            file_mentions(out, 0, optional[i].name)) {
            e->rejected |= 1U << i;
            return 1;
        }
    return 0;
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

/* The TLS port and its files.  A cluster node's bus, replication and the
 * ports given out to TLS clients are TLS too; so are a replica's link to
 * its master (and the port it announces) and a sentinel's links to the
 * servers and to the other sentinels. */
static void tls_config(FILE *f, const rh_server *s, const rh_entry *e)
{
    if (!e->tls)
        return;
    fprintf(f, "tls-port %d\n", s->tls_port);
    put_directive(f, "tls-cert-file", e->tls_cert);
    put_directive(f, "tls-key-file", e->tls_key);
    put_directive(f, "tls-ca-cert-file", e->tls_ca);
    put_directive(f, "tls-auth-clients", e->tls_auth);
    if (e->cluster_ms > 0)
        fputs("tls-cluster yes\n", f);
    if (e->cluster_ms > 0 || e->replica_of > 0)
        fputs("tls-replication yes\n", f);
}

/* A sentinel's config (it rewrites the file, which is in its dir). */
static void sentinel_config(FILE *f, const rh_server *s, const rh_entry *e)
{
    char log[320];

    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    fprintf(f, "port %d\nbind 127.0.0.1\nprotected-mode no\n"
               "daemonize no\n", s->port);
    put_directive(f, "dir", s->dir);
    put_directive(f, "logfile", log);
    if (s->password[0] != '\0')
        put_directive(f, "requirepass", s->password);
    tls_config(f, s, e);
    fprintf(f, "sentinel monitor %s 127.0.0.1 %d %d\n"
               "sentinel down-after-milliseconds %s %d\n"
               "sentinel failover-timeout %s %d\n", e->monitor,
            e->replica_of, RH_SENTINEL_QUORUM, e->monitor,
            RH_SENTINEL_DOWN_MS, e->monitor, RH_SENTINEL_FAILOVER_MS);
    if (e->master_pw[0] != '\0') {
        fprintf(f, "sentinel auth-pass %s ", e->monitor);
        put_quoted(f, e->master_pw);
        fputc('\n', f);
    }
}

static int write_config(const rh_server *s, const rh_entry *e,
                        const char *path)
{
    char log[320];
    FILE *f = fopen(path, "w");

    if (f == NULL)
        return -1;
    if (e->sentinel) {
        sentinel_config(f, s, e);
        return fclose(f) == 0 ? 0 : -1;
    }
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
    if (e->cluster_ms <= 0) /* a replica syncs at once */
        fputs("repl-diskless-sync-delay 0\n", f);
    if (e->replica_of > 0) { /* Sentinel: a replica */
        fprintf(f, "replicaof 127.0.0.1 %d\n", e->replica_of);
        if (e->master_pw[0] != '\0')
            put_directive(f, "masterauth", e->master_pw);
    }
    tls_config(f, s, e);
    if (e->cluster_ms > 0) {
        /* nodes.conf, in dir, is the node's identity: rh_restart() keeps
         * it.  Replicas sync at once (the default waits 5 s for more
         * replicas) and always stand for election, however stale.  CLUSTER
         * SLOTS leaves out a replica until its replication offset, as
         * gossiped, is not 0: on an idle master only the pings to its
         * replicas move it, every 10 s by default. */
        fprintf(f, "cluster-enabled yes\n"
                   "cluster-config-file nodes.conf\n"
                   "cluster-node-timeout %d\n"
                   "cluster-announce-ip 127.0.0.1\n"
                   "cluster-replica-validity-factor 0\n"
                   "repl-diskless-sync-delay 0\n"
                   "repl-ping-replica-period 1\n", e->cluster_ms);
    }
    if (rh_loadmodule != NULL) /* a path and its arguments, as given */
        fprintf(f, "loadmodule %s\n", rh_loadmodule);
    for (size_t i = 0; i < RH_N_OPTIONAL; i++)
        if (!(e->rejected & 1U << i) &&
            (!optional[i].cluster_only || e->cluster_ms > 0))
            fputs(optional[i].line, f);
    return fclose(f) == 0 ? 0 : -1;
}

/* Fork and exec redis-server on the config in s->dir; pid or -1. */
static pid_t spawn(const rh_server *s, const rh_entry *e, const char *exe)
{
    char conf[320], out[320], name[16];
    char *argv[] = {name, conf, NULL};
    pid_t parent = getpid(), pid;

    snprintf(name, sizeof name, "%s", RH_EXE(e));
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

    if (find_exe(RH_EXE(e), exe, sizeof exe) != 0) {
        fprintf(stderr, "redis_harness: %s not on PATH\n", RH_EXE(e));
        return -1;
    }
    snprintf(conf, sizeof conf, "%s/redis.conf", s->dir);
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    snprintf(out, sizeof out, "%s/stdio.log", s->dir);
    for (int t = 0; t < RH_START_TRIES; t++) {
        long from = file_size(log);
        pid_t pid;
        int rc;

        /* With tls-cluster the bus is the TLS port + 10000. */
        if (!keep_port && e->tls &&
            (s->tls_port = e->cluster_ms > 0 ? pick_cluster_port()
                                             : pick_port()) < 0) {
            fprintf(stderr, "redis_harness: no free port: %s\n",
                    strerror(errno));
            return -1;
        }
        do /* apart from the TLS port and its bus */
            s->port = keep_port ? s->port : e->cluster_ms > 0
                                              ? pick_cluster_port()
                                              : pick_port();
        while (!keep_port && e->tls && s->port >= 0 &&
               (s->port == s->tls_port || s->port == s->tls_port + 10000 ||
                s->port + 10000 == s->tls_port));
        if (s->port < 0) {
            fprintf(stderr, "redis_harness: no free port: %s\n",
                    strerror(errno));
            return -1;
        }
        if (write_config(s, e, conf) != 0 || (pid = spawn(s, e, exe)) < 0)
            return -1;
        if ((rc = wait_ready(s, pid)) == 0) {
            e->pid = s->pid = pid;
            e->spawner = getpid();
            return 0;
        }
        if (rc < 0)
            break;
        if (rejected_optional(e, out))
            continue;
        if (!file_mentions(log, from, "Address already in use"))
            break;
        if (keep_port)
            sleep_ms(100);
    }
    report_failure(s);
    return -1;
}

/* ---- the API ------------------------------------------------------------ */

/* 1 if `name --version` runs and exits 0; 0 with the reason on stderr. */
static int tool_runs(const char *name)
{
    char exe[PATH_MAX], arg0[32], ver[] = "--version";
    char *argv[] = {arg0, ver, NULL};
    int status = -1;
    pid_t parent = getpid(), pid;

    snprintf(arg0, sizeof arg0, "%s", name);
    if (find_exe(name, exe, sizeof exe) != 0) {
        fprintf(stderr, "redis_harness: %s is not on PATH\n", name);
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

int rh_available(void)
{
    return tool_runs("redis-server");
}

/* rh_start(), a cluster node when cluster_ms > 0, TLS when t is set, a
 * replica or a sentinel as role says (NULL: neither). */
static int start_server(rh_server *s, const char *password, int cluster_ms,
                        const rh_tls *t, const rh_entry *role)
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
    e->cluster_ms = cluster_ms;
    e->tls = t != NULL;
    if (role) {
        e->replica_of = role->replica_of;
        e->sentinel = role->sentinel;
        memcpy(e->monitor, role->monitor, sizeof e->monitor);
        memcpy(e->master_pw, role->master_pw, sizeof e->master_pw);
    }
    if (t) {
        snprintf(e->tls_cert, sizeof e->tls_cert, "%s", t->cert_file);
        snprintf(e->tls_key, sizeof e->tls_key, "%s", t->key_file);
        snprintf(e->tls_ca, sizeof e->tls_ca, "%s", t->ca_file);
        snprintf(e->tls_auth, sizeof e->tls_auth, "%s", t->auth_clients);
    }
    if (launch(s, e, 0) != 0) {
        remove_dir(e->dir);
        e->dir[0] = '\0';
        return -1;
    }
    return 0;
}

int rh_start(rh_server *s, const char *password)
{
    return start_server(s, password, 0, NULL, NULL);
}

int rh_start_tls(rh_server *s, const char *password, const rh_tls *t)
{
    return start_server(s, password, 0, t, NULL);
}

/* ---- Redis Sentinel ------------------------------------------------------ */

int rh_sentinel_available(void)
{
    return tool_runs("redis-server") && tool_runs("redis-sentinel");
}

int rh_start_replica_tls(rh_server *s, const char *password,
                         const rh_server *master, const rh_tls *t)
{
    rh_entry role = {.replica_of = t ? master->tls_port : master->port};

    snprintf(role.master_pw, sizeof role.master_pw, "%s", master->password);
    return start_server(s, password, 0, t, &role);
}

int rh_start_replica(rh_server *s, const char *password,
                     const rh_server *master)
{
    return rh_start_replica_tls(s, password, master, NULL);
}

int rh_start_sentinel(rh_server *s, const char *password, const char *name,
                      const rh_server *master)
{
    return rh_start_sentinel_tls(s, password, name, master, NULL);
}

int rh_start_sentinel_tls(rh_server *s, const char *password,
                          const char *name, const rh_server *master,
                          const rh_tls *t)
{
    rh_entry role = {.replica_of = t ? master->tls_port : master->port,
                     .sentinel = 1};

    if (strlen(name) >= sizeof role.monitor || strpbrk(name, " \t\r\n\"")) {
        fprintf(stderr, "redis_harness: bad master name\n");
        return -1;
    }
    snprintf(role.monitor, sizeof role.monitor, "%s", name);
    snprintf(role.master_pw, sizeof role.master_pw, "%s", master->password);
    return start_server(s, password, 0, t, &role);
}

/* What sentinel c says of master `name` (its INFO sentinel line
 * "masterN:name=...,status=ok,address=H:P,slaves=R,sentinels=S"): 1 all
 * as wanted, 0 not yet (why), -1 no answer. */
static int sentinel_sees(redisContext *c, const char *name, int replicas,
                         int sentinels, char *why, size_t len)
{
    redisReply *r = redisCommand(c, "INFO sentinel");
    char want[160];
    const char *line;
    int rc = 0;

    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        snprintf(why, len, "INFO sentinel: %s", r ? "bad reply" : c->errstr);
        rc = -1;
    } else if (snprintf(want, sizeof want, ":name=%s,status=ok,", name),
               (line = strstr(r->str, want)) == NULL) {
        snprintf(why, len, "master %s not ok: %.200s", name, r->str);
    } else {
        int n = (int)strcspn(line, "\r\n");
        char tail[64];
        snprintf(tail, sizeof tail, ",slaves=%d,sentinels=%d", replicas,
                 sentinels);
        rc = (int)(strstr(line, tail) != NULL &&
                   strstr(line, tail) < line + n);
        snprintf(why, len, "%.*s", n, line);
    }
    if (r)
        freeReplyObject(r);
    return rc;
}

int rh_sentinel_wait(const rh_server *s, const char *name, int replicas,
                     int sentinels, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    char why[300] = "";

    do {
        redisContext *c = open_ctx(s, RH_CONNECT_MS, why, sizeof why);
        int rc = c ? sentinel_sees(c, name, replicas, sentinels, why,
                                   sizeof why) : -1;
        if (c)
            redisFree(c);
        if (rc == 1)
            return 0;
        sleep_ms(20);
    } while (now_ms() < deadline);
    fprintf(stderr, "redis_harness: sentinel on %d: after %d ms: %s\n",
            s->port, timeout_ms, why);
    return -1;
}

int rh_is_master(const rh_server *s)
{
    char err[256];
    redisContext *c = open_ctx(s, RH_CONNECT_MS, err, sizeof err);
    redisReply *r = c ? redisCommand(c, "ROLE") : NULL;
    int rc = -1;

    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_STRING)
        rc = strcmp(r->element[0]->str, "master") == 0;
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return rc;
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

/* The calls= count on the "cmdstat_<command>:" line of INFO commandstats
 * text, or 0 if there is no such line. */
static long long cmdstat_field(const char *text, const char *command)
{
    char head[96];
    int n = snprintf(head, sizeof head, "cmdstat_%s:", command);

    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, head, (size_t)n) == 0) {
            const char *calls = strstr(p + n, "calls=");

            return calls ? atoll(calls + strlen("calls=")) : -1;
        }
        if ((p = strchr(p, '\n')) != NULL)
            p++;
    }
    return 0;
}

long long rh_cmdstat_calls(const rh_server *s, const char *command)
{
    char err[256];
    redisContext *c = open_ctx(s, RH_CONNECT_MS, err, sizeof err);
    redisReply *r;
    long long v = -1;

    if (c == NULL) {
        fprintf(stderr, "redis_harness: %s\n", err);
        return -1;
    }
    r = redisCommand(c, "INFO commandstats");
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        v = cmdstat_field(r->str, command);
    else
        fprintf(stderr, "redis_harness: INFO commandstats: %s\n",
                r == NULL ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str
                                                          : "not a string");
    freeReplyObject(r);
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

/* ---- clusters ----------------------------------------------------------- */

#define RH_SLOTS 16384
#define RH_CREATE_MS 30000     /* redis-cli --cluster create, all told      */
#define RH_CLUSTER_UP_MS 20000 /* from create to every node agreeing, ok    */
#define RH_MIGRATE_MS 1000     /* MIGRATE's own timeout                     */
#define RH_POLL_MS 20

/* A context on node i, or NULL with the reason in err. */
static redisContext *node_ctx(const rh_cluster *c, int i, char *err,
                              size_t len)
{
    if (i < 0 || i >= c->n || c->node[i].pid <= 0) {
        snprintf(err, len, "node %d is not running", i);
        return NULL;
    }
    return open_ctx(&c->node[i], RH_CONNECT_MS, err, len);
}

static int index_of_port(const rh_cluster *c, long long port)
{
    for (int i = 0; i < c->n; i++)
        if (c->node[i].port == port)
            return i;
    return -1;
}

static int index_of_id(const rh_cluster *c, const char *id, size_t len)
{
    for (int i = 0; i < c->n; i++)
        if (strlen(c->id[i]) == len && memcmp(c->id[i], id, len) == 0)
            return i;
    return -1;
}

/* A command's reply, which must not be an error (nor missing): NULL with
 * the reason in err otherwise. */
static redisReply *command_argv(redisContext *ctx, int argc,
                                const char **argv, char *err, size_t len)
{
    redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);

    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        snprintf(err, len, "%s: %s", argv[0],
                 r == NULL ? ctx->errstr : r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* Send "CLUSTER <args...>" (space-separated, no quoting) to node i and
 * expect +OK.  0, or -1 with the reason on stderr. */
static int cluster_ok_cmd(const rh_cluster *c, int i, const char *what,
                          const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int cluster_ok_cmd(const rh_cluster *c, int i, const char *what,
                          const char *fmt, ...)
{
    char err[512], cmd[256];
    redisContext *ctx = node_ctx(c, i, err, sizeof err);
    va_list ap;
    int rc = -1;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (ctx != NULL) {
        char buf[256], *argv[16];
        int argc = 0;

        snprintf(buf, sizeof buf, "%s", cmd);
        for (char *t = strtok(buf, " "); t != NULL && argc < 16;
             t = strtok(NULL, " "))
            argv[argc++] = t;
        rc = reply_ok(ctx, redisCommandArgv(ctx, argc, (const char **)argv,
                                            NULL), "OK", err, sizeof err);
        redisFree(ctx);
    }
    if (rc != 0)
        fprintf(stderr, "redis_harness: %s: node %d: %s: %s\n", what, i, cmd,
                err);
    return rc;
}

/* CLUSTER NODES of node i, malloc'd; NULL with the reason in err. */
static char *cluster_nodes(const rh_cluster *c, int i, char *err, size_t len)
{
    const char *argv[] = {"CLUSTER", "NODES"};
    redisContext *ctx = node_ctx(c, i, err, len);
    redisReply *r;
    char *text = NULL;

    if (ctx == NULL)
        return NULL;
    r = command_argv(ctx, 2, argv, err, len);
    if (r != NULL && r->type == REDIS_REPLY_STRING &&
        (text = strdup(r->str)) == NULL)
        snprintf(err, len, "out of memory");
    else if (r != NULL && r->type != REDIS_REPLY_STRING)
        snprintf(err, len, "CLUSTER NODES: not a string");
    freeReplyObject(r);
    redisFree(ctx);
    return text;
}

/*
 * Split one CLUSTER NODES line (in place, up to '\n') into its fields:
 *   id addr flags master ping-sent pong-recv config-epoch link slot...
 * The number of fields, or 0 for a line too short; *next is the line after.
 */
static int split_line(char *line, char **f, int max, char **next)
{
    char *end = strchr(line, '\n'), *save = NULL;
    int n = 0;

    if (end != NULL) {
        *end = '\0';
        *next = end + 1;
    } else {
        *next = line + strlen(line);
    }
    for (char *t = strtok_r(line, " \r", &save); t != NULL && n < max;
         t = strtok_r(NULL, " \r", &save))
        f[n++] = t;
    return n >= 8 ? n : 0;
}

static int has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);

    for (const char *p = flags; *p != '\0'; p += strcspn(p, ",")) {
        p += *p == ',';
        if (strncmp(p, flag, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

/* Mark the slots of the slot fields f[8..n) in set; the "[slot->-id]" and
 * "[slot-<-id]" fields of a slot in migration are not ranges and are
 * skipped. */
static void mark_slots(char **f, int n, unsigned char *set)
{
    for (int k = 8; k < n; k++) {
        long a, b;
        char *end;

        if (f[k][0] == '[')
            continue;
        a = strtol(f[k], &end, 10);
        b = *end == '-' ? strtol(end + 1, &end, 10) : a;
        for (long s = a; s <= b && s >= 0 && s < RH_SLOTS; s++)
            set[s] = 1;
    }
}

/*
 * Which node serves each slot, as each live node claims for itself: the
 * "myself" line of its CLUSTER NODES, when it is a master.  Two claims on
 * one slot (a node back with a stale config) go to the higher config
 * epoch, which the cluster converges to.  owner[slot] = index or -1.
 */
static void claims(const rh_cluster *c, short *owner)
{
    long long epoch[RH_CLUSTER_MAX];
    unsigned char mine[RH_SLOTS];

    for (int s = 0; s < RH_SLOTS; s++)
        owner[s] = -1;
    for (int i = 0; i < c->n; i++) {
        char err[256], *text = c->node[i].pid > 0
                                   ? cluster_nodes(c, i, err, sizeof err)
                                   : NULL, *line, *next, *f[RH_SLOTS / 2];
        int n;

        for (line = text; line != NULL && *line != '\0'; line = next) {
            if ((n = split_line(line, f, RH_SLOTS / 2, &next)) == 0 ||
                !has_flag(f[2], "myself") || !has_flag(f[2], "master"))
                continue;
            epoch[i] = strtoll(f[6], NULL, 10);
            memset(mine, 0, sizeof mine);
            mark_slots(f, n, mine);
            for (int s = 0; s < RH_SLOTS; s++)
                if (mine[s] && (owner[s] < 0 || epoch[i] > epoch[owner[s]]))
                    owner[s] = (short)i;
        }
        free(text);
    }
}

/* ROLE of node i: 1 master, 0 replica, -1 down or no answer. */
static int node_role(const rh_cluster *c, int i)
{
    const char *argv[] = {"ROLE"};
    char err[256];
    redisContext *ctx = node_ctx(c, i, err, sizeof err);
    redisReply *r;
    int role = -1;

    if (ctx == NULL)
        return -1;
    r = command_argv(ctx, 1, argv, err, sizeof err);
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_STRING)
        role = strcmp(r->element[0]->str, "master") == 0 ? 1
               : strcmp(r->element[0]->str, "slave") == 0 ? 0
                                                          : -1;
    freeReplyObject(r);
    redisFree(ctx);
    return role;
}

/* A node's CLUSTER SLOTS as owner[slot] = index of the master (-1 none,
 * -2 a node not of this cluster), and in *listed a bit for each node it
 * lists as a replica; 0, or -1 with the reason in err. */
static int slots_view(redisContext *ctx, const rh_cluster *c, short *owner,
                      unsigned *listed, char *err, size_t len)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    redisReply *r = command_argv(ctx, 2, argv, err, len);
    int rc = 0;

    for (int s = 0; s < RH_SLOTS; s++)
        owner[s] = -1;
    *listed = 0;
    if (r == NULL)
        return -1;
    for (size_t k = 0; r->type == REDIS_REPLY_ARRAY && k < r->elements;
         k++) {
        redisReply *e = r->element[k], *m;
        int who;

        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            (m = e->element[2])->type != REDIS_REPLY_ARRAY ||
            m->elements < 2 || m->element[1]->type != REDIS_REPLY_INTEGER) {
            snprintf(err, len, "CLUSTER SLOTS: unexpected reply");
            rc = -1;
            break;
        }
        who = index_of_port(c, m->element[1]->integer);
        for (size_t k2 = 3; k2 < e->elements; k2++) {
            redisReply *rep = e->element[k2];
            int i;

            if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 2 &&
                rep->element[1]->type == REDIS_REPLY_INTEGER &&
                (i = index_of_port(c, rep->element[1]->integer)) >= 0)
                *listed |= 1U << i;
        }
        for (long long s = e->element[0]->integer;
             s <= e->element[1]->integer && s >= 0 && s < RH_SLOTS; s++)
            owner[s] = (short)(who < 0 ? -2 : who);
    }
    if (r->type != REDIS_REPLY_ARRAY) {
        snprintf(err, len, "CLUSTER SLOTS: not an array");
        rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

/*
 * One look at the whole cluster: 1 if every live node says cluster_state:ok,
 * every live replica's link to its master is up, every live node's CLUSTER
 * SLOTS maps all 16384 slots, all the same way, each to a live master, and
 * lists every live replica; else 0 with what is not yet so in why.
 */
static int cluster_settled(const rh_cluster *c, char *why, size_t len)
{
    short view[RH_SLOTS], first[RH_SLOTS];
    const char *info[] = {"CLUSTER", "INFO"}, *repl[] = {"INFO",
                                                         "replication"};
    int role[RH_CLUSTER_MAX], have_first = 0;
    unsigned listed[RH_CLUSTER_MAX] = {0}, replicas = 0;

    for (int i = 0; i < c->n; i++) {
        redisContext *ctx;
        redisReply *r;
        int ok;

        role[i] = -1;
        if (c->node[i].pid <= 0)
            continue;
        if ((ctx = node_ctx(c, i, why, len)) == NULL)
            return 0;
        r = command_argv(ctx, 2, info, why, len);
        ok = r != NULL && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "cluster_state:ok\r\n") != NULL;
        if (r != NULL && !ok)
            snprintf(why, len, "node %d: cluster_state not ok", i);
        freeReplyObject(r);
        if (ok) {
            r = command_argv(ctx, 2, repl, why, len);
            if (r != NULL && r->type == REDIS_REPLY_STRING) {
                if (strstr(r->str, "role:master\r\n") != NULL)
                    role[i] = 1;
                else if (strstr(r->str, "master_link_status:up\r\n"))
                    role[i] = 0;
                else
                    snprintf(why, len, "node %d: replica, link down", i);
            }
            ok = role[i] >= 0;
            freeReplyObject(r);
        }
        if (ok && (ok = slots_view(ctx, c, have_first ? view : first,
                                   &listed[i], why, len) == 0) != 0) {
            const short *v = have_first ? view : first;

            for (int s = 0; s < RH_SLOTS && ok; s++) {
                if (v[s] < 0 || (have_first && v[s] != first[s])) {
                    snprintf(why, len, "node %d: slot %d %s", i, s,
                             v[s] == -1   ? "not served"
                             : v[s] == -2 ? "served by a stranger"
                                          : "seen served by another node");
                    ok = 0;
                }
            }
            have_first = 1;
        }
        redisFree(ctx);
        if (!ok)
            return 0;
    }
    if (!have_first) {
        snprintf(why, len, "no node running");
        return 0;
    }
    for (int i = 0; i < c->n; i++)
        if (role[i] == 0)
            replicas |= 1U << i;
    for (int i = 0; i < c->n; i++) {
        if (c->node[i].pid > 0 && (listed[i] & replicas) != replicas) {
            snprintf(why, len, "node %d: CLUSTER SLOTS lacks a replica", i);
            return 0;
        }
    }
    for (int s = 0; s < RH_SLOTS; s++) {
        if (role[first[s]] != 1) {
            snprintf(why, len, "slot %d: served by node %d, %s", s,
                     first[s], role[first[s]] < 0 ? "down" : "a replica");
            return 0;
        }
    }
    return 1;
}

int rh_cluster_wait_ok(rh_cluster *c, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    char why[256] = "";

    do {
        if (cluster_settled(c, why, sizeof why))
            return 0;
        sleep_ms(RH_POLL_MS);
    } while (now_ms() < deadline);
    fprintf(stderr, "redis_harness: cluster not ok after %d ms: %s\n",
            timeout_ms, why);
    return -1;
}

/* redis-cli --cluster create over all of c's nodes; 0 or -1. */
static int cluster_create(const rh_cluster *c, int replicas)
{
    char exe[PATH_MAX], log[320], addr[RH_CLUSTER_MAX][32], nrep[16];
    char *argv[RH_CLUSTER_MAX + 8];
    int argc = 0, status = 0;
    long long deadline = now_ms() + RH_CREATE_MS;
    pid_t parent = getpid(), pid, r = 0;

    if (find_exe("redis-cli", exe, sizeof exe) != 0) {
        fprintf(stderr, "redis_harness: redis-cli not on PATH\n");
        return -1;
    }
    argv[argc++] = (char *)"redis-cli";
    argv[argc++] = (char *)"--cluster";
    argv[argc++] = (char *)"create";
    for (int i = 0; i < c->n; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", c->node[i].port);
        argv[argc++] = addr[i];
    }
    snprintf(nrep, sizeof nrep, "%d", replicas);
    argv[argc++] = (char *)"--cluster-replicas";
    argv[argc++] = nrep;
    argv[argc++] = (char *)"--cluster-yes";
    argv[argc] = NULL;
    snprintf(log, sizeof log, "%s/cluster-create.log", c->node[0].dir);
    fflush(NULL);
    if ((pid = fork()) == 0)
        exec_server(exe, argv, log, parent);
    if (pid < 0) {
        fprintf(stderr, "redis_harness: fork: %s\n", strerror(errno));
        return -1;
    }
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < deadline)
        sleep_ms(RH_POLL_MS);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fprintf(stderr, "redis_harness: redis-cli --cluster create took more "
                        "than %d ms\n", RH_CREATE_MS);
    } else if (r == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return 0;
    } else {
        fprintf(stderr, "redis_harness: redis-cli --cluster create failed "
                        "(status %d)\n", status);
    }
    print_tail(log);
    return -1;
}

int rh_cluster_available(void)
{
    return rh_available() && tool_runs("redis-cli");
}

static int cluster_start(rh_cluster *c, int masters, int replicas,
                         int node_timeout_ms, const rh_tls *t)
{
    const char *myid[] = {"CLUSTER", "MYID"};
    int total = masters * (1 + replicas);

    memset(c, 0, sizeof *c);
    if (masters < 3 || replicas < 0 || total > RH_CLUSTER_MAX ||
        node_timeout_ms <= 0) {
        fprintf(stderr, "redis_harness: rh_cluster_start(%d, %d, %d): needs "
                        "3 masters or more, at most %d nodes, a timeout\n",
                masters, replicas, node_timeout_ms, RH_CLUSTER_MAX);
        return -1;
    }
    for (int i = 0; i < total; i++) {
        char err[256];
        redisContext *ctx;
        redisReply *r = NULL;

        if (start_server(&c->node[i], NULL, node_timeout_ms, t, NULL) != 0)
            goto fail;
        c->n = i + 1;
        if ((ctx = node_ctx(c, i, err, sizeof err)) != NULL)
            r = command_argv(ctx, 2, myid, err, sizeof err);
        if (r != NULL && (r->type != REDIS_REPLY_STRING || r->len != 40))
            snprintf(err, sizeof err, "CLUSTER MYID: not a node id");
        else if (r != NULL)
            memcpy(c->id[i], r->str, 41);
        freeReplyObject(r);
        redisFree(ctx);
        if (c->id[i][0] == '\0') {
            fprintf(stderr, "redis_harness: node %d: %s\n", i, err);
            goto fail;
        }
    }
    if (cluster_create(c, replicas) == 0 &&
        rh_cluster_wait_ok(c, RH_CLUSTER_UP_MS) == 0)
        return 0;
fail:
    rh_cluster_stop(c);
    return -1;
}

int rh_cluster_start(rh_cluster *c, int masters, int replicas,
                     int node_timeout_ms)
{
    return cluster_start(c, masters, replicas, node_timeout_ms, NULL);
}

int rh_cluster_start_tls(rh_cluster *c, int masters, int replicas,
                         int node_timeout_ms, const rh_tls *t)
{
    return cluster_start(c, masters, replicas, node_timeout_ms, t);
}

int rh_cluster_stop(rh_cluster *c)
{
    int rc = 0;

    /* SIGTERM to all first: the nodes shut down side by side. */
    for (int i = 0; i < c->n; i++) {
        rh_entry *e = find_entry(c->node[i].dir);

        if (e != NULL && e->pid > 0) {
            kill(e->pid, SIGCONT);
            kill(e->pid, SIGTERM);
        }
    }
    for (int i = 0; i < c->n; i++)
        if (rh_stop(&c->node[i]) != 0)
            rc = -1;
    return rc;
}

char *rh_cluster_uri(const rh_cluster *c, int first, char *buf, size_t len)
{
    size_t used;
    int w = snprintf(buf, len, "redis-cluster://");

    if (first < 0 || first >= c->n || c->n == 0 || w < 0 ||
        (size_t)w >= len)
        return NULL;
    used = (size_t)w;
    for (int k = 0; k < c->n; k++) {
        w = snprintf(buf + used, len - used, "%s127.0.0.1:%d",
                     k ? "," : "", c->node[(first + k) % c->n].port);
        if (w < 0 || (size_t)w >= len - used)
            return NULL;
        used += (size_t)w;
    }
    return buf;
}

int rh_cluster_master_of(const rh_cluster *c, int slot)
{
    short owner[RH_SLOTS];

    if (slot < 0 || slot >= RH_SLOTS)
        return -1;
    claims(c, owner);
    return owner[slot];
}

int rh_cluster_is_master(const rh_cluster *c, int i)
{
    return node_role(c, i);
}

int rh_cluster_replica_of(const rh_cluster *c, int m)
{
    int found = -1;

    for (int i = 0; i < c->n && found < 0; i++) {
        redisContext *ctx = i == m ? NULL : rh_connect(&c->node[i]);
        redisReply *r = ctx ? redisCommand(ctx, "ROLE") : NULL;

        if (r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, "slave") == 0 &&
            r->element[2]->type == REDIS_REPLY_INTEGER &&
            r->element[2]->integer == c->node[m].port)
            found = i;
        freeReplyObject(r);
        redisFree(ctx);
    }
    return found;
}

int rh_cluster_migrate_begin(rh_cluster *c, int slot, int to)
{
    int from = rh_cluster_master_of(c, slot);

    if (from < 0 || to < 0 || to >= c->n || from == to) {
        fprintf(stderr, "redis_harness: rh_cluster_migrate_begin: slot %d "
                        "is served by node %d, cannot move to %d\n",
                slot, from, to);
        return -1;
    }
    if (cluster_ok_cmd(c, to, "rh_cluster_migrate_begin",
                       "CLUSTER SETSLOT %d IMPORTING %s", slot,
                       c->id[from]) != 0 ||
        cluster_ok_cmd(c, from, "rh_cluster_migrate_begin",
                       "CLUSTER SETSLOT %d MIGRATING %s", slot,
                       c->id[to]) != 0)
        return -1;
    return 0;
}

/* The node `from` is migrating `slot` to, by its "[slot->-id]" field. */
static int migrating_to(const rh_cluster *c, int from, int slot)
{
    char err[256], mark[32], *text = cluster_nodes(c, from, err, sizeof err);
    char *line, *next, *f[RH_SLOTS / 2];
    int n, to = -1;

    if (text == NULL) {
        fprintf(stderr, "redis_harness: node %d: %s\n", from, err);
        return -1;
    }
    snprintf(mark, sizeof mark, "[%d->-", slot);
    for (line = text; *line != '\0' && to < 0; line = next) {
        if ((n = split_line(line, f, RH_SLOTS / 2, &next)) == 0 ||
            !has_flag(f[2], "myself"))
            continue;
        for (int k = 8; k < n && to < 0; k++)
            if (strncmp(f[k], mark, strlen(mark)) == 0)
                to = index_of_id(c, f[k] + strlen(mark),
                                 strcspn(f[k] + strlen(mark), "]"));
    }
    free(text);
    return to;
}

int rh_cluster_migrate_keys(rh_cluster *c, int slot, int max_keys)
{
    char err[512], sslot[16], smax[16], sport[16], stmo[16];
    const char *getkeys[] = {"CLUSTER", "GETKEYSINSLOT", sslot, smax};
    const char **argv = NULL;
    int from = rh_cluster_master_of(c, slot), to, moved = -1;
    redisContext *ctx = NULL;
    redisReply *keys = NULL, *r = NULL;

    if (from < 0 || (to = migrating_to(c, from, slot)) < 0) {
        fprintf(stderr, "redis_harness: rh_cluster_migrate_keys: slot %d is "
                        "not migrating (served by node %d)\n", slot, from);
        return -1;
    }
    snprintf(sslot, sizeof sslot, "%d", slot);
    snprintf(smax, sizeof smax, "%d", max_keys);
    snprintf(sport, sizeof sport, "%d", c->node[to].port);
    snprintf(stmo, sizeof stmo, "%d", RH_MIGRATE_MS);
    if ((ctx = node_ctx(c, from, err, sizeof err)) == NULL ||
        (keys = command_argv(ctx, 4, getkeys, err, sizeof err)) == NULL)
        goto out;
    if (keys->type != REDIS_REPLY_ARRAY) {
        snprintf(err, sizeof err, "CLUSTER GETKEYSINSLOT: not an array");
        goto out;
    }
    if (keys->elements == 0) {
        moved = 0;
        goto out;
    }
    if ((argv = calloc(keys->elements + 7, sizeof *argv)) == NULL) {
        snprintf(err, sizeof err, "out of memory");
        goto out;
    }
    argv[0] = "MIGRATE";
    argv[1] = "127.0.0.1";
    argv[2] = sport;
    argv[3] = "";
    argv[4] = "0";
    argv[5] = stmo;
    argv[6] = "KEYS";
    for (size_t k = 0; k < keys->elements; k++)
        argv[7 + k] = keys->element[k]->str;
    /* Binary-safe keys would need lengths: the tests' keys are text. */
    if ((r = command_argv(ctx, (int)keys->elements + 7, argv, err,
                          sizeof err)) == NULL)
        goto out;
    if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0)
        moved = (int)keys->elements;
    else if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "NOKEY") == 0)
        moved = 0; /* gone (expired, deleted) since GETKEYSINSLOT */
    else
        snprintf(err, sizeof err, "MIGRATE: unexpected reply");
out:
    if (moved < 0)
        fprintf(stderr, "redis_harness: rh_cluster_migrate_keys: slot %d, "
                        "node %d to %d: %s\n", slot, from, to, err);
    free(argv);
    freeReplyObject(r);
    freeReplyObject(keys);
    redisFree(ctx);
    return moved;
}

int rh_cluster_migrate_end(rh_cluster *c, int slot, int to)
{
    const char *what = "rh_cluster_migrate_end";
    int from = rh_cluster_master_of(c, slot);

    if (from < 0 || to < 0 || to >= c->n) {
        fprintf(stderr, "redis_harness: %s: slot %d is served by node %d, "
                        "cannot move to %d\n", what, slot, from, to);
        return -1;
    }
    if (cluster_ok_cmd(c, to, what, "CLUSTER SETSLOT %d NODE %s", slot,
                       c->id[to]) != 0 ||
        (from != to && cluster_ok_cmd(c, from, what,
                                      "CLUSTER SETSLOT %d NODE %s", slot,
                                      c->id[to]) != 0))
        return -1;
    for (int i = 0; i < c->n; i++)
        if (i != to && i != from && node_role(c, i) == 1 &&
            cluster_ok_cmd(c, i, what, "CLUSTER SETSLOT %d NODE %s", slot,
                           c->id[to]) != 0)
            return -1;
    return 0;
}

int rh_cluster_failover_wait(rh_cluster *c, int killed, int timeout_ms)
{
    unsigned char former[RH_SLOTS];
    short owner[RH_SLOTS];
    char err[256] = "", *text, *line, *next, *f[RH_SLOTS / 2];
    int replica[RH_CLUSTER_MAX] = {0}, nslots = 0, master = 0, n;
    long long deadline;

    if ((text = cluster_nodes(c, killed, err, sizeof err)) == NULL) {
        fprintf(stderr, "redis_harness: rh_cluster_failover_wait: %s\n", err);
        return -1;
    }
    memset(former, 0, sizeof former);
    for (line = text; *line != '\0'; line = next) {
        if ((n = split_line(line, f, RH_SLOTS / 2, &next)) == 0)
            continue;
        if (has_flag(f[2], "myself")) {
            master = has_flag(f[2], "master");
            mark_slots(f, n, former);
        } else if (strcmp(f[3], c->id[killed]) == 0) {
            int i = index_of_id(c, f[0], strlen(f[0]));

            if (i >= 0)
                replica[i] = 1;
        }
    }
    free(text);
    for (int s = 0; s < RH_SLOTS; s++)
        nslots += former[s];
    if (!master || nslots == 0) {
        fprintf(stderr, "redis_harness: rh_cluster_failover_wait: node %d "
                        "is not a master with slots\n", killed);
        return -1;
    }
    if (rh_kill(&c->node[killed]) != 0)
        return -1;
    deadline = now_ms() + timeout_ms;
    do {
        int heir = -1, all = 1;

        claims(c, owner);
        for (int s = 0; s < RH_SLOTS && all; s++) {
            if (!former[s])
                continue;
            if (heir < 0)
                heir = owner[s];
            all = heir >= 0 && owner[s] == heir && replica[heir];
        }
        if (!all)
            snprintf(err, sizeof err, "no replica of node %d serves all of "
                                      "its slots", killed);
        else if (cluster_settled(c, err, sizeof err))
            return heir;
        sleep_ms(RH_POLL_MS);
    } while (now_ms() < deadline);
    fprintf(stderr, "redis_harness: rh_cluster_failover_wait: after %d ms: "
                    "%s\n", timeout_ms, err);
    return -1;
}

/* CRC16-CCITT (XMODEM: poly 0x1021, init 0), the cluster's key hash. */
static unsigned crc16(const unsigned char *p, size_t len)
{
    unsigned crc = 0;

    while (len-- > 0) {
        crc ^= (unsigned)*p++ << 8;
        for (int b = 0; b < 8; b++)
            crc = crc & 0x8000 ? (crc << 1 ^ 0x1021) & 0xffff
                               : (crc << 1) & 0xffff;
    }
    return crc;
}

unsigned rh_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len), *close;

    /* A hash tag: the bytes between the first '{' and the first '}' after
     * it, when there are any. */
    if (open != NULL &&
        (close = memchr(open + 1, '}', len - (size_t)(open + 1 - key))) !=
            NULL &&
        close > open + 1)
        return crc16((const unsigned char *)open + 1,
                     (size_t)(close - open - 1)) & (RH_SLOTS - 1);
    return crc16((const unsigned char *)key, len) & (RH_SLOTS - 1);
}
