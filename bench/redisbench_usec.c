/*
 * redisbench_usec.c -- group 3 of redisbench: usec_per_call, what one check
 * costs the server, per algorithm, batched (64 threads) and lone (one),
 * beside the floor script, the peer's script and INCR + PEXPIRE.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include "redisbench.h"
/* ---- usec_per_call (group 3) ------------------------------------------------- */

/* The server's counters after the library's checks of one algorithm. */
typedef struct usec_lib {
    cmdstat cs, get, mget, set, pxt, tim;
    unsigned long long fb, den;
} usec_lib;

/* One batch of the reference: INCR + PEXPIRE of keys i.. (pass 0, every
 * key once) or of random keys < nk (pass 1), pipelined. */
static int pair_batch(int pass, unsigned long long i,
                      unsigned long long batch, unsigned long long nk,
                      uint64_t *rng, char *err)
{
    for (unsigned long long b = 0; b < batch; b++) {
        unsigned long long k = pass == 0 ? i + b : pick(rng, nk);
        redisAppendCommand(ctl, "INCR ref:%llu", k);
        redisAppendCommand(ctl, "PEXPIRE ref:%llu 60000", k);
    }
    return read_replies(2 * batch, REDIS_REPLY_INTEGER, "INCR/PEXPIRE", err);
}

/* The reference: INCR + PEXPIRE on existing keys, pipelined: nk keys made,
 * then m pairs counted. */
static int usec_pair(unsigned long long nk, unsigned long long m,
                     cmdstat *incr, cmdstat *pexp, char *err)
{
    uint64_t rng = 0xC0FFEEULL;

    if (flushall_wait(ctl, err))
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        unsigned long long n = pass == 0 ? nk : m;
        if (pass == 1 && ctl_ok(err, "CONFIG RESETSTAT"))
            return -1;
        for (unsigned long long i = 0; i < n;) {
            unsigned long long batch = n - i < 500 ? n - i : 500;
            if (pair_batch(pass, i, batch, nk, &rng, err))
                return -1;
            i += batch;
        }
    }
    if (cmdstat_get("incr", incr, err) || cmdstat_get("pexpire", pexp, err))
        return -1;
    return 0;
}

/* ---- the floor script: the least a script must do per key ------------------- */
/* ---- and the peer's: rate-limiter-flexible 11.4.0's RateLimiterRedis ---------- */

/* A script the floor's steps run: its text, its keys' prefix, the
 * arguments after the keys. */
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
static const char *const peer_args[] = {"1", "3600", "1000000000", "3600"};

static const char floor_lua[] =
    "local t = redis.call('TIME')\n"
    "local exp = string.format('%d', t[1] * 1000 + 60000)\n"
    "local v = redis.call('MGET', unpack(KEYS))\n"
    "for i = 1, #KEYS do\n"
    "  redis.call('SET', KEYS[i], string.format('%d', (tonumber(v[i]) or 0) + 1),\n"
    "             'PXAT', exp)\n"
    "end\n"
    "return #KEYS\n";

static const ref_script floor_script = {floor_lua, "fl:", "floor script",
                                        NULL, 0};
static const ref_script peer_script = {peer_lua, "rlflx:user:",
                                       "peer script", peer_args, 4};

/* One pipelined run of `calls` calls of script sc, `batch` random
 * keys of nk each (pass 0: keys *next, *next + 1, ... in order, so that
 * every key exists once the fill is done). */
static int floor_calls(const ref_script *sc, const char *sha, int pass,
                       unsigned long long calls, unsigned long long batch,
                       unsigned long long nk, uint64_t *rng,
                       unsigned long long *next, char *err)
{
    char nb[24], keys[64][32];
    const char *argv[3 + 64 + 4];

    snprintf(nb, sizeof nb, "%llu", batch);
    argv[0] = "EVALSHA", argv[1] = sha, argv[2] = nb;
    for (unsigned long long c = 0; c < calls; c++) {
        for (unsigned long long b = 0; b < batch; b++) {
            unsigned long long k = pass == 0 ? (*next)++ % nk : pick(rng, nk);
            snprintf(keys[b], sizeof keys[b], "%s%llu", sc->prefix, k);
            argv[3 + b] = keys[b];
        }
        for (int i = 0; i < sc->nargs; i++)
            argv[3 + batch + (unsigned long long)i] = sc->args[i];
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

    if (flushall_wait(ctl, err))
        return -1;
    r = redisCommand(ctl, "SCRIPT LOAD %s", sc->lua);
    if (!r || r->type != REDIS_REPLY_STRING || r->len >= sizeof sha) {
        snprintf(err, ERRLEN, "SCRIPT LOAD of the %s failed", sc->what);
        if (r)
            freeReplyObject(r);
        return -1;
    }
    memcpy(sha, r->str, r->len + 1);
    freeReplyObject(r);
    while (next < nk)
        if (floor_calls(sc, sha, 0, 100, batch, nk, &rng, &next, err))
            return -1;
    if (ctl_ok(err, "CONFIG RESETSTAT"))
        return -1;
    for (unsigned long long done = 0; done < m; done += depth * batch)
        if (floor_calls(sc, sha, 1, depth, batch, nk, &rng, &next, err))
            return -1;
    if (cmdstat_get("evalsha", &cs, err))
        return -1;
    *per_key = cs.usec_per_call / (double)batch;
    return 0;
}

/* The library: every one of nk keys checked once (so the measured checks
 * find state), then m checks of them counted, by `threads` threads (1: a
 * lone check per call); the key template of what it wrote in tmpl.  The
 * script's calls are FCALLs, or EVALSHAs with o->evalsha. */
static int usec_library(const options *o, int a, unsigned long long nk,
                        unsigned long long m, int threads, usec_lib *u,
                        char *tmpl, size_t tmpllen, char *err)
{
    rl_limiter *lim = NULL;
    job j;
    job_result jr = {0};

    memset(u, 0, sizeof *u);
    if (flushall_wait(ctl, err) ||
        limiter_one_rule(o, "u", a, SLOW_LIMIT, SLOW_WINDOW_S, &lim, err) !=
            RL_OK)
        return -1;
    /* every key once: the measured checks find state */
    j = (job){.lim = lim, .rule_id = "u", .total = nk};
    if (run_job(&j, FILL_THREADS, &jr, "redisbench", err) ||
        ctl_ok(err, "CONFIG RESETSTAT")) {
        rl_limiter_free(lim);
        return -1;
    }
    j.total = m;
    j.nkeys = nk;
    j.random = 1;
    if (run_job(&j, threads, &jr, "redisbench", err)) {
        rl_limiter_free(lim);
        return -1;
    }
    rl_limiter_free(lim);
    u->fb = jr.fallback;
    u->den = jr.denied;
    if (key_template(tmpl, tmpllen, err))
        return -1;
    if (cmdstat_script(&u->cs, err) ||
        cmdstat_get("get", &u->get, err) ||
        cmdstat_get("mget", &u->mget, err) ||
        cmdstat_get("set", &u->set, err) ||
        cmdstat_get("pexpiretime", &u->pxt, err) ||
        cmdstat_get("time", &u->tim, err))
        return -1;
    /* The library batches requests that queue up into one script call, so
     * there are fewer calls than checks: the figure is Redis CPU per
     * CHECK, total script time over checks made. */
    if (u->cs.calls < 1 || u->cs.failed > 0) {
        snprintf(err, ERRLEN, "usec_per_call %s: %.0f script calls "
                 "(%.0f failed) for %llu checks", algo_names[a], u->cs.calls,
                 u->cs.failed, m);
        return -1;
    }
    return 0;
}

/* The same script and arguments from redis-benchmark -c 64 -P 16, which
 * keeps Redis busy: the script's cost "hot".  A warm-up pass first, so it
 * too updates existing keys. */
static int usec_hot(const options *o, const char *sha, int a,
                    unsigned long long nk, unsigned long long m,
                    const char *tmpl, cmdstat *hot, cmdstat *hotpxt,
                    char *err)
{
    rb_result rb;

    if (flushall_wait(ctl, err) ||
        run_redis_benchmark(o, sha, 64, 16, 4 * nk, nk, tmpl, a, SLOW_LIMIT,
                            SLOW_WINDOW_S, &rb, err) ||
        ctl_ok(err, "CONFIG RESETSTAT") ||
        run_redis_benchmark(o, sha, 64, 16, m, nk, tmpl, a, SLOW_LIMIT,
                            SLOW_WINDOW_S, &rb, err) ||
        cmdstat_get("evalsha", hot, err) ||
        cmdstat_get("pexpiretime", hotpxt, err))
        return -1;
    if (hot->calls < (double)m || hot->failed > 0) {
        snprintf(err, ERRLEN, "usec_per_call %s: redis-benchmark "
                 "made %.0f EVALSHA calls (%.0f failed), expected "
                 "%llu", algo_names[a], hot->calls, hot->failed, m);
        return -1;
    }
    return 0;
}

static void usec_emit(const options *o, int a, unsigned long long nk,
                      unsigned long long m, const usec_lib *u,
                      const usec_lib *off, const cmdstat *hot, const cmdstat *hotpxt,
                      const cmdstat *incr, const cmdstat *pexp,
                      unsigned long long batch, double floor_us,
                      double peer_us)
{
    double checks = (double)m, pair = incr->usec_per_call +
                                      pexp->usec_per_call;
    const cmdstat *get = &u->get, *mget = &u->mget, *set = &u->set,
                  *pxt = &u->pxt, *tim = &u->tim;
    char name[48];
    figure f = {0};

    snprintf(name, sizeof name, "usec_per_call_%s", algo_names[a]);
    f = (figure){.name = name,
                  .value = u->cs.calls * u->cs.usec_per_call / checks,
                  .unit = "us", .nrefs = 2, .ref = {peer_us, pair},
                  .ref_name = {"peer_script", "incr_plus_pexpire"}};
    if (o->peer_usec > 0) /* peer.js's own figure, given */
        xnum(&f, "peer_rate_limiter_flexible", o->peer_usec);
    xnum(&f, "checks", checks);
    xnum(&f, "script_calls", u->cs.calls);
    xnum(&f, "checks_per_call", checks / u->cs.calls);
    xnum(&f, "usec_per_script_call", u->cs.usec_per_call);
    xnum(&f, "keys", (double)nk);
    xnum(&f, "threads", USEC_THREADS);
    /* Commands the script ran, per check, and their own cost: the rest of
     * usec_per_call is the Lua interpreter. */
    xnum(&f, "get_per_check", get->calls / checks);
    /* the plain layout reads a batch's keys with one MGET per call */
    xnum(&f, "mget_per_check", mget->calls / checks);
    xnum(&f, "set_per_check", set->calls / checks);
    xnum(&f, "pexpiretime_per_check", pxt->calls / checks);
    xnum(&f, "time_per_check", tim->calls / checks);
    xnum(&f, "nested_usec_per_check",
         (get->calls * get->usec_per_call +
          mget->calls * mget->usec_per_call +
          set->calls * set->usec_per_call +
          pxt->calls * pxt->usec_per_call + tim->calls * tim->usec_per_call) /
             checks);
    /* the same checks with redis_functions=0: EVALSHA */
    xnum(&f, "evalsha_usec_per_check",
         off->cs.calls * off->cs.usec_per_call / checks);
    xnum(&f, "evalsha_checks_per_call", checks / off->cs.calls);
    xnum(&f, "hot_usec_per_call", hot->usec_per_call);
    xnum(&f, "hot_pexpiretime_per_check", hotpxt->calls / hot->calls);
    xnum(&f, "floor_batch", (double)batch);
    xnum(&f, "floor_usec_per_key", floor_us);
    xnum(&f, "over_floor", f.value / floor_us);
    xnum(&f, "incr_usec", incr->usec_per_call);
    xnum(&f, "pexpire_usec", pexp->usec_per_call);
    xnum(&f, "fallback", (double)u->fb);
    xnum(&f, "denied", (double)u->den);
    emit(o, &f);
}

/* The lone check, one per call (one thread), as the function library's
 * FCALL (the value) beside the same checks' EVALSHA (redis_functions=0)
 * and beside the floor script given one key per call, in the same run:
 * issue 11's "<= 6 us for a lone check". */
static void lone_emit(const options *o, int a, unsigned long long m,
                      const usec_lib *on, const usec_lib *off,
                      double floor_us, double peer_us)
{
    char name[48];
    figure f = {0};

    snprintf(name, sizeof name, "lone_usec_per_call_%s", algo_names[a]);
    f = (figure){.name = name, .value = on->cs.usec_per_call, .unit = "us",
                  .nrefs = 2, .ref = {peer_us, off->cs.usec_per_call},
                  .ref_name = {"peer_script", "evalsha"}};
    xnum(&f, "floor_script_1_key", floor_us);
    xnum(&f, "checks", (double)m);
    xnum(&f, "fcall_calls", on->cs.calls);
    xnum(&f, "evalsha_calls", off->cs.calls);
    xnum(&f, "fcall_checks_per_call", (double)m / on->cs.calls);
    xnum(&f, "evalsha_checks_per_call", (double)m / off->cs.calls);
    xnum(&f, "threads", 1);
    xnum(&f, "fallback", (double)(on->fb + off->fb));
    emit(o, &f);
}

/* The lone check's three runs (lone_emit); its key template in tmpl. */
static int usec_lone(const options *o, int a, unsigned long long nk,
                     unsigned long long m, char *tmpl, size_t tmpllen,
                     char *err)
{
    options off = *o;
    usec_lib on, ev;
    double floor_us, peer_us;

    off.evalsha = 1;
    if (usec_library(o, a, nk, m, 1, &on, tmpl, tmpllen, err) ||
        usec_library(&off, a, nk, m, 1, &ev, tmpl, tmpllen, err) ||
        usec_script(&floor_script, nk, m, 1, 1, &floor_us, err) ||
        usec_script(&peer_script, nk, m, 1, 1, &peer_us, err))
        return -1;
    lone_emit(o, a, m, &on, &ev, floor_us, peer_us);
    return 0;
}

int group_usec(const options *o, const char *sha, char *err)
{
    unsigned long long nk = o->keys < USEC_KEYS ? o->keys : USEC_KEYS;
    unsigned long long m = o->usec_checks;
    unsigned long long lone = m / 5 < 1000 ? 1000 : m / 5;
    options off = *o;
    cmdstat incr, pexp;

    off.evalsha = 1;

    if (usec_pair(nk, m, &incr, &pexp, err))
        return -1;
    for (int a = 0; a < ALGOS_ALL; a++) {
        cmdstat hot, hotpxt;
        char tmpl[128];
        unsigned long long batch;
        double floor_us, peer_us;
        usec_lib u, uoff;

        if (usec_library(&off, a, nk, m, USEC_THREADS, &uoff, tmpl,
                         sizeof tmpl, err) ||
            usec_library(o, a, nk, m, USEC_THREADS, &u, tmpl, sizeof tmpl,
                         err) ||
            usec_hot(o, sha, a, nk, m, tmpl, &hot, &hotpxt, err))
            return -1;
        batch = (unsigned long long)((double)m / u.cs.calls + 0.5);
        batch = batch < 1 ? 1 : batch > 64 ? 64 : batch;
        if (usec_script(&floor_script, nk, m, batch, 100, &floor_us, err) ||
            usec_script(&peer_script, nk, m, 1, 100, &peer_us, err))
            return -1;
        usec_emit(o, a, nk, m, &u, &uoff, &hot, &hotpxt, &incr, &pexp, batch,
                  floor_us, peer_us);
        if (usec_lone(o, a, nk, lone, tmpl, sizeof tmpl, err))
            return -1;
    }
    return 0;
}
