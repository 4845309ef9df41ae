/*
 * redis_node.c -- one Redis server: the breaker around its I/O.
 *
 * Each request asks the breaker first (an open one: no network call, the
 * failure modes decide at once), finds a connection up or fails at once,
 * goes through redis_io.c, and reports its outcome to the breaker, once
 * per call however many requests it carried (the breaker counts the
 * failures of one stall as one, breaker.h): an answer, even a redirect,
 * says the server is alive.  Blocking calls
 * sleep in rio_wait(); started ones hear from the I/O thread.
 *
 * The breaker's changes are told to the limiter's log hook, one line each
 * (which server, why, for how long): at most one opening per
 * RNODE_LOG_EVERY_MS per server, and the closing of each opening told;
 * the changes in between are counted and named in the next line, so a
 * flapping server cannot flood the log.
 */
#include "redis_node.h"
#include "redis_module_cmd.h"
#include "redis_settle.h"
#include "ratelimit.h"
#include "redis_script.h"
#include "log.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define CMD_STACK 32768
#define RNODE_LOG_EVERY_MS 1000  /* a server's breaker lines, at most   */

struct rnode {
    rio *io;
    breaker brk;
    script_ctx sx;               /* refunds are encoded here            */
    char addr[STORE_ADDR_MAX];   /* for the log: "host:port" or a path  */
    rl_log_fn *log_fn;
    void *log_arg;
    int64_t timeout_ms;
    _Atomic int64_t logged_ms;   /* the last breaker line (mono ms)     */
    _Atomic int64_t unlogged;    /* changes since, not told             */
    _Atomic int told_open;       /* the last opening was told           */
};

/* May this change be told?  An opening: at most one per
 * RNODE_LOG_EVERY_MS; a closing: when its opening was told.  The rest are
 * counted into the next line. */
static int may_tell(rnode *r, int change, int64_t now_ms)
{
    int64_t last = atomic_load(&r->logged_ms);

    if (change == BREAKER_CLOSED_AGAIN) {
        if (atomic_exchange(&r->told_open, 0))
            return 1;
    } else if ((!last || now_ms - last >= RNODE_LOG_EVERY_MS) &&
               atomic_compare_exchange_strong(&r->logged_ms, &last,
                                              now_ms ? now_ms : 1)) {
        atomic_store(&r->told_open, 1);
        return 1;
    }
    atomic_fetch_add(&r->unlogged, 1);
    return 0;
}

/* Tell the log of a breaker change (breaker_done's answer); down: the
 * failure that opened it found no connection up. */
static void tell(rnode *r, int change, int down, int64_t now_ms)
{
    char more[96] = "", why[64] = "no connection up";
    int64_t skipped;

    if (change == BREAKER_SAME || !r->log_fn || !may_tell(r, change, now_ms))
        return;
    if ((skipped = atomic_exchange(&r->unlogged, 0)) > 0)
        snprintf(more, sizeof more, " (%lld breaker changes not logged "
                 "before this one)", (long long)skipped);
    if (!down)
        snprintf(why, sizeof why, "calls failed or missed timeout_ms (%lld)",
                 (long long)r->timeout_ms);
    if (change == BREAKER_OPENED)
        log_emit(r->log_fn, r->log_arg, RL_LOG_WARN, "Redis %s: circuit "
                 "breaker opened: %s for %lld ms; checks follow the rules' "
                 "failure modes, the next probe in %lld ms%s", r->addr, why,
                 (long long)(now_ms - atomic_load(&r->brk.run_ms)),
                 (long long)atomic_load(&r->brk.wait_ms), more);
    else
        log_emit(r->log_fn, r->log_arg, RL_LOG_INFO, "Redis %s: circuit "
                 "breaker closed: the server answered again after %lld ms "
                 "open%s", r->addr,
                 (long long)(now_ms - atomic_load(&r->brk.outage_ms)), more);
}

static void done(rnode *r, int ok, int probe, int down, int64_t now_ms)
{
    tell(r, breaker_done(&r->brk, ok, probe, now_ms), down, now_ms);
}

/* May a request go?  0 yes (*probe: the breaker's probe); else the
 * status it fails with (RN_BREAKER, or RN_ERROR when no connection is up,
 * reported to the breaker already). */
static int admit(rnode *r, int *probe)
{
    int64_t now_ms = clock_mono_ms();
    int allowed = breaker_allow(&r->brk, now_ms);

    *probe = allowed == 2;
    if (!allowed)
        return RN_BREAKER; /* open: no network call; failure modes decide */
    if (!rio_is_up(r->io)) {
        if (allowed == 2)
            breaker_unprobe(&r->brk); /* nothing was tried */
        else
            done(r, 0, 0, 1, now_ms);
        return RN_ERROR;
    }
    return RN_OK;
}

static int alive(const rio_job *j)
{
    return j->rc == RL_OK || j->why.status >= RN_MOVED;
}

int rnode_check(rnode *r, const store_op *ops, size_t n, algo_decision *out,
                int64_t *now_ms, int64_t deadline_ns, int flags,
                rnode_reply *why)
{
    rio_job j = {.kind = RIO_CHECK, .ops = ops, .n = n, .out = out,
                 .flags = flags, .deadline_ns = deadline_ns};
    int probe, st = admit(r, &probe);

    if (st != RN_OK) {
        if (why)
            *why = (rnode_reply){.status = st};
        return RL_ESTORE;
    }
    rio_submit(r->io, &j, 1);
    rio_wait(&j);
    done(r, alive(&j), probe, 0, clock_mono_ms());
    if (why)
        *why = j.why;
    *now_ms = j.now_ms;
    return j.rc;
}

int rnode_check_many(rnode *r, store_req *reqs, size_t n, int64_t deadline_ns,
                     rnode_reply *why)
{
    rio_job jobs[STORE_MANY_MAX];
    int probe, st, ok = 0;

    if (n == 0 || n > STORE_MANY_MAX)
        return RL_EINVAL;
    for (size_t i = 0; i < n; i++) {
        reqs[i].rc = RL_ESTORE;
        reqs[i].now_ms = 0;
    }
    if ((st = admit(r, &probe)) != RN_OK) {
        for (size_t i = 0; why && i < n; i++)
            why[i] = (rnode_reply){.status = st};
        return RL_OK; /* each request failed */
    }
    for (size_t i = 0; i < n; i++)
        jobs[i] = (rio_job){.kind = RIO_CHECK, .ops = reqs[i].ops,
                            .n = reqs[i].n, .out = reqs[i].out,
                            .deadline_ns = deadline_ns};
    rio_submit(r->io, jobs, n);
    for (size_t i = 0; i < n; i++) {
        rio_wait(&jobs[i]);
        reqs[i].rc = jobs[i].rc;
        reqs[i].now_ms = jobs[i].now_ms;
        ok |= alive(&jobs[i]);
        if (why)
            why[i] = jobs[i].why;
    }
    done(r, ok, probe, 0, clock_mono_ms());
    return RL_OK;
}

static void started_done(rio_job *j)
{
    rnode_async *a = (rnode_async *)j;

    done(a->node, alive(j), a->probe, 0, clock_mono_ms());
    a->done(a);
}

void rnode_start(rnode *r, rnode_async *a)
{
    int st = admit(r, &a->probe);

    a->node = r;
    a->job.kind = RIO_CHECK;
    if (st != RN_OK) {
        a->job.rc = RL_ESTORE;
        a->job.why.status = st;
        a->done(a);
        return;
    }
    a->job.done = started_done;
    rio_submit(r->io, &a->job, 1);
}

int rnode_refund(rnode *r, const store_op *ops, size_t n,
                 const algo_decision *out, int64_t now_ms)
{
    char stack[CMD_STACK], mstack[CMD_STACK / 2];
    resp_buf b = RESP_BUF(stack, sizeof stack);
    resp_buf mb = RESP_BUF(mstack, sizeof mstack);
    rio_job j = {.ops = ops, .n = n, .out = (algo_decision *)out,
                 .now_ms = now_ms};
    rio_job *jp = &j;
    int sent;

    script_put(&r->sx, &b, &jp, 1, 'r', SCRIPT_EVALSHA);
    if (rio_module_seen(r->io)) /* RL.SETTLE r where it exists */
        rcmd_put_refund(&r->sx, &mb, &j);
    sent = !b.oom && !mb.oom &&
           rio_send_mod(r->io, b.p, b.len, mb.len ? mb.p : NULL, mb.len,
                        1) == RL_OK;
    resp_release(&b);
    resp_release(&mb);
    return sent;
}

int rnode_give_back(rnode *r, const store_op *op, int64_t units,
                    int64_t charged_ms, int64_t timeout_ms)
{
    char stack[CMD_STACK], mstack[1024];
    resp_buf b = RESP_BUF(stack, sizeof stack);
    resp_buf mb = RESP_BUF(mstack, sizeof mstack);
    store_op one = *op;
    algo_decision d = {.allowed = 1, .changed = 1};
    rio_job j = {.ops = &one, .n = 1, .out = &d, .now_ms = charged_ms};
    rio_job *jp = &j;
    redisReply *rep = NULL;
    int rc = RL_ESTORE, as_mod = 0;

    one.cost = units;
    one.lease_min = 0;
    script_put(&r->sx, &b, &jp, 1, 'r', /* waited: EVAL */
               timeout_ms > 0 ? SCRIPT_EVAL : SCRIPT_EVALSHA);
    if (rio_module_seen(r->io)) /* RL.SETTLE r where it exists */
        rcmd_put_refund(&r->sx, &mb, &j);
    if (b.oom || mb.oom)
        rc = RL_ESTORE;
    else if (timeout_ms <= 0)
        rc = rio_send_mod(r->io, b.p, b.len, mb.len ? mb.p : NULL, mb.len,
                          1);
    /* waited: refused as RL.SETTLE (unloaded since the connect), again
     * through Lua */
    for (int lua = 0; !b.oom && !mb.oom && timeout_ms > 0 && lua < 2; lua++) {
        rc = rio_call_mod(r->io, b.p, b.len,
                          lua || !mb.len ? NULL : mb.p, mb.len, 1, &rep,
                          timeout_ms, &as_mod);
        if (rc != RL_OK)
            break;
        rc = rep->type == REDIS_REPLY_INTEGER ? RL_OK : RL_ESTORE;
        lua = as_mod && rcmd_refused(rep) ? lua : 2;
        freeReplyObject(rep);
    }
    resp_release(&b);
    resp_release(&mb);
    return rc == RL_OK ? RL_OK : RL_ESTORE;
}

int rnode_settle(rnode *r, const store_settle *ss, size_t from, size_t n,
                 int asking, int64_t timeout_ms, size_t *settled,
                 rnode_reply *why)
{
    int nrep = asking ? 2 : 1, rc = 1;

    why->status = RN_ERROR;
    /* NOSCRIPT: EVAL; RL.SETTLE refused (unloaded since the connect):
     * Lua */
    for (int eval = 0, mod = rio_module_seen(r->io); eval < 2 && rc == 1;
         eval++) {
        char stack[CMD_STACK], mstack[CMD_STACK / 2];
        resp_buf b = RESP_BUF(stack, sizeof stack);
        resp_buf mb = RESP_BUF(mstack, sizeof mstack);
        redisReply *rep[2];
        int as_mod = 0;

        if (asking) {
            script_put_asking(&b);
            if (mod)
                script_put_asking(&mb);
        }
        settle_put(&r->sx, &b, ss, from, n, eval);
        if (mod) /* only where RL.SETTLE may be */
            settle_put_module(&r->sx, &mb, ss, from, n);
        rc = b.oom || mb.oom
                 ? RL_ESTORE
                 : rio_call_mod(r->io, b.p, b.len, mod ? mb.p : NULL,
                                mb.len, nrep, rep, timeout_ms, &as_mod);
        resp_release(&b);
        resp_release(&mb);
        if (rc != RL_OK)
            return RL_ESTORE;
        rc = settle_parse(rep[nrep - 1], settled, why);
        if (as_mod && rcmd_refused(rep[nrep - 1])) {
            rc = 1;
            mod = 0; /* the same call through Lua */
            eval--;
        }
        for (int k = 0; k < nrep; k++)
            freeReplyObject(rep[k]);
    }
    return rc == RL_OK ? RL_OK : RL_ESTORE;
}

/* ---- lifecycle ------------------------------------------------------------ */

void rnode_close(rnode *r)
{
    if (!r)
        return;
    rio_close(r->io);
    free(r);
}

int rnode_open(rnode **out, const rnode_opts *o, char *err, size_t errlen)
{
    rnode *r = calloc(1, sizeof *r);
    int rc;

    *out = NULL;
    if (!r)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    breaker_init(&r->brk, o->breaker_failures, o->breaker_cooldown_ms,
                 o->timeout_ms);
    r->log_fn = o->io.log_fn;
    r->log_arg = o->io.log_arg;
    r->timeout_ms = o->timeout_ms;
    if (o->io.uri.is_unix)
        snprintf(r->addr, sizeof r->addr, "unix:%s", o->io.uri.path);
    else
        snprintf(r->addr, sizeof r->addr, "%s:%d", o->io.uri.host,
                 o->io.uri.port);
    r->sx = (script_ctx){.script = o->io.script,
                         .script_len = o->io.script_len,
                         .compact = o->io.compact, .clock = o->io.clock};
    script_ctx_names(&r->sx, NULL, 0); /* raw calls: EVALSHA, EVAL */
    if ((rc = rio_open(&r->io, &o->io, err, errlen)) != RL_OK) {
        free(r);
        return rc;
    }
    *out = r;
    return RL_OK;
}

int rnode_is_up(rnode *r)
{
    return rio_is_up(r->io);
}

rio *rnode_io(rnode *r)
{
    return r->io;
}

breaker *rnode_breaker(rnode *r)
{
    return &r->brk;
}

void rnode_stats_add(rnode *r, rnode_stats *st)
{
    rio_stats s = {0};

    rio_stats_add(r->io, &s);
    st->calls += s.calls;
    st->writes += s.writes;
    st->timeouts += s.timeouts;
    st->reconnects += s.reconnects;
    st->down_fails += s.down_fails;
    st->stuck += s.stuck;
    st->batches += s.batches;
    st->checks += s.checks;
    st->noscript += s.noscript;
    st->moved += s.moved;
    st->asks += s.asks;
    st->elsewhere += s.elsewhere;
    st->tls_handshakes += s.tls_handshakes;
    st->tls_resumed += s.tls_resumed;
}
