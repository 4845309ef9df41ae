/*
 * redis_harness_cluster.c -- Redis Cluster for the tests.  A cluster node
 * is a server (redis_harness.c) with cluster directives in its redis.conf
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

#include "redis_harness_impl.h"

#include "child_exec.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/wait.h>

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
    return rhi_open_ctx(&c->node[i], RH_CONNECT_MS, err, len);
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
        rc = rhi_reply_ok(ctx,
                          redisCommandArgv(ctx, argc, (const char **)argv,
                                           NULL),
                          "OK", err, sizeof err);
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

    if (rhi_find_exe("redis-cli", exe, sizeof exe) != 0) {
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
        rhi_exec_server(exe, argv, log, parent);
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
    rhi_print_tail(log);
    return -1;
}

int rh_cluster_available(void)
{
    return rh_available() && rhi_tool_runs("redis-cli");
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

        if (rhi_start_server(&c->node[i], NULL, node_timeout_ms, t, NULL) != 0)
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
        rh_entry *e = rhi_find_entry(c->node[i].dir);

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

