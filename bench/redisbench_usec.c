/*
 * redisbench_usec.c -- group 3 of redisbench: usec_per_call, what one check
 * costs the server, per algorithm, batched (64 threads) and lone (one),
 * beside the floor script, the peer's script and INCR + PEXPIRE.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include "redisbench.h"

/* The commands the library's script runs, counted per check. */
enum { N_GET, N_MGET, N_SET, N_PXT, N_TIME, NESTED };
static const char *const nested_cmd[NESTED] = {"get", "mget", "set",
                                               "pexpiretime", "time"};

/* The server's counters after the library's checks of one algorithm. */
typedef struct usec_lib {
    cmdstat cs, n[NESTED];
    unsigned long long fb, den;
} usec_lib;

/* The reference: INCR + PEXPIRE on existing keys, pipelined in batches of
 * 500: nk keys made (pass 0, every key once), then m pairs of random keys
 * counted (pass 1). */
static int usec_pair(unsigned long long nk, unsigned long long m,
                     cmdstat *incr, cmdstat *pexp, char *err)
{
    uint64_t rng = 0xC0FFEEULL;

    if (flushall_wait(ctl, err))
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        unsigned long long n = pass == 0 ? nk : m, b;
        if (pass == 1 && ctl_ok(err, "CONFIG RESETSTAT"))
            return -1;
        for (unsigned long long i = 0; i < n; i += b) {
            for (b = 0; b < 500 && i + b < n; b++) {
                unsigned long long k = pass == 0 ? i + b : pick(&rng, nk);
                redisAppendCommand(ctl, "INCR ref:%llu", k);
                redisAppendCommand(ctl, "PEXPIRE ref:%llu 60000", k);
            }
            if (read_replies(2 * b, REDIS_REPLY_INTEGER, "INCR/PEXPIRE", err))
                return -1;
        }
    }
    return cmdstat_get("incr", incr, err) || cmdstat_get("pexpire", pexp, err)
               ? -1 : 0;
}

/* ---- the floor script (the least a script must do per key) and the
 * peer's (rate-limiter-flexible 11.4.0's RateLimiterRedis) ---------------- */

/* A script: its text, its keys' prefix, the arguments after the keys. */
typedef struct ref_script {
    const char *lua, *prefix, *what;
    const char *const *args;
    int nargs;
} ref_script;

/* rate-limiter-flexible 11.4.0's incrTtlLuaScript (redisutil.h). */
const char peer_lua[] =
    "redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')\n"
    "local consumed = redis.call('incrby', KEYS[1], ARGV[1])\n"
    "local ttl = redis.call('pttl', KEYS[1])\n"
    "if ttl == -1 then\n"
    "  redis.call('expire', KEYS[1], ARGV[2])\n"
    "  ttl = 1000 * ARGV[2]\n"
    "end\n"
    "return {consumed, ttl}\n";

static const ref_script floor_script = {
    "local t = redis.call('TIME')\n"
    "local exp = string.format('%d', t[1] * 1000 + 60000)\n"
    "local v = redis.call('MGET', unpack(KEYS))\n"
    "for i = 1, #KEYS do\n"
    "  redis.call('SET', KEYS[i], string.format('%d', (tonumber(v[i]) or 0) + 1),\n"
    "             'PXAT', exp)\n"
    "end\n"
    "return #KEYS\n", "fl:", "floor script", NULL, 0};
static const ref_script peer_script = {
    peer_lua, "rlflx:user:", "peer script",
    (const char *const[]){"1", "3600", "1000000000", "3600"}, 4};

/* One pipelined run of `calls` calls of script sc, `batch` random
 * keys of nk each (pass 0: keys *next, *next + 1, ... in order, so that
 * every key exists once the fill is done). */
static int script_calls(const ref_script *sc, const char *sha, int pass,
                        unsigned long long calls, unsigned long long batch,
                        unsigned long long nk, uint64_t *rng,
                        unsigned long long *next, char *err)
{
    char nb[24], keys[64][32];
    const char *argv[3 + 64 + 4] = {"EVALSHA", sha, nb};

    snprintf(nb, sizeof nb, "%llu", batch);
    for (int i = 0; i < sc->nargs; i++)
        argv[3 + batch + (unsigned long long)i] = sc->args[i];
    for (unsigned long long c = 0; c < calls; c++) {
        for (unsigned long long b = 0; b < batch; b++) {
            unsigned long long k = pass == 0 ? (*next)++ % nk : pick(rng, nk);
            snprintf(keys[b], sizeof keys[b], "%s%llu", sc->prefix, k);
            argv[3 + b] = keys[b];
        }
        redisAppendCommandArgv(ctl, (int)(3 + batch) + sc->nargs, argv, NULL);
    }
    return read_replies(calls, 0, sc->what, err);
}

/* Script sc's usec per key over about m keys, in batches of `batch` (the
 * library's mean checks per call, 1..64), `depth` calls pipelined (1: one
 * at a time, as a lone check). */
static int usec_script(const ref_script *sc, unsigned long long nk,
                       unsigned long long m, unsigned long long batch,
                       unsigned long long depth, double *per_key, char *err)
{
    uint64_t rng = 0xF100DULL;
    unsigned long long next = 0;
    redisReply *r;
    cmdstat cs;
    char sha[48];

    if (flushall_wait(ctl, err) ||
        (r = ctl_cmd(err, "SCRIPT LOAD %s", sc->lua)) == NULL)
        return -1;
    snprintf(sha, sizeof sha, "%s", r->type == REDIS_REPLY_STRING ? r->str
                                                                : "");
    freeReplyObject(r);
    while (next < nk)
        if (script_calls(sc, sha, 0, 100, batch, nk, &rng, &next, err))
            return -1;
    if (ctl_ok(err, "CONFIG RESETSTAT"))
        return -1;
    for (unsigned long long done = 0; done < m; done += depth * batch)
        if (script_calls(sc, sha, 1, depth, batch, nk, &rng, &next, err))
            return -1;
    if (cmdstat_get("evalsha", &cs, err))
        return -1;
    *per_key = cs.usec_per_call / (double)batch;
    return 0;
}

/* The library: every one of nk keys checked once (so the measured checks
 * find state), then m checks of them counted, by `threads` threads (1: a
 * lone check per call); the key template of what it wrote in tmpl.  The
 * script's calls are FCALLs, or EVALSHAs with o->evalsha.  The library
 * batches requests that queue up into one script call, so there are
 * fewer calls than checks: the figure is Redis CPU per CHECK, total script
 * time over checks made. */
static int usec_library(const options *o, int a, unsigned long long nk,
                        unsigned long long m, int threads, usec_lib *u,
                        char *tmpl, size_t tmpllen, char *err)
{
    rl_limiter *lim = NULL;
    job j;
    job_result jr = {0};
    int rc;

    memset(u, 0, sizeof *u);
    if (flushall_wait(ctl, err) ||
        limiter_one_rule(o, "u", a, SLOW_LIMIT, SLOW_WINDOW_S, &lim, err))
        return -1;
    j = (job){.lim = lim, .rule_id = "u", .total = nk};
    rc = run_job(&j, FILL_THREADS, &jr, "redisbench", err) ||
         ctl_ok(err, "CONFIG RESETSTAT");
    j = (job){.lim = lim, .rule_id = "u", .total = m, .nkeys = nk,
              .random = 1};
    rc = rc || run_job(&j, threads, &jr, "redisbench", err);
    rl_limiter_free(lim);
    u->fb = jr.fallback;
    u->den = jr.denied;
    if (rc || key_template(tmpl, tmpllen, err) ||
        cmdstat_script(&u->cs, err))
        return -1;
    for (int i = 0; i < NESTED; i++)
        if (cmdstat_get(nested_cmd[i], &u->n[i], err))
            return -1;
    if (u->cs.calls < 1 || u->cs.failed > 0)
        return snprintf(err, ERRLEN, "usec_per_call %s: %.0f script calls "
                        "(%.0f failed) for %llu checks", algo_names[a],
                        u->cs.calls, u->cs.failed, m), -1;
    return 0;
}

/* The same script and arguments from redis-benchmark -c 64 -P 16, which
 * keeps Redis busy: the script's cost "hot".  A warm-up pass first, so it
 * too updates existing keys. */
static int usec_hot(const options *o, const char *sha, int a,
                    unsigned long long nk, unsigned long long m,
                    const char *tmpl, cmdstat hot[2], char *err)
{
    rb_result rb;

    if (flushall_wait(ctl, err) ||
        run_redis_benchmark(o, sha, 64, 16, 4 * nk, nk, tmpl, a, SLOW_LIMIT,
                            SLOW_WINDOW_S, &rb, err) ||
        ctl_ok(err, "CONFIG RESETSTAT") ||
        run_redis_benchmark(o, sha, 64, 16, m, nk, tmpl, a, SLOW_LIMIT,
                            SLOW_WINDOW_S, &rb, err) ||
        cmdstat_get("evalsha", &hot[0], err) ||
        cmdstat_get("pexpiretime", &hot[1], err))
        return -1;
    if (hot[0].calls < (double)m || hot[0].failed > 0)
        return snprintf(err, ERRLEN, "usec_per_call %s: redis-benchmark "
                        "made %.0f EVALSHA calls (%.0f failed), expected "
                        "%llu", algo_names[a], hot[0].calls, hot[0].failed,
                        m), -1;
    return 0;
}

/* The references of one algorithm's batched line. */
typedef struct usec_refs {
    cmdstat hot[2], incr, pexp; /* hot: EVALSHA, PEXPIRETIME */
    unsigned long long batch;
    double floor_us, peer_us;
} usec_refs;

/* usec_per_call_<algo>: the batched checks (u, FCALL; off, EVALSHA) beside
 * the peer's script and an INCR + PEXPIRE pair.  The commands the script
 * ran, per check, and their own cost (nested_usec_per_check): the rest is
 * the Lua interpreter.  The plain layout reads a batch's keys with one MGET
 * per call. */
static void usec_emit(const options *o, int a, unsigned long long nk,
                      unsigned long long m, const usec_lib *u,
                      const usec_lib *off, const usec_refs *r)
{
    double checks = (double)m, nested = 0, v;
    char name[48];

    for (int i = 0; i < NESTED; i++)
        nested += u->n[i].calls * u->n[i].usec_per_call / checks;
    v = u->cs.calls * u->cs.usec_per_call / checks;
    snprintf(name, sizeof name, "usec_per_call_%s", algo_names[a]);
    emit(o, &(figure){.name = name, .value = v, .unit = "us", .nrefs = 2,
        .ref = {r->peer_us, r->incr.usec_per_call + r->pexp.usec_per_call},
        .ref_name = {"peer_script", "incr_plus_pexpire"}, .x = {
        {"checks", checks}, {"script_calls", u->cs.calls},
        {"checks_per_call", checks / u->cs.calls},
        {"usec_per_script_call", u->cs.usec_per_call},
        {"keys", (double)nk}, {"threads", USEC_THREADS},
        {"get_per_check", u->n[N_GET].calls / checks},
        {"mget_per_check", u->n[N_MGET].calls / checks},
        {"set_per_check", u->n[N_SET].calls / checks},
        {"pexpiretime_per_check", u->n[N_PXT].calls / checks},
        {"time_per_check", u->n[N_TIME].calls / checks},
        {"nested_usec_per_check", nested},
        {"evalsha_usec_per_check",
         off->cs.calls * off->cs.usec_per_call / checks},
        {"evalsha_checks_per_call", checks / off->cs.calls},
        {"hot_usec_per_call", r->hot[0].usec_per_call},
        {"hot_pexpiretime_per_check", r->hot[1].calls / r->hot[0].calls},
        {"floor_batch", (double)r->batch},
        {"floor_usec_per_key", r->floor_us},
        {"over_floor", v / r->floor_us},
        {"incr_usec", r->incr.usec_per_call},
        {"pexpire_usec", r->pexp.usec_per_call},
        {"fallback", (double)u->fb}, {"denied", (double)u->den},
        /* peer.js's own figure, when given */
        {o->peer_usec > 0 ? "peer_rate_limiter_flexible" : NULL,
         o->peer_usec}}});
}

/* lone_usec_per_call_<algo>: the lone check, one per call (one thread), as
 * the function library's FCALL (the value) beside the same checks' EVALSHA
 * (redis_functions=0) and the floor script given one key per call, in the
 * same run: issue 11's "<= 6 us for a lone check"; its key template in
 * tmpl. */
static int usec_lone(const options *o, int a, unsigned long long nk,
                     unsigned long long m, char *tmpl, size_t tmpllen,
                     char *err)
{
    options off = *o;
    usec_lib on, ev;
    double floor_us, peer_us, checks = (double)m;
    char name[48];

    off.evalsha = 1;
    if (usec_library(o, a, nk, m, 1, &on, tmpl, tmpllen, err) ||
        usec_library(&off, a, nk, m, 1, &ev, tmpl, tmpllen, err) ||
        usec_script(&floor_script, nk, m, 1, 1, &floor_us, err) ||
        usec_script(&peer_script, nk, m, 1, 1, &peer_us, err))
        return -1;
    snprintf(name, sizeof name, "lone_usec_per_call_%s", algo_names[a]);
    emit(o, &(figure){.name = name, .value = on.cs.usec_per_call,
        .unit = "us", .nrefs = 2, .ref = {peer_us, ev.cs.usec_per_call},
        .ref_name = {"peer_script", "evalsha"}, .x = {
        {"floor_script_1_key", floor_us}, {"checks", checks},
        {"fcall_calls", on.cs.calls}, {"evalsha_calls", ev.cs.calls},
        {"fcall_checks_per_call", checks / on.cs.calls},
        {"evalsha_checks_per_call", checks / ev.cs.calls},
        {"threads", 1}, {"fallback", (double)(on.fb + ev.fb)}}});
    return 0;
}

int group_usec(const options *o, const char *sha, char *err)
{
    unsigned long long nk = o->keys < USEC_KEYS ? o->keys : USEC_KEYS;
    unsigned long long m = o->usec_checks;
    options off = *o;
    usec_refs r;

    off.evalsha = 1;
    if (usec_pair(nk, m, &r.incr, &r.pexp, err))
        return -1;
    for (int a = 0; a < ALGOS_ALL; a++) {
        char tmpl[128];
        usec_lib u, uoff;

        if (usec_library(&off, a, nk, m, USEC_THREADS, &uoff, tmpl,
                         sizeof tmpl, err) ||
            usec_library(o, a, nk, m, USEC_THREADS, &u, tmpl, sizeof tmpl,
                         err) ||
            usec_hot(o, sha, a, nk, m, tmpl, r.hot, err))
            return -1;
        r.batch = (unsigned long long)((double)m / u.cs.calls + 0.5);
        r.batch = r.batch < 1 ? 1 : r.batch > 64 ? 64 : r.batch;
        if (usec_script(&floor_script, nk, m, r.batch, 100, &r.floor_us,
                        err) ||
            usec_script(&peer_script, nk, m, 1, 100, &r.peer_us, err))
            return -1;
        usec_emit(o, a, nk, m, &u, &uoff, &r);
        if (usec_lone(o, a, nk, m / 5 < 1000 ? 1000 : m / 5, tmpl,
                      sizeof tmpl, err))
            return -1;
    }
    return 0;
}
