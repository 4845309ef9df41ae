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
 * must not run concurrently; rh_connect(), rh_info_int(),
 * rh_cmdstat_calls() and rh_uri() may be called from any thread at any time.
 *
 * SIGPIPE.  The harness leaves its disposition alone: a write to a killed
 * server raises it, and whether the library survives that is for the
 * library's own tests to show.
 *
 * Link with every tests/redis_harness*.c (Makefile.am's REDIS_HARNESS),
 * hiredis and -lpthread.
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
    int tls_port;        /* rh_start_tls(): its TLS port; else 0 */
} rh_server;

/* A Redis module every server (not sentinel) started or restarted from
 * now on loads: "path [args...]", a loadmodule line (ratelimit.so's tests);
 * NULL (the default) for none. */
extern const char *rh_loadmodule;

/* 1 if redis-server is on PATH and runs; 0 with the reason on stderr. */
int rh_available(void);

/*
 * Start a server; `password` NULL or "" for none (at most 63 bytes).
 * 0 once it answers PING, -1 on error with the message and the tail of the
 * server's log on stderr.  *s is overwritten.
 */
int rh_start(rh_server *s, const char *password);

/*
 * TLS (rediss://): as rh_start(), and a TLS port too (s->tls_port, also
 * picked free) with the server's certificate and key and the CA it
 * checks client certificates against (paths, PEM, kept for rh_restart());
 * auth_clients "no", "optional" or "yes" (tls-auth-clients).  The
 * plaintext port stays, for the harness's own control connections.
 */
typedef struct rh_tls {
    const char *cert_file, *key_file, *ca_file;
    const char *auth_clients;
} rh_tls;
int rh_start_tls(rh_server *s, const char *password, const rh_tls *t);

/*
 * Redis Sentinel.  A replica (replicaof the master, with masterauth its
 * password; its own password `password`) and sentinels are ordinary
 * rh_servers for rh_kill(), rh_stop(), rh_connect() and the rest, with
 * the same lifetime and thread rules.  A sentinel runs redis-sentinel on
 * a config in its dir (which it rewrites): it monitors `master` as
 * `name`, quorum RH_SENTINEL_QUORUM, down after RH_SENTINEL_DOWN_MS,
 * failover timeout RH_SENTINEL_FAILOVER_MS, with the master's password
 * (auth-pass); `password`, if set, is its own (requirepass).
 */
#define RH_SENTINEL_QUORUM 2
#define RH_SENTINEL_DOWN_MS 500
#define RH_SENTINEL_FAILOVER_MS 2000

/* 1 if redis-server and redis-sentinel run; 0 with the reason on
 * stderr. */
int rh_sentinel_available(void);

int rh_start_replica(rh_server *s, const char *password,
                     const rh_server *master);
int rh_start_sentinel(rh_server *s, const char *password, const char *name,
                      const rh_server *master);

/* The same over TLS (t as for rh_start_tls(); the plaintext port stays,
 * for the harness): the replica replicates from the master's TLS port and
 * announces its own (tls-replication); the sentinel monitors the master
 * at its TLS port and talks TLS to the servers and to the other sentinels
 * (which must run TLS too), and serves its clients on its own TLS port.
 * The master needs tls-replication set to follow a new master. */
int rh_start_replica_tls(rh_server *s, const char *password,
                         const rh_server *master, const rh_tls *t);
int rh_start_sentinel_tls(rh_server *s, const char *password,
                          const char *name, const rh_server *master,
                          const rh_tls *t);

/* Wait until sentinel s sees master `name` ok with `replicas` replicas and
 * `sentinels` sentinels in all (itself included); 0, or -1 after
 * timeout_ms with what it saw on stderr. */
int rh_sentinel_wait(const rh_server *s, const char *name, int replicas,
                     int sentinels, int timeout_ms);

/* 1 if s says it is a master (ROLE), 0 a replica, -1 no answer. */
int rh_is_master(const rh_server *s);

/* SIGTERM, wait (SIGKILL after 5 s), remove the dir.  0 if not started. */
int rh_stop(rh_server *s);

/* SIGKILL and wait: a crash.  The dir and port stay for rh_restart(). */
int rh_kill(rh_server *s);

/*
 * Start again on the same port, socket and password, EMPTY: any running
 * process is stopped first and a dump file a test may have SAVEd is
 * deleted.  0 once it answers PING, -1 on error (then not running).
 * A cluster node keeps its nodes.conf, so it comes back with its identity
 * and its view of the cluster, but no keys and no scripts: a master
 * restarted before its replicas took over is again the master of its
 * slots, now empty (its replicas resync, and empty too).
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

/* The calls of `command` (lower case, e.g. "evalsha") that INFO
 * commandstats counts so far: 0 if none yet, -1 on error (the reason on
 * stderr). */
long long rh_cmdstat_calls(const rh_server *s, const char *command);

/* "redis://[:password@]127.0.0.1:PORT/0" with the password
 * percent-encoded; NULL if it does not fit in `len` bytes. */
char *rh_uri(const rh_server *s, char *buf, size_t len);

/*
 * Redis Cluster.  A cluster is a set of rh_servers started with
 * cluster-enabled, each in its own dir with its nodes.conf, on a port P
 * such that P and P + 10000 (the cluster bus) were both free, P < 55535.
 * The nodes are ordinary rh_servers for rh_kill(), rh_restart(),
 * rh_pause(), rh_connect() and the rest, with the same lifetime rules
 * (they die with the process that started them; a cluster takes up to 9
 * of the 32 slots), and the same thread rules: rh_cluster_start() and
 * rh_restart() of a node fork and belong to the main thread, and the calls
 * that change nodes (start, stop, migrate, failover, and rh_kill() and the
 * rest on a node) must not run concurrently.  The nodes have no password.
 * Every connection the harness opens has 1 s timeouts and every wait a
 * deadline; a failure says why on stderr.
 *
 * Node index i is fixed for the life of the cluster; which nodes are
 * masters is redis-cli's choice at start and changes with failovers: ask
 * rh_cluster_master_of() / rh_cluster_is_master().
 */
#define RH_CLUSTER_MAX 9

typedef struct rh_cluster {
    rh_server node[RH_CLUSTER_MAX];
    int n;                         /* nodes started */
    char id[RH_CLUSTER_MAX][41];   /* CLUSTER MYID of each node */
} rh_cluster;

/* 1 if redis-server and redis-cli are on PATH and run; 0 with the reason
 * on stderr. */
int rh_cluster_available(void);

/*
 * Start masters * (1 + replicas) nodes (masters >= 3, at most
 * RH_CLUSTER_MAX in all) with cluster-node-timeout node_timeout_ms, no
 * persistence (appendonly no, save ""), replicas that sync at once and
 * always stand for election; join them with `redis-cli --cluster create
 * ... --cluster-replicas R --cluster-yes` and return once the cluster has
 * settled as rh_cluster_wait_ok() says.  Some 2.5 s for 6 nodes: a new
 * master holds cluster_state:fail for its first 2 s (and so does a master
 * rh_restart()ed).  0, or -1 with the reason on stderr and nothing left
 * running.  *c is overwritten.
 */
int rh_cluster_start(rh_cluster *c, int masters, int replicas,
                     int node_timeout_ms);

/* The same, every node also on a TLS port as rh_start_tls() says, with
 * tls-cluster and tls-replication on: a TLS client is given the TLS
 * ports (CLUSTER SLOTS, MOVED); redis-cli and the harness still use the
 * plaintext ones. */
int rh_cluster_start_tls(rh_cluster *c, int masters, int replicas,
                         int node_timeout_ms, const rh_tls *t);

/* rh_stop() every node (SIGTERM to all at once, then wait); 0, or -1 if a
 * node had to be killed or its dir could not be removed. */
int rh_cluster_stop(rh_cluster *c);

/*
 * "redis-cluster://127.0.0.1:P1,127.0.0.1:P2,..." listing every node in
 * index order, beginning at node `first` and wrapping around (first = 0:
 * 0, 1, ... n-1; first = 2: 2, ... n-1, 0, 1), so that a test can hand
 * out a seed list whose first node is down.  NULL if it does not fit in
 * `len` bytes or `first` is not a node.
 */
char *rh_cluster_uri(const rh_cluster *c, int first, char *buf, size_t len);

/*
 * Index of the node serving `slot` as a master, by what the live nodes
 * claim for themselves (the "myself" line of their CLUSTER NODES): during
 * a migration that is still the source; after a failover the promoted
 * replica.  Two claims (a node back with a stale config) go to the higher
 * config epoch.  -1 if no live master claims it.
 */
int rh_cluster_master_of(const rh_cluster *c, int slot);

/* 1 if node i is a master now (ROLE), 0 a replica, -1 down (not running,
 * or not answering within 1 s). */
int rh_cluster_is_master(const rh_cluster *c, int i);

/* The node that replicates master m now (by each other node's ROLE), or
 * -1 if none does. */
int rh_cluster_replica_of(const rh_cluster *c, int m);

/*
 * Wait until the cluster has settled: every running node answers and says
 * cluster_state:ok, every running replica has master_link_status:up, and
 * the CLUSTER SLOTS of every running node maps all 16384 slots, the same
 * way on all of them, each to a running master, and lists every running
 * replica (Redis leaves out a replica whose replication offset, as
 * gossiped, is still 0).  0, or -1 after timeout_ms with what was still
 * wrong on stderr.
 */
int rh_cluster_wait_ok(rh_cluster *c, int timeout_ms);

/*
 * Resharding one slot in steps, so that a test can hold it half-migrated
 * (the source answers -ASK for a key it no longer has) or finish the move
 * (the source answers -MOVED):
 *
 * begin: CLUSTER SETSLOT slot IMPORTING <source id> on node `to`, then
 *        SETSLOT slot MIGRATING <to id> on the source (the slot's master,
 *        rh_cluster_master_of()).  0 or -1.
 * keys:  move up to max_keys keys of the slot from the source to the node
 *        it is migrating to (CLUSTER GETKEYSINSLOT, then MIGRATE 127.0.0.1
 *        port "" 0 1000 KEYS ...; text keys only).  The number moved (0
 *        when the slot has none left), or -1.
 * end:   CLUSTER SETSLOT slot NODE <to id> on `to`, on the source, then on
 *        every other live master; the source refuses while it still holds
 *        keys of the slot.  Replicas learn by gossip: rh_cluster_wait_ok()
 *        waits for them.  0 or -1.
 */
int rh_cluster_migrate_begin(rh_cluster *c, int slot, int to);
int rh_cluster_migrate_keys(rh_cluster *c, int slot, int max_keys);
int rh_cluster_migrate_end(rh_cluster *c, int slot, int to);

/*
 * Crash master `killed` (rh_kill(&c->node[killed]), after noting its
 * slots and replicas), then wait until one of its replicas serves every
 * one of those slots and the cluster has settled (rh_cluster_wait_ok()).
 * The promoted replica's index, or -1 (not a live master with slots, or
 * timeout_ms passed; the node stays killed).  With node_timeout 1000 ms
 * this takes 2.5 to 3 s.
 */
int rh_cluster_failover_wait(rh_cluster *c, int killed, int timeout_ms);

/* The slot of a key: CRC16 (XMODEM) mod 16384 of the key, or of its hash
 * tag, the bytes between the first '{' and the next '}' when not empty. */
unsigned rh_key_slot(const char *key, size_t len);

#endif
