/*
 * clustermodbench.c -- redisbench cluster_module: what one lone check
 * costs a Redis Cluster's CPU through ratelimit.so's RL.CHECK, beside the
 * library's Lua and the peer's script in the same run.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include <limits.h>

#include "redisbench.h"
#include "serverbench.h"

#define CM_ROUNDS 3
#define CM_KEYS 2000
#define CM_LIMIT 1000
#define CM_WINDOW_S 86400 /* slow: every key lives through the run */

static rh_cluster cl;
static redisContext *nc[RH_CLUSTER_MAX];
static int owner[CM_KEYS]; /* the peer's key k: its master */
static char sha[48], err[ERRLEN];

/* The usec INFO commandstats gives cmds (space-separated), over the
 * masters; cmds NULL: CONFIG RESETSTAT instead (then 0). */
static double usec(const char *cmds)
{
    char line[512], key[80];
    double t = 0;

    for (int i = 0; i < cl.n; i++)
        for (const char *p = cmds; p && *p; p += strspn(p, " ")) {
            int n = (int)strcspn(p, " ");
            snprintf(key, sizeof key, "cmdstat_%.*s", n, p);
            p += n;
            if (info_str(nc[i], "commandstats", key, line, sizeof line,
                         err) == 0)
                t += kv_num(line, "usec");
        }
    for (int i = 0; !cmds && i < cl.n; i++)
        bcmd_ok(nc[i], err, "CONFIG RESETSTAT");
    return t;
}

static int peer_call(int k)
{
    redisReply *r = redisCommand(nc[owner[k]], "EVALSHA %s 1 rlflx:user:%d "
                                 "1 %d", sha, k, CM_WINDOW_S);
    int ok = r && r->type == REDIS_REPLY_ARRAY;

    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Variant v (0 module, 1 lua, 2 the peer), algorithm a: m lone checks on
 * existing keys; the Redis usec per check, or -1. */
static double run(int v, int a, int m, const char *uri)
{
    char rules[300] = "[", key[32];
    uint64_t rng = 0x5EED0000ULL + (uint64_t)a;
    rl_limiter *lim = NULL;
    rl_result res = RL_RESULT_INIT;
    int bad = 0;

    one_rule(rules + 1, sizeof rules - 2, "u", a, CM_LIMIT, CM_WINDOW_S, 0);
    strcat(rules, "]");
    if (v < 2 && !(lim = bench_limiter_rules(
                       (const char *const[]){"store", uri, "timeout_ms",
                                             "1000", "deny_cache", "0",
                                             "fleet_size", "1",
                                             "redis_command",
                                             v ? "lua" : "module", NULL},
                       rules, err)))
        return -1;
    for (int i = 0; i < CM_KEYS + m && !bad; i++) {
        int k = i < CM_KEYS ? i : (int)pick(&rng, CM_KEYS);
        if (i == CM_KEYS)
            usec(NULL);
        snprintf(key, sizeof key, "user:%d:%s", k, algo_names[a]);
        bad = v < 2 ? rl_allow(lim, key, "u", 1, &res) != RL_OK ||
                          (res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN))
                    : peer_call(k);
    }
    rl_limiter_free(lim);
    if (bad)
        return snprintf(err, ERRLEN, "a check failed"), -1;
    return usec(v == 0 ? "rl.check" : v == 1 ? "fcall evalsha eval"
                                             : "evalsha") / m;
}

static int measure(int json, int quick, const char *uri)
{
    int rounds = quick ? 1 : CM_ROUNDS, m = quick ? 2000 : 10000;
    size_t n = (size_t)rounds;
    static const text_layout lay = {44, 8, 2, 3, 16, 2};

    for (int k = 0; k < CM_KEYS; k++) {
        char key[32];
        snprintf(key, sizeof key, "rlflx:user:%d", k);
        owner[k] = rh_cluster_master_of(&cl, (int)rh_key_slot(key,
                                                               strlen(key)));
        if (owner[k] < 0)
            return snprintf(err, ERRLEN, "no master for %s", key), -1;
    }
    for (int a = 0; a < ALGOS_ALL; a++) {
        double us[3][CM_ROUNDS];
        char name[64];
        figure f;
        for (int r = 0; r < rounds; r++)
            for (int v = 0; v < 3; v++)
                if ((us[v][r] = run(v, a, m, uri)) < 0)
                    return -1;
        snprintf(name, sizeof name, "cluster_module_usec_per_check_%s",
                 algo_names[a]);
        f = (figure){.name = name, .value = median_of(us[0], n),
                     .unit = "us", .nrefs = 2,
                     .ref = {median_of(us[2], n), median_of(us[1], n)},
                     .ref_name = {"peer_script_rlf", "cluster_lua"}};
        XLIST(&f, XN("over_lua", f.value / f.ref[1]),
              XN("checks_per_round", m), XN("rounds", rounds));
        emit_figure(&f, json, &lay);
        fflush(stdout);
    }
    return 0;
}

int clustermod_main(int argc, char **argv, sb_env *env)
{
    const char *so = getenv("RL_MODULE_SO");
    char path[PATH_MAX], uri[1024];
    int json = 0, quick = 0, rc = -1;

    (void)env;
    for (int i = 1; i < argc; i++) {
        int help = strcmp(argv[i], "--help") == 0;
        if (strcmp(argv[i], "--json") && strcmp(argv[i], "--quick"))
            return fprintf(help ? stdout : stderr, "usage: redisbench "
                           "cluster_module [--json] [--quick]\n"), !help * 2;
        *(argv[i][2] == 'j' ? &json : &quick) = 1;
    }
    if (!realpath(so ? so : "redis-module/.libs/ratelimit.so", path)) {
        fprintf(stderr, "redisbench cluster_module: no ratelimit.so (make; "
                "or set RL_MODULE_SO)\n");
        return 1;
    }
    rh_loadmodule = path;
    if (!rh_cluster_available() || rh_cluster_start(&cl, 3, 0, 5000) != 0 ||
        !rh_cluster_uri(&cl, 0, uri, sizeof uri)) {
        fprintf(stderr, "redisbench cluster_module: no cluster started\n");
        return 1;
    }
    for (int i = 0; i < cl.n; i++) {
        redisReply *r = (nc[i] = rh_connect(&cl.node[i]))
                            ? bcmd(nc[i], err, "SCRIPT LOAD %s", peer_lua)
                            : NULL;
        if (r && r->type == REDIS_REPLY_STRING)
            snprintf(sha, sizeof sha, "%s", r->str);
        freeReplyObject(r);
    }
    rc = sha[0] ? measure(json, quick, uri) : -1;
    if (rc)
        fprintf(stderr, "redisbench cluster_module: %s\n", err);
    for (int i = 0; i < cl.n; i++)
        if (nc[i])
            redisFree(nc[i]);
    rh_cluster_stop(&cl);
    return rc ? 1 : 0;
}
