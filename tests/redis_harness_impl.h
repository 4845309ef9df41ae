/*
 * redis_harness_impl.h -- what the harness's files share, and nothing the
 * suites see (they include redis_harness.h): the limits, the registry
 * entry of a server, and the few calls one file makes of another:
 * redis_harness.c (the registry, processes, the start/stop API),
 * redis_harness_launch.c (config, fork, first PONG),
 * redis_harness_client.c (connections and queries),
 * redis_harness_sentinel.c and redis_harness_cluster.c.  The calls are
 * prefixed rhi_ so that no suite's own names meet them at link time.
 */
#ifndef RL_REDIS_HARNESS_IMPL_H
#define RL_REDIS_HARNESS_IMPL_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "redis_harness.h"
#include "timeutil.h"

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

/* redis_harness.c: small utilities. */
/* Full path of `name` from PATH into out; -1 if not there. */
int rhi_find_exe(const char *name, char *out, size_t len);
long rhi_file_size(const char *path);
/* Does the file contain `needle` at or after byte `from`? */
int rhi_file_mentions(const char *path, long from, const char *needle);
/* The last RH_TAIL_BYTES of a log, from a whole line, on stderr. */
void rhi_print_tail(const char *path);
/* The child between fork and exec: stdout and stderr to `out`. */
void rhi_exec_server(const char *exe, char *const argv[], const char *out,
                     pid_t parent);
/* 1 if `name --version` runs and exits 0; 0 with the reason on stderr. */
int rhi_tool_runs(const char *name);

/* redis_harness.c: the registry and the servers' lives. */
rh_entry *rhi_find_entry(const char *dir);
/* The registry entry of a server with a running process, or NULL. */
rh_entry *rhi_running(const rh_server *s, const char *what);
/* rh_start(), a cluster node when cluster_ms > 0, TLS when t is set, a
 * replica or a sentinel as role says (NULL: neither). */
int rhi_start_server(rh_server *s, const char *password, int cluster_ms,
                     const rh_tls *t, const rh_entry *role);

/* redis_harness_launch.c: run e's server (its dir made, its entry
 * filled) until it answers, retrying when it exits early (a rejected
 * optional directive, a lost port race: then on a new port unless
 * keep_port).  0, or -1 with the reason on stderr. */
int rhi_launch(rh_server *s, rh_entry *e, int keep_port);

/* redis_harness_client.c */
/* 0 if the reply is the status `want`; else -1 with the reason in err.
 * Frees the reply. */
int rhi_reply_ok(redisContext *c, redisReply *r, const char *want, char *err,
                 size_t len);
/* An integer field of INFO `section` (NULL: all) on c, or -1. */
long long rhi_query_info(redisContext *c, const char *section,
                         const char *field);
/* A TCP context on s with ms timeouts, AUTHed and PINGed, or NULL with
 * the reason in err. */
redisContext *rhi_open_ctx(const rh_server *s, long ms, char *err,
                           size_t len);

#endif
