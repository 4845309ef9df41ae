/*
 * rld_harness.h -- a real ratelimitd for the tests: the built binary run as
 * a child of the test process on a free loopback port (--listen
 * 127.0.0.1:0, the port read back from --port-file), with its database,
 * token file and log in a fresh temp dir, and libcurl to talk to it.
 *
 * Which binary: $RATELIMITD (make check sets it; sanitize.sh points it at
 * its own build), else $top_builddir/tools/ratelimitd/ratelimitd.
 *
 * Lifetime.  The server dies with the thread that started it however the
 * test ends (PR_SET_PDEATHSIG), so start it from the test's main thread;
 * rld_cleanup() removes the dir.  rld_kill() is a crash (SIGKILL), after
 * which rld_start() again on the same rld reopens the same database.
 *
 * Link with libcurl and -lpthread.
 */
#ifndef RL_RLD_HARNESS_H
#define RL_RLD_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

/* The token file every server gets: two operators. */
#define RLD_ALICE "alice"
#define RLD_ALICE_TOKEN "alice-0123456789abcdef-token"
#define RLD_BOB "bob"
#define RLD_BOB_TOKEN "bob-fedcba9876543210-token"

#define RLD_ARGS_MAX 16

typedef struct rld {
    pid_t pid;          /* 0 when not running                          */
    int port;
    char dir[256];      /* temp dir: rules.db, tokens, port, rld.log   */
    char db[300];       /* the database path                           */
    char log[300];      /* the server's stderr                         */
    char url[64];       /* "http://127.0.0.1:PORT"                     */
} rld;

/* 1 if the binary is there and runs; 0 with the reason on stderr. */
int rld_available(void);

/*
 * Start a server with `args` (NULL-terminated extra flags, may be NULL)
 * after --token-file, --db, --listen and --port-file.  A zeroed rld gets a
 * new temp dir; an rld that ran before keeps its dir and database.  0 once
 * the port file is there, -1 (the log's tail on stderr) if the server
 * exited or took over 10 s.
 */
int rld_start(rld *d, const char *const *args);

/* Run the binary with exactly these flags (after argv[0]) and wait for it
 * to exit: its exit status, -1 if it had to be killed after 10 s.  For
 * start-up refusals; its stderr goes to d->log. */
int rld_run(rld *d, const char *const *args);

/* SIGTERM and wait (SIGKILL after 10 s): the exit status, 0 for a clean
 * stop; -1 if killed or not running. */
int rld_stop(rld *d);

/* SIGKILL and wait: a crash. */
int rld_kill(rld *d);

/* Stop if running, remove the dir. */
void rld_cleanup(rld *d);

/* The tail of the server's log into buf (NUL-terminated). */
void rld_log_tail(const rld *d, char *buf, size_t len);

typedef struct rld_resp {
    long status;        /* 0: no answer (connection failed)  */
    char *body;         /* NUL-terminated, "" when none      */
    size_t len;
    char etag[64];      /* "" when none                      */
    char allow[128];
    char www_auth[128];
    char content_type[128];
} rld_resp;

/*
 * One request: `method` on `path` (sent as is: no normalisation of "." or
 * ".." and no %-decoding), with "Authorization: Bearer <token>" when token
 * is not NULL, extra header lines (NULL-terminated, may be NULL), and a
 * body of `len` bytes with Content-Type: application/json when body is not
 * NULL (a "Content-Type: ..." among the headers replaces it).  Fills *r
 * (free it with rld_resp_free()); returns r->status.  5 s timeout.
 */
long rld_http(const rld *d, const char *method, const char *path,
              const char *token, const char *const *headers,
              const char *body, size_t len, rld_resp *r);
void rld_resp_free(rld_resp *r);

/* Send `request` (a whole raw HTTP request) over a new connection and
 * read the status code of the answer: for bytes no client library would
 * send.  -1 on a connection error. */
int rld_raw(const rld *d, const char *request, size_t len);

#endif
