/*
 * redisbench_module.c -- group module_usec of redisbench: what one
 * unbatched check costs the server (INFO commandstats usec_per_call, one
 * thread, one check per call) as ratelimit.so's RL.CHECK, beside the
 * library's own FCALL (a limiter with redis_command=lua, one thread: one
 * check per call), the library calling RL.CHECK itself (redis_command=
 * module, the same: its Redis CPU per check is the command's) and the
 * peer's script, rate-limiter-flexible 11.4.0's RateLimiterRedis
 * (incrTtlLuaScript of lib/RateLimiterRedis.js, sent as the peer sends it:
 * EVALSHA sha 1 key points duration), per algorithm, in the same run, in
 * alternating rounds (medians).  Each runs on existing keys (every key of
 * the key space checked once first), so every measured check reads and
 * writes state.  Needs the module loaded in the server under test (make
 * bench-module starts it so: REDIS_UP_ARGS="--loadmodule ...").  Issue
 * 24's target: <= 0.3x the peer's script.  Batches too: the library from
 * 64 threads, RL.CHECK and FCALL, Redis time per check (target: 1 us).  With RL_CALLGRIND_DIR set (the
 * server runs under valgrind --tool=callgrind writing there: make
 * bench-module-instructions), the server's instructions per check too,
 * all of them (reading the request, the command, the reply), from
 * callgrind_control's zero and dump around each measured run.  Group
 * module_bytes: the state's memory per client, module beside script.
 */
#include "redisbench.h"

#define MOD_ROUNDS 3
#define MOD_TARGET 0.3

static const char peer_script[] =
    "redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX') "
    "local consumed = redis.call('incrby', KEYS[1], ARGV[1]) "
    "local ttl = redis.call('pttl', KEYS[1]) "
    "if ttl == -1 then "
    "  redis.call('expire', KEYS[1], ARGV[2]) "
    "  ttl = 1000 * ARGV[2] "
    "end "
    "return {consumed, ttl} ";

/* One call of variant v (0 module, 2 peer) on key k, appended. */
static void append_call(int v, int a, unsigned long long k, const char *sha)
{
    if (v == 0)
        redisAppendCommand(ctl, "RL.CHECK 1 rl:{user:%012llu}:m "
                                "%d:%d:0:%lld:1:0:", k, a, SLOW_LIMIT,
                           (long long)SLOW_WINDOW_S * 1000); /* packed */
    else
        redisAppendCommand(ctl, "EVALSHA %s 1 rlflx:user:%012llu 1 %d", sha,
                           k, SLOW_WINDOW_S);
}

/* n replies read; -1 on an error reply. */
static int read_replies(unsigned long long n, char *err)
{
    for (unsigned long long i = 0; i < n; i++) {
        void *rep = NULL;
        int bad;
        if (redisGetReply(ctl, &rep) != REDIS_OK) {
            snprintf(err, ERRLEN, "module_usec: %s", ctl->errstr);
            return -1;
        }
        bad = ((redisReply *)rep)->type == REDIS_REPLY_ERROR;
        if (bad)
            snprintf(err, ERRLEN, "module_usec: %s", ((redisReply *)rep)->str);
        freeReplyObject(rep);
        if (bad)
            return -1;
    }
    return 0;
}

/* callgrind_control -z (zero) or -d (dump) of the server; 0 or -1. */
static int callgrind(const char *op)
{
    char cmd[96];

    snprintf(cmd, sizeof cmd, "callgrind_control %s %ld >/dev/null", op,
             redis_pid);
    return system(cmd) == 0 ? 0 : -1;
}

/* The instructions ("summary:") of the newest dump in dir; -1 if none. */
static double callgrind_last(const char *dir)
{
    char cmd[600], line[128];
    double v = -1;
    FILE *f;

    snprintf(cmd, sizeof cmd, "grep -h '^summary:' $(ls -t %s/cg.* | head "
             "-1)", dir);
    if ((f = popen(cmd, "r")) == NULL)
        return -1;
    if (fgets(line, sizeof line, f))
        v = strtod(line + strlen("summary:"), NULL);
    pclose(f);
    return v;
}

/* Variant v (0 RL.CHECK, 2 the peer): nk keys filled (pipelined), then m
 * lone calls on random ones; *us the server's usec_per_call. */
static int run_direct(int v, int a, unsigned long long nk,
                      unsigned long long m, const char *sha, double *us,
                      double *instr, char *err)
{
    const char *cg = getenv("RL_CALLGRIND_DIR");
    uint64_t rng = 0x5EED0000ULL + (uint64_t)a;
    cmdstat cs;

    if (flushall_wait(ctl, err))
        return -1;
    for (unsigned long long i = 0; i < nk; i += 500) {
        unsigned long long b = nk - i < 500 ? nk - i : 500;
        for (unsigned long long j = 0; j < b; j++)
            append_call(v, a, i + j, sha);
        if (read_replies(b, err))
            return -1;
    }
    if (ctl_ok(err, "CONFIG RESETSTAT") || (cg && callgrind("-z")))
        return -1;
    for (unsigned long long i = 0; i < m; i++) {
        append_call(v, a, pick(&rng, nk), sha);
        if (read_replies(1, err))
            return -1;
    }
    *instr = cg && callgrind("-d") == 0 ? callgrind_last(cg) / (double)m
                                        : -1;
    if (cmdstat_get(v == 0 ? "rl.check" : "evalsha", &cs, err))
        return -1;
    *us = cs.usec_per_call;
    return 0;
}

/* The library, redis_command `command`: nk keys filled, m checks from
 * `threads` threads (1: lone checks; many: batches); *us its calls' Redis
 * time per check (FCALL, or RL.CHECK: usec_per_call x calls / m). */
static int run_library(const options *lo, const char *command, int a,
                       unsigned long long nk, unsigned long long m,
                       int threads, double *us, char *err)
{
    options oc = *lo, *o = &oc;
    rl_limiter *lim = NULL;
    job j = {.rule_id = "u", .total = nk};
    job_result jr = {0};
    cmdstat cs;
    int rc;

    oc.command = command;
    if (flushall_wait(ctl, err) ||
        limiter_one_rule(o, "u", a, SLOW_LIMIT, SLOW_WINDOW_S, &lim, err) !=
            RL_OK)
        return -1;
    j.lim = lim;
    rc = run_job(&j, FILL_THREADS, &jr, "redisbench", err) ||
         ctl_ok(err, "CONFIG RESETSTAT");
    j = (job){.lim = lim, .rule_id = "u", .total = m, .nkeys = nk,
              .random = 1};
    rc = rc || run_job(&j, threads, &jr, "redisbench", err) ||
         (strcmp(command, "lua") == 0 ? cmdstat_script(&cs, err)
                                     : cmdstat_get("rl.check", &cs, err));
    rl_limiter_free(lim);
    if (rc)
        return -1;
    *us = cs.usec_per_call * cs.calls / (double)m;
    return 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int group_module(const options *o, char *err)
{
    unsigned long long nk = o->keys < USEC_KEYS ? o->keys : USEC_KEYS;
    unsigned long long m = o->usec_checks / 5 < 1000 ? 1000
                                                     : o->usec_checks / 5;
    int rounds = o->quick ? 1 : MOD_ROUNDS;
    double us[ALGOS_ALL][6][MOD_ROUNDS], in[ALGOS_ALL][3][MOD_ROUNDS];
    char sha[48];
    redisReply *r = ctl_cmd(err, "COMMAND INFO rl.check");

    if (r == NULL)
        return -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 ||
        r->element[0]->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        snprintf(err, ERRLEN, "module_usec: the server has no RL.CHECK: "
                 "load ratelimit.so (make bench-module does)");
        return -1;
    }
    freeReplyObject(r);
    if ((r = ctl_cmd(err, "SCRIPT LOAD %s", peer_script)) == NULL)
        return -1;
    snprintf(sha, sizeof sha, "%s", r->str ? r->str : "");
    freeReplyObject(r);
    for (int round = 0; round < rounds; round++)
        for (int a = 0; a < ALGOS_ALL; a++)
            if (run_direct(0, a, nk, m, sha, &us[a][0][round],
                           &in[a][0][round], err) ||
                run_library(o, "lua", a, nk, m, 1, &us[a][1][round], err) ||
                run_library(o, "module", a, nk, m, 1, &us[a][3][round],
                            err) ||
                run_library(o, "lua", a, nk, m, FILL_THREADS,
                            &us[a][4][round], err) ||
                run_library(o, "module", a, nk, m, FILL_THREADS,
                            &us[a][5][round], err) ||
                run_direct(2, a, nk, m, sha, &us[a][2][round],
                           &in[a][2][round], err))
                return -1;
    for (int a = 0; a < ALGOS_ALL; a++) {
        char name[48];
        figure f = {0};

        snprintf(name, sizeof name, "module_usec_per_check_%s",
                 algo_names[a]);
        f = (figure){.name = name, .value = median(us[a][0], rounds),
                      .unit = "us", .nrefs = 2,
                      .ref = {median(us[a][2], rounds), median(us[a][1], rounds)},
                      .ref_name = {"peer_script_rlf", "fcall_lone"}};
        xnum(&f, "target_ratio", MOD_TARGET);
        xnum(&f, "over_fcall", f.value / f.ref[1]);
        xnum(&f, "library_module_usec", median(us[a][3], rounds));
        xnum(&f, "library_module_ratio",
             median(us[a][3], rounds) / f.ref[0]);
        /* 64 threads: batches, Redis time per check */
        xnum(&f, "batched_module_usec", median(us[a][5], rounds));
        xnum(&f, "batched_fcall_usec", median(us[a][4], rounds));
        if (getenv("RL_CALLGRIND_DIR")) {
            double mi = median(in[a][0], rounds), pi = median(in[a][2], rounds);
            xnum(&f, "instructions", mi);
            xnum(&f, "peer_instructions", pi);
            xnum(&f, "instructions_ratio", mi / pi);
        }
        xnum(&f, "checks_per_round", (double)m);
        xnum(&f, "rounds", rounds);
        emit(o, &f);
    }
    return 0;
}

/* Group module_bytes: Redis memory per client (bytes_one: used_memory
 * grown over --mem-keys new clients, one check each) when ratelimit.so
 * writes the state, beside the same clients written by the Lua library
 * in the same run (its figure just before), per algorithm. */
int group_module_bytes(const options *o, char *err)
{
    options lua = *o, mod = *o;
    char name[64];
    double vl, vm;

    lua.command = "lua";
    mod.command = "module";
    for (int a = 0; a < ALGOS_ALL; a++) {
        snprintf(name, sizeof name, "bytes_per_key_lua_%s", algo_names[a]);
        if (bytes_one(&lua, a, SLOW_LIMIT, 1, name, PEER_BYTES_PER_KEY,
                      "peer_gcra_string_35B_names", &vl, err))
            return -1;
        snprintf(name, sizeof name, "module_bytes_per_key_%s",
                 algo_names[a]);
        if (bytes_one(&mod, a, SLOW_LIMIT, 1, name, vl, "lua_same_run", &vm,
                      err))
            return -1;
    }
    return 0;
}
