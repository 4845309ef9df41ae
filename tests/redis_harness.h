/*
 * redis_harness.h -- a real redis-server for the tests, run as a child of
 * the test process on a free loopback port and a unix socket in a fresh
 * temp dir, with no persistence, so a suite can start, crash, restart,
 * hang and stop servers at will and assert against them.
 *
 * Lifetime.  Each server dies with the process that started it however that
 * process ends (PR_SET_PDEATHSIG), and an atexit handler stops whatever is
 * still running and removes the temp dirs; the dirs of a process that
 * ended without running it (_exit, a crash) are swept by the next
 * rh_start() on the machine.  rh_stop() is still the polite way: it removes
 * the dir at once and frees the slot (32 servers at a time).
 *
 * Check.  In Check's default fork mode every test runs in a child process.
 * Start a server either
 *   - in an unchecked fixture (tcase_add_unchecked_fixture), which runs in
 *     the runner process: one server shared by the tests of the TCase, each
 *     of which sees a copy of the rh_server; or
 *   - inside the test itself: the server is then a child of the test
 *     process and dies with it even when an assertion ends it early.
 * A checked fixture runs in the test's process, so it counts as the second.
 * A test that kills, restarts or pauses a server should start its own.
 * Done to a fixture server from a forked test, the change outlives the
 * test, unseen by the runner's copy of the rh_server: a killed server
 * stays dead, a paused one paused, and a restarted one, a child of the
 * test, dies with it.
 * With CK_FORK=no everything runs in one process and both ways work too.
 *
 * Threads.  rh_start() and rh_restart() fork, and must be called from the
 * process's main thread: the death signal follows the thread that forked,
 * so a server forked from a helper thread would be killed when that thread
 * exits.  They refuse (return -1) anywhere else.  The calls that change a
 * server (start, stop, kill, restart, pause, resume) share a registry and
 * must not run concurrently; rh_connect(), rh_info_int() and rh_uri() may
 * be called from any thread at any time.
 *
 * SIGPIPE.  The harness leaves its disposition alone: a write to a killed
 * server raises it, and whether the library survives that is for the
 * library's own tests to show.
 *
 * Link with hiredis and -lpthread.
 */
#ifndef RL_REDIS_HARNESS_H
#define RL_REDIS_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

typedef struct rh_server {
    pid_t pid;           /* 0 when not running */
    int port;            /* loopback TCP port, picked free at start */
    char dir[256];       /* temp dir: config, logs, unix socket */
    char unix_path[300]; /* unix socket path inside dir */
    char password[64];   /* "" = no AUTH */
} rh_server;

/* 1 if redis-server is on PATH and runs; 0 with the reason on stderr. */
int rh_available(void);

/*
 * Start a server; `password` NULL or "" for none (at most 63 bytes).
 * 0 once it answers PING, -1 on error with the message and the tail of the
 * server's log on stderr.  *s is overwritten.
 */
int rh_start(rh_server *s, const char *password);

/* SIGTERM, wait (SIGKILL after 5 s), remove the dir.  0 if not started. */
int rh_stop(rh_server *s);

/* SIGKILL and wait: a crash.  The dir and port stay for rh_restart(). */
int rh_kill(rh_server *s);

/*
 * Start again on the same port, socket and password, EMPTY: any running
 * process is stopped first and a dump file a test may have SAVEd is
 * deleted.  0 once it answers PING, -1 on error (then not running).
 */
int rh_restart(rh_server *s);

/* SIGSTOP / SIGCONT, returning once the process is stopped / running:
 * connections stay open and commands hang, unlike a refusal. */
int rh_pause(rh_server *s);
int rh_resume(rh_server *s);

/*
 * A TCP context with 1 s connect and command timeouts, AUTHed when the
 * server has a password; NULL with the reason on stderr.  Free it with
 * redisFree().
 */
redisContext *rh_connect(const rh_server *s);

/* An integer field of INFO `section`, e.g. ("memory", "used_memory");
 * -1 on error, on a missing field or on one that is not an integer. */
long long rh_info_int(const rh_server *s, const char *section,
                      const char *field);

/* "redis://[:password@]127.0.0.1:PORT/0" with the password
 * percent-encoded; NULL if it does not fit in `len` bytes. */
char *rh_uri(const rh_server *s, char *buf, size_t len);

#endif
