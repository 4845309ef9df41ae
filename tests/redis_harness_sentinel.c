/*
 * redis_harness_sentinel.c -- Redis Sentinel for the tests: replicas and
 * sentinels are servers redis_harness.c starts with a role (the
 * directives redis_harness_launch.c writes for it), and the waits that
 * ask a sentinel what it sees of its master, and a server its ROLE.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "redis_harness_impl.h"

/* ---- Redis Sentinel ----------------------------------------------------- */

int rh_sentinel_available(void)
{
    return rhi_tool_runs("redis-server") && rhi_tool_runs("redis-sentinel");
}

int rh_start_replica_tls(rh_server *s, const char *password,
                         const rh_server *master, const rh_tls *t)
{
    rh_entry role = {.replica_of = t ? master->tls_port : master->port};

    snprintf(role.master_pw, sizeof role.master_pw, "%s", master->password);
    return rhi_start_server(s, password, 0, t, &role);
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
    return rhi_start_server(s, password, 0, t, &role);
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
        redisContext *c = rhi_open_ctx(s, RH_CONNECT_MS, why, sizeof why);
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
    redisContext *c = rhi_open_ctx(s, RH_CONNECT_MS, err, sizeof err);
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
