/*
 * redisbench_usec.c -- group 3 of redisbench: usec_per_call, what one check
 * costs the server (INFO commandstats of EVALSHA after CONFIG RESETSTAT) over a
 * fixed number of checks of existing keys by 64 threads, per algorithm, beside
 * hot_usec_per_call (the same script from redis-benchmark -c 64 -P 16, a busy
 * Redis runs a script faster) and beside a pipelined INCR + PEXPIRE pair or
 * the peer's figure (--peer-usec): the server-side cost in units of the
 * simplest counter.
 */
#include "redisbench.h"
/* ---- usec_per_call (group 3) ------------------------------------------------- */

int group_usec(const options *o, const char *sha, char *err)
{
    unsigned long long nk = o->keys < USEC_KEYS ? o->keys : USEC_KEYS;
    unsigned long long m = o->usec_checks;
    double pair = 0;
    cmdstat incr, pexp;
    uint64_t rng = 0xC0FFEEULL;

    /* The reference: INCR + PEXPIRE on existing keys, pipelined. */
    if (flush_wait(err))
        return -1;
    for (int pass = 0; pass < 2; pass++) {
        unsigned long long n = pass == 0 ? nk : m;
        if (pass == 1 && ctl_ok(err, "CONFIG RESETSTAT"))
            return -1;
        for (unsigned long long i = 0; i < n;) {
            unsigned long long batch = n - i < 500 ? n - i : 500;
            for (unsigned long long b = 0; b < batch; b++) {
                unsigned long long k = pass == 0 ? i + b : pick(&rng, nk);
                redisAppendCommand(ctl, "INCR ref:%llu", k);
                redisAppendCommand(ctl, "PEXPIRE ref:%llu 60000", k);
            }
            for (unsigned long long b = 0; b < 2 * batch; b++) {
                void *rep = NULL;
                if (redisGetReply(ctl, &rep) != REDIS_OK) {
                    snprintf(err, ERRLEN, "INCR/PEXPIRE: %s", ctl->errstr);
                    return -1;
                }
                if (((redisReply *)rep)->type != REDIS_REPLY_INTEGER) {
                    snprintf(err, ERRLEN, "INCR/PEXPIRE: unexpected reply");
                    freeReplyObject(rep);
                    return -1;
                }
                freeReplyObject(rep);
            }
            i += batch;
        }
    }
    if (cmdstat_get("incr", &incr, err) || cmdstat_get("pexpire", &pexp, err))
        return -1;
    pair = incr.usec_per_call + pexp.usec_per_call;

    for (int a = 0; a < 4; a++) {
        char rule[400], rules[512];
        rl_limiter *lim = NULL;
        job j;
        unsigned long long fb = 0, den = 0;
        cmdstat cs, get, set, pxt, tim, hot, hotpxt;
        char tmpl[128];
        rb_result rb;
        figure f = {0};

        one_rule(rule, sizeof rule, "u", a, SLOW_LIMIT, SLOW_WINDOW_S, 0);
        snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
        if (flush_wait(err) || make_limiter(o, rules, &lim, err) != RL_OK)
            return -1;
        memset(&j, 0, sizeof j);
        j.lim = lim;
        j.rule_id = "u";
        j.total = nk; /* every key once: the measured checks find state */
        if (run_job(&j, FILL_THREADS, &fb, &den, err) ||
            ctl_ok(err, "CONFIG RESETSTAT")) {
            rl_limiter_free(lim);
            return -1;
        }
        j.total = m;
        j.nkeys = nk;
        if (run_job(&j, USEC_THREADS, &fb, &den, err)) {
            rl_limiter_free(lim);
            return -1;
        }
        rl_limiter_free(lim);
        if (key_template(tmpl, sizeof tmpl, err))
            return -1;
        if (cmdstat_get("evalsha", &cs, err) || cmdstat_get("get", &get, err) ||
            cmdstat_get("set", &set, err) ||
            cmdstat_get("pexpiretime", &pxt, err) ||
            cmdstat_get("time", &tim, err))
            return -1;
        /* The library batches requests that queue up into one script
         * call, so there are fewer calls than checks: the figure is Redis
         * CPU per CHECK, total script time over checks made. */
        if (cs.calls < 1 || cs.failed > 0) {
            snprintf(err, ERRLEN, "usec_per_call %s: %.0f EVALSHA calls "
                     "(%.0f failed) for %llu checks", algo_names[a], cs.calls,
                     cs.failed, m);
            return -1;
        }
        double checks = (double)m;
        {
            /* The same script and arguments from redis-benchmark -c 64
             * -P 16, which keeps Redis busy: the script's cost "hot".  A
             * warm-up pass first, so it too updates existing keys. */
            long long bucket = a == 1 || a == 3;
            long long wms = SLOW_WINDOW_S * 1000LL,
                      g = gcd64(wms, SLOW_LIMIT);
            long long v8[8] = {a,         SLOW_LIMIT, bucket ? SLOW_LIMIT : 0,
                               wms,       wms / g,    SLOW_LIMIT / g,
                               1,         0};
            if (flush_wait(err) ||
                run_redis_benchmark(o, sha, 64, 16, 4 * nk, nk, tmpl, v8,
                                    &rb, err) ||
                ctl_ok(err, "CONFIG RESETSTAT") ||
                run_redis_benchmark(o, sha, 64, 16, m, nk, tmpl, v8, &rb,
                                    err) ||
                cmdstat_get("evalsha", &hot, err) ||
                cmdstat_get("pexpiretime", &hotpxt, err))
                return -1;
            if (hot.calls < (double)m || hot.failed > 0) {
                snprintf(err, ERRLEN, "usec_per_call %s: redis-benchmark "
                         "made %.0f EVALSHA calls (%.0f failed), expected "
                         "%llu", algo_names[a], hot.calls, hot.failed, m);
                return -1;
            }
        }
        {
            char name[48];
            snprintf(name, sizeof name, "usec_per_call_%s", algo_names[a]);
            f.name = name;
            f.value = cs.calls * cs.usec_per_call / checks;
            f.unit = "us";
            if (o->peer_usec > 0) {
                f.nrefs = 2;
                f.ref[0] = o->peer_usec;
                f.ref_name[0] = "peer_rate_limiter_flexible";
                f.ref[1] = pair;
                f.ref_name[1] = "incr_plus_pexpire";
            } else {
                f.nrefs = 1;
                f.ref[0] = pair;
                f.ref_name[0] = "incr_plus_pexpire";
            }
            xnum(&f, "checks", checks);
            xnum(&f, "script_calls", cs.calls);
            xnum(&f, "checks_per_call", checks / cs.calls);
            xnum(&f, "usec_per_script_call", cs.usec_per_call);
            xnum(&f, "keys", (double)nk);
            xnum(&f, "threads", USEC_THREADS);
            /* Commands the script ran, per check, and their own cost: the
             * rest of usec_per_call is the Lua interpreter. */
            xnum(&f, "get_per_check", get.calls / checks);
            xnum(&f, "set_per_check", set.calls / checks);
            xnum(&f, "pexpiretime_per_check", pxt.calls / checks);
            xnum(&f, "time_per_check", tim.calls / checks);
            xnum(&f, "nested_usec_per_check",
                 (get.calls * get.usec_per_call + set.calls * set.usec_per_call +
                  pxt.calls * pxt.usec_per_call + tim.calls * tim.usec_per_call) /
                     checks);
            xnum(&f, "hot_usec_per_call", hot.usec_per_call);
            xnum(&f, "hot_pexpiretime_per_check", hotpxt.calls / hot.calls);
            xnum(&f, "incr_usec", incr.usec_per_call);
            xnum(&f, "pexpire_usec", pexp.usec_per_call);
            xnum(&f, "fallback", (double)fb);
            xnum(&f, "denied", (double)den);
            emit(o, &f);
        }
    }
    return 0;
}
