/*
 * redisbench_fault.c -- the fault that redisbench's outage group measures
 * against: the private redis-server hung (SIGSTOP, resumed by SIGCONT) or,
 * where it cannot be signalled, DEBUG SLEEP; a hung server rather than a
 * refused connection, as that is what the timeouts and the breaker are for.
 * The server is resumed on every way out.
 */
#include "redisbench.h"
/* ---- outage (group 6): the breaker against a hung server ------------------------ */

/* The fault: the private redis-server is stopped (SIGSTOP) and resumed
 * (SIGCONT), so it hangs rather than refuses -- the kernel still accepts
 * connections and bytes, nothing answers.  Its pid is INFO server's
 * process_id, used only when /proc/<pid>/cmdline is Redis's title for this
 * port ("redis-server 127.0.0.1:<port>") and we may signal it.  Otherwise
 * (or with REDISBENCH_FAULT=debug) DEBUG SLEEP hangs it for a time set in
 * advance, which needs enable-debug-command.  A stopped server is resumed
 * on every way out: error paths, exit() and terminating signals. */

static pid_t fault_pid;                     /* the server we stop        */
static volatile sig_atomic_t fault_stopped; /* SIGSTOPped by us, not yet
                                               SIGCONTed                 */
static int fault_ready, fault_debug;
static redisContext *fault_ctx; /* DEBUG SLEEP's connection, while it runs */
static double fault_secs;

static void fault_cont_atexit(void)
{
    if (fault_stopped) {
        kill(fault_pid, SIGCONT);
        fault_stopped = 0;
    }
}

/* SA_RESETHAND: raise() then takes the default action (async-signal-safe:
 * kill and raise only). */
static void fault_on_signal(int sig)
{
    if (fault_stopped)
        kill(fault_pid, SIGCONT);
    raise(sig);
}

static void fault_guard(void)
{
    static const int sigs[] = {SIGINT,  SIGTERM, SIGHUP, SIGQUIT, SIGABRT,
                               SIGSEGV, SIGBUS,  SIGFPE, SIGILL};
    struct sigaction sa, old;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fault_on_signal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    atexit(fault_cont_atexit);
}

/* The state letter of /proc/<pid>/stat ('T': stopped), 0 if unknown. */
static char proc_state(pid_t pid)
{
    char buf[512];
    const char *p = proc_stat((long)pid, buf, sizeof buf);

    return p ? *p : 0;
}

/* Is redis_pid the server on this port, and ours to signal? */
static int fault_can_signal(const options *o, char *cmd, size_t cmdlen)
{
    char path[64], addr[32];
    const char *p;
    size_t n;
    FILE *f;

    cmd[0] = '\0';
    if (redis_pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/cmdline", redis_pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(cmd, 1, cmdlen - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '\0')
            cmd[i] = ' ';
    cmd[n] = '\0';
    snprintf(addr, sizeof addr, ":%d", o->port);
    for (p = strstr(cmd, addr); p; p = strstr(p + 1, addr))
        if (!isdigit((unsigned char)p[strlen(addr)]))
            break;
    return strstr(cmd, "redis-server") && p && kill((pid_t)redis_pid, 0) == 0;
}

int fault_setup(const options *o, char *err)
{
    const char *how = getenv("REDISBENCH_FAULT");
    char cmd[256], why[ERRLEN];
    int can;

    if (fault_ready)
        return 0;
    if (how && *how && strcmp(how, "sigstop") != 0 && strcmp(how, "debug") != 0)
        return snprintf(err, ERRLEN, "REDISBENCH_FAULT=\"%.40s\": use sigstop "
                        "or debug", how), -1;
    can = fault_can_signal(o, cmd, sizeof cmd);
    if (how && strcmp(how, "sigstop") == 0 && !can)
        return snprintf(err, ERRLEN, "outage: pid %ld (INFO server process_id) "
                        "is not a redis-server on port %d we may signal "
                        "(cmdline \"%.100s\")", redis_pid, o->port, cmd), -1;
    fault_debug = !can || (how && strcmp(how, "debug") == 0);
    if (fault_debug && ctl_ok(why, "DEBUG SLEEP 0")) {
        snprintf(err, ERRLEN, "outage: cannot hang the server: pid %ld is "
                 "not ours to signal and %.300s", redis_pid, why);
        return -1;
    }
    fault_pid = (pid_t)redis_pid;
    fault_guard();
    fault_ready = 1;
    return 0;
}

const char *fault_name(void)
{
    return fault_debug ? "debug_sleep" : "sigstop";
}

/* Resume the server (SIGCONT and wait until /proc shows it running), or
 * wait for the end of DEBUG SLEEP. */
int fault_end(char *err)
{
    if (fault_ctx) {
        void *rep = NULL;
        int rc;

        redisSetTimeout(fault_ctx, (struct timeval){(long)fault_secs + 30, 0});
        rc = redisGetReply(fault_ctx, &rep);
        if (rep)
            freeReplyObject(rep);
        redisFree(fault_ctx);
        fault_ctx = NULL;
        if (rc != REDIS_OK)
            return snprintf(err, ERRLEN, "DEBUG SLEEP: no reply"), -1;
        return 0;
    }
    if (!fault_stopped)
        return 0;
    kill(fault_pid, SIGCONT);
    fault_stopped = 0;
    for (int i = 0; i < 2000; i++) {
        if (proc_state(fault_pid) != 'T')
            return 0;
        sleep_s(0.001);
    }
    return snprintf(err, ERRLEN, "redis-server pid %ld still stopped 2 s "
                    "after SIGCONT", (long)fault_pid), -1;
}

/* Hang the server (SIGSTOP, and wait until /proc shows it stopped), or
 * send DEBUG SLEEP secs on a connection of its own. */
int fault_begin(const options *o, double secs, char *err)
{
    char scratch[ERRLEN];
    int done = 0;

    if (!fault_debug) {
        fault_stopped = 1; /* first: a signal from here on resumes it */
        if (kill(fault_pid, SIGSTOP) != 0) {
            fault_stopped = 0;
            return snprintf(err, ERRLEN, "kill(%ld, SIGSTOP): %s",
                            (long)fault_pid, strerror(errno)), -1;
        }
        for (int i = 0; i < 2000; i++) {
            if (proc_state(fault_pid) == 'T')
                return 0;
            sleep_s(0.001);
        }
        fault_end(scratch);
        return snprintf(err, ERRLEN, "redis-server pid %ld not stopped 2 s "
                        "after SIGSTOP", (long)fault_pid), -1;
    }
    fault_ctx = redisConnectWithTimeout("127.0.0.1", o->port,
                                        (struct timeval){2, 0});
    if (fault_ctx == NULL || fault_ctx->err) {
        snprintf(err, ERRLEN, "DEBUG SLEEP: connect: %s",
                 fault_ctx ? fault_ctx->errstr : "out of memory");
        redisFree(fault_ctx);
        fault_ctx = NULL;
        return -1;
    }
    fault_secs = secs;
    redisAppendCommand(fault_ctx, "DEBUG SLEEP %.3f", secs);
    while (!done)
        if (redisBufferWrite(fault_ctx, &done) != REDIS_OK) {
            snprintf(err, ERRLEN, "DEBUG SLEEP: %s", fault_ctx->errstr);
            redisFree(fault_ctx);
            fault_ctx = NULL;
            return -1;
        }
    sleep_s(0.01); /* an idle server reads it at once and sleeps from then */
    return 0;
}
