/*
 * child_exec.h -- the steps between fork and exec that the test harnesses
 * share (redis_harness.c for redis-server and redis-cli, rld_harness.c for
 * ratelimitd): the child dies with the process that forked it, takes the
 * stdio it is given, inherits no other descriptor, no blocked signal and
 * no ignored one, then execs.  Only async-signal-safe calls.
 */
#ifndef RL_CHILD_EXEC_H
#define RL_CHILD_EXEC_H

#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The death signal armed, then the parent checked to be alive still, so
 * there is no window in which it can die unnoticed; _exit(126) if not. */
static inline void child_bind(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(126);
}

/* stdin, stdout, stderr from in, out, err (126 if one is < 0 or cannot
 * be set up), then exec `exe` (127 if that fails). */
static inline void child_exec(const char *exe, char *const argv[], int in,
                              int out, int err)
{
    static const int reset[] = {SIGCHLD, SIGHUP, SIGINT, SIGPIPE, SIGTERM};
    sigset_t none;

    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 ||
        dup2(out, 1) < 0 || dup2(err, 2) < 0)
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

#endif
