/*
 * redisbench_module.c -- group module_usec of redisbench: what one
 * unbatched check costs the server as ratelimit.so's RL.CHECK, beside the
 * library's FCALL and rate-limiter-flexible's script in the same run
 * (Redis CPU, and under callgrind instructions); group module_bytes: the
 * state's memory per client, module beside script.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include "redisbench.h"

#define MOD_ROUNDS 3
#define MOD_SLICES 8 /* a round's runs of each, alternating */
#define MOD_BATCH 5  /* a round's runs of batches (all its checks each) */
#define MOD_TARGET 0.3

/* One call of variant v (0 module, 1 peer) on key k, appended. */
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

/* callgrind_control -z (zero) or -d (dump) of the server; 0 or -1. */
static int callgrind(const char *op)
{
    char cmd[96];

    snprintf(cmd, sizeof cmd, "callgrind_control %s %ld >/dev/null 2>&1", op,
             redis_pid);
    return system(cmd) == 0 ? 0 : -1;
}

/* The newest dump in dir, per call made since the zero: part[0] every
 * instruction of the server but serverCron's, part[1] serverCron's (it
 * runs by the clock, 10 times a second: under callgrind's slowdown it
 * lands on a check ~50 times as often as at full speed, unevenly), part[2]
 * processCommand's (the command from its lookup on: what commandstats
 * times); 0, or -1. */
static int callgrind_parts(const char *dir, unsigned long long calls,
                           double part[3])
{
    char cmd[700], line[512];
    int got = 0;
    FILE *f;

    snprintf(cmd, sizeof cmd, "f=$(ls -t %s/cg.* | head -1) && grep -h "
             "'^summary:' $f && callgrind_annotate --inclusive=yes $f | "
             "grep -E ':(serverCron|processCommand) \\[' | tr -d ,", dir);
    if ((f = popen(cmd, "r")) == NULL)
        return -1;
    part[1] = 0;
    while (fgets(line, sizeof line, f)) {
        int i = strncmp(line, "summary:", 8) == 0 ? 0
                : strstr(line, ":serverCron [") ? 1 : 2;
        part[i] = strtod(line + (i ? 0 : 8), NULL) / (double)calls;
        got |= 1 << i;
    }
    pclose(f);
    part[0] -= part[1];
    return (got & 5) == 5 ? 0 : -1;
}

/* RL.CHECK and the peer's script (v 0 and 1), each on nk keys of its own
 * (filled, pipelined), then `slices` slices of m lone calls on random
 * keys, the two alternating slice by slice so that both meet the same
 * load; us[v][s] each slice's usec_per_call (a slice the scheduler hit
 * stays one slice of many), and under callgrind in[v] the instructions
 * per call (callgrind_parts). */
static int run_direct(int a, unsigned long long nk, unsigned long long m,
                      int slices, const char *sha, double *us[2],
                      double in[2][3], char *err)
{
    const char *cg = getenv("RL_CALLGRIND_DIR");
    uint64_t rng = 0x5EED0000ULL + (uint64_t)a;
    cmdstat cs;

    if (flushall_wait(ctl, err))
        return -1;
    for (int v = 0; v < 2; v++)
        for (unsigned long long i = 0; i < nk; i += 500) {
            unsigned long long b = nk - i < 500 ? nk - i : 500;
            for (unsigned long long j = 0; j < b; j++)
                append_call(v, a, i + j, sha);
            if (read_replies(b, 0, "module_usec", err))
                return -1;
        }
    for (int s = 0; s < slices; s++)
        for (int v = 0; v < 2; v++) {
            if (ctl_ok(err, "CONFIG RESETSTAT") || (cg && callgrind("-z")))
                return -1;
            for (unsigned long long i = 0; i < m; i++) {
                append_call(v, a, pick(&rng, nk), sha);
                if (read_replies(1, 0, "module_usec", err))
                    return -1;
            }
            if ((cg && (callgrind("-d") || callgrind_parts(cg, m, in[v]))) ||
                cmdstat_get(v == 0 ? "rl.check" : "evalsha", &cs, err))
                return -1;
            us[v][s] = cs.usec_per_call;
        }
    return 0;
}

/* The library, redis_command `command`: nk keys filled, then `slices`
 * runs of m checks from `threads` threads (1: lone checks; many:
 * batches); us[s] each run's Redis time per check (FCALL, or RL.CHECK:
 * usec_per_call x calls / m). */
static int run_library(const options *lo, const char *command, int a,
                       unsigned long long nk, unsigned long long m,
                       int threads, int slices, double *us, char *err)
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
    rc = run_job(&j, FILL_THREADS, &jr, "redisbench", err);
    for (int s = 0; s < slices && !rc; s++) {
        j = (job){.lim = lim, .rule_id = "u", .total = m, .nkeys = nk,
                  .random = 1};
        rc = ctl_ok(err, "CONFIG RESETSTAT") ||
             run_job(&j, threads, &jr, "redisbench", err) ||
             (strcmp(command, "lua") == 0 ? cmdstat_script(&cs, err)
                                         : cmdstat_get("rl.check", &cs, err));
        us[s] = rc ? 0 : cs.usec_per_call * cs.calls / (double)m;
    }
    rl_limiter_free(lim);
    return rc ? -1 : 0;
}

int group_module(const options *o, char *err)
{
    unsigned long long nk = o->keys < USEC_KEYS ? o->keys : USEC_KEYS;
    unsigned long long m = o->usec_checks / 5 < 1000 ? 1000
                                                     : o->usec_checks / 5;
    int cg = getenv("RL_CALLGRIND_DIR") != NULL;
    int rounds = o->quick ? 1 : MOD_ROUNDS, slices = cg ? 1 : MOD_SLICES;
    int n = rounds * slices, bs = slices < MOD_BATCH ? slices : MOD_BATCH;
    /* [algo][RL.CHECK, FCALL, peer, library module, batched FCALL,
     * batched library module][slice of any round] */
    static double us[ALGOS_ALL][6][MOD_ROUNDS * MOD_SLICES];
    double in[ALGOS_ALL][2][3][MOD_ROUNDS], r[MOD_ROUNDS * MOD_SLICES];
    char sha[48];
    redisReply *rep = ctl_cmd(err, "COMMAND INFO rl.check");

    if (rep == NULL)
        return -1;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 1 ||
        rep->element[0]->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        snprintf(err, ERRLEN, "module_usec: the server has no RL.CHECK: "
                 "load ratelimit.so (make bench-module does)");
        return -1;
    }
    freeReplyObject(rep);
    if ((rep = ctl_cmd(err, "SCRIPT LOAD %s", peer_lua)) == NULL)
        return -1;
    snprintf(sha, sizeof sha, "%s", rep->str ? rep->str : "");
    freeReplyObject(rep);
    m /= (unsigned long long)slices;
    for (int round = 0; round < rounds; round++)
        for (int a = 0; a < ALGOS_ALL; a++) {
            double *u[6], ins[2][3];
            for (int k = 0; k < 6; k++)
                u[k] = us[a][k] + round * slices;
            if (run_direct(a, nk, m, slices, sha, (double *[2]){u[0], u[2]},
                           ins, err) ||
                run_library(o, "lua", a, nk, m, 1, slices, u[1], err) ||
                run_library(o, "module", a, nk, m, 1, slices, u[3], err) ||
                run_library(o, "lua", a, nk, m * slices, FILL_THREADS, bs,
                            u[4], err) ||
                run_library(o, "module", a, nk, m * slices, FILL_THREADS, bs,
                            u[5], err))
                return -1;
            for (int i = 0; cg && i < 6; i++)
                in[a][i / 3][i % 3][round] = ins[i / 3][i % 3];
        }
    for (int a = 0; a < ALGOS_ALL; a++) {
        char name[48];
        figure f = {0};

        for (int i = 0; i < n; i++)
            r[i] = us[a][0][i] / us[a][2][i];
        snprintf(name, sizeof name, "module_usec_per_check_%s",
                 algo_names[a]);
        f = (figure){.name = name, .value = median_of(us[a][0], n),
                      .unit = "us", .nrefs = 2,
                      .ref = {median_of(us[a][2], n), median_of(us[a][1], n)},
                      .ref_name = {"peer_script_rlf", "fcall_lone"}};
        xnum(&f, "target_ratio", MOD_TARGET);
        xnum(&f, "slice_ratio_median", median_of(r, n));
        xnum(&f, "over_fcall", f.value / f.ref[1]);
        xnum(&f, "library_module_usec", median_of(us[a][3], n));
        xnum(&f, "library_module_ratio", median_of(us[a][3], n) / f.ref[0]);
        /* 64 threads: batches, Redis time per check (bs runs a round) */
        for (int k = 4; k < 6; k++)
            for (int i = 0; i < rounds * bs; i++)
                us[a][k][i] = us[a][k][i / bs * slices + i % bs];
        xnum(&f, "batched_module_usec", median_of(us[a][5], rounds * bs));
        xnum(&f, "batched_module_usec_max", us[a][5][rounds * bs - 1]);
        xnum(&f, "batched_fcall_usec", median_of(us[a][4], rounds * bs));
        /* instructions: all but serverCron's (i 0), the command's (2) */
        for (int i = 0; cg && i < 3; i += 2) {
            double mi = median_of(in[a][0][i], rounds);
            double pi = median_of(in[a][1][i], rounds);
            xnum(&f, i ? "command_instructions" : "instructions", mi);
            xnum(&f, i ? "peer_command_instructions" : "peer_instructions",
                 pi);
            xnum(&f, i ? "command_instructions_ratio" : "instructions_ratio",
                 mi / pi);
        }
        xnum(&f, "checks_per_slice", (double)m);
        xnum(&f, "slices", n);
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
