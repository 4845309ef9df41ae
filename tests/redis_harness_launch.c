/*
 * redis_harness_launch.c -- one server's process (redis_harness.c keeps
 * its registry and its life): a free port (and, for a cluster node, a free
 * bus port beside it), the redis.conf that says what it is (password,
 * TLS, replica, sentinel, cluster node, module, and the optional
 * directives it has not refused), the fork and exec, and the wait for its
 * first PONG, tried again on a lost port race, with the tail of its logs
 * on stderr when it will not come up.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "redis_harness_impl.h"

#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

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
            rhi_file_mentions(out, 0, optional[i].name)) {
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
        rhi_exec_server(exe, argv, out, parent);
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
        if ((c = rhi_open_ctx(s, 250, err, sizeof err)) != NULL) {
            long long id = rhi_query_info(c, "server", "process_id");

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
    rhi_print_tail(path);
    snprintf(path, sizeof path, "%s/redis.log", s->dir);
    rhi_print_tail(path);
}

/*
 * Run the server until it answers, retrying when it exits early because it
 * rejected enable-debug-command or lost the race for its port (then on a
 * new port, unless keep_port).
 */
int rhi_launch(rh_server *s, rh_entry *e, int keep_port)
{
    char exe[PATH_MAX], conf[320], log[320], out[320];

    if (rhi_find_exe(RH_EXE(e), exe, sizeof exe) != 0) {
        fprintf(stderr, "redis_harness: %s not on PATH\n", RH_EXE(e));
        return -1;
    }
    snprintf(conf, sizeof conf, "%s/redis.conf", s->dir);
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    snprintf(out, sizeof out, "%s/stdio.log", s->dir);
    for (int t = 0; t < RH_START_TRIES; t++) {
        long from = rhi_file_size(log);
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
        if (!rhi_file_mentions(log, from, "Address already in use"))
            break;
        if (keep_port)
            sleep_ms(100);
    }
    report_failure(s);
    return -1;
}
