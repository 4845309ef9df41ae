/*
 * redis_harness.c -- the servers' lives: starts, stops, crashes, restarts
 * and freezes real redis-server processes for the tests (see
 * redis_harness.h for the rules).
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
 * The rest of the harness, one concern a file, sharing
 * redis_harness_impl.h: redis_harness_launch.c writes a server's config
 * and runs it up to its first PONG; redis_harness_client.c connects to a
 * server and reads what it says; redis_harness_sentinel.c starts replicas
 * and sentinels; redis_harness_cluster.c builds and drives a Redis
 * Cluster.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "redis_harness_impl.h"

#include "child_exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static rh_entry registry[RH_MAX_SERVERS];
const char *rh_loadmodule;
static int atexit_registered, swept;

/* ---- small utilities ---------------------------------------------------- */

static int is_main_thread(void)
{
    return (pid_t)syscall(SYS_gettid) == getpid();
}

/* Full path of `name` from PATH into out; -1 if not there. */
int rhi_find_exe(const char *name, char *out, size_t len)
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

long rhi_file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Does the file contain `needle` at or after byte `from`? */
int rhi_file_mentions(const char *path, long from, const char *needle)
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
void rhi_print_tail(const char *path)
{
    char buf[RH_TAIL_BYTES + 1];
    FILE *f = fopen(path, "r");
    long size = rhi_file_size(path);
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

rh_entry *rhi_find_entry(const char *dir)
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
void rhi_exec_server(const char *exe, char *const argv[], const char *out,
                     pid_t parent)
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

/* ---- the API ------------------------------------------------------------ */

/* 1 if `name --version` runs and exits 0; 0 with the reason on stderr. */
int rhi_tool_runs(const char *name)
{
    char exe[PATH_MAX], arg0[32], ver[] = "--version";
    char *argv[] = {arg0, ver, NULL};
    int status = -1;
    pid_t parent = getpid(), pid;

    snprintf(arg0, sizeof arg0, "%s", name);
    if (rhi_find_exe(name, exe, sizeof exe) != 0) {
        fprintf(stderr, "redis_harness: %s is not on PATH\n", name);
        return 0;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0)
        rhi_exec_server(exe, argv, "/dev/null", parent);
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
    return rhi_tool_runs("redis-server");
}

/* rh_start(), a cluster node when cluster_ms > 0, TLS when t is set, a
 * replica or a sentinel as role says (NULL: neither). */
int rhi_start_server(rh_server *s, const char *password, int cluster_ms,
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
    if (rhi_launch(s, e, 0) != 0) {
        remove_dir(e->dir);
        e->dir[0] = '\0';
        return -1;
    }
    return 0;
}

int rh_start(rh_server *s, const char *password)
{
    return rhi_start_server(s, password, 0, NULL, NULL);
}

int rh_start_tls(rh_server *s, const char *password, const rh_tls *t)
{
    return rhi_start_server(s, password, 0, t, NULL);
}

int rh_stop(rh_server *s)
{
    rh_entry *e = rhi_find_entry(s->dir);
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
rh_entry *rhi_running(const rh_server *s, const char *what)
{
    rh_entry *e = rhi_find_entry(s->dir);

    if (e == NULL || e->pid <= 0) {
        fprintf(stderr, "redis_harness: %s: server not running\n", what);
        return NULL;
    }
    return e;
}

int rh_kill(rh_server *s)
{
    rh_entry *e = rhi_running(s, "rh_kill");
    int rc;

    if (e == NULL)
        return -1;
    rc = end_process(e, SIGKILL);
    s->pid = 0;
    return rc;
}

int rh_restart(rh_server *s)
{
    rh_entry *e = rhi_find_entry(s->dir);
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
    return rhi_launch(s, e, 1);
}

/* Signal a running server and wait until /proc shows `stopped` or not. */
static int stop_cont(rh_server *s, int sig, int stopped, const char *what)
{
    rh_entry *e = rhi_running(s, what);
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
