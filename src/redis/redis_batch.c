/*
 * redis_batch.c -- a connection's batch, the half of the I/O loop
 * (redis_io.c) that turns queued checks into script calls and the calls'
 * replies into answers.  The loop gives an idle connection the oldest
 * queued checks, up to BATCH_MAX (rbatch_next); they are encoded as ONE
 * script call (redis_script.c), or in a cluster's per-call mode as one
 * shared "C" call plus a call of its own for each request that must name
 * its keys or follow an ASK (on a server with ratelimit.so: one RL.CHECK
 * for the batch, a cluster node's one RL.CHECK a request); when every
 * reply is in, each job is claimed and answered (rbatch_answer), and
 * those that met NOSCRIPT (a flushed or restarted server) or an FCALL's
 * missing (FUNCTION FLUSH) or refused (NOPERM) function go again at once,
 * once, as EVAL; the connection then calls EVALSHA until it connects
 * again (and FUNCTION LOADs again).  Runs in the loop thread only; see
 * redis_io.c for the claims that make a job safe to read and write here.
 */
#include "redis_batch.h"
#include "redis_module_cmd.h"

/* A cluster node's batch through ratelimit.so: an RL.CHECK of its own
 * per request (its keys declared, so the node routes it and answers
 * MOVED, ASK, TRYAGAIN or CLUSTERDOWN as it does a script's own call),
 * after ASKING where an ASK redirected it; the number of replies (at most
 * RIO_MAX_REPLIES: rbatch_next). */
static int put_module_calls(rio *r, conn *c)
{
    batch *b = &c->b;
    int nrep = 0;

    for (int j = 0; j < b->nb; j++) {
        if (b->flags[j] & RN_ASKING) {
            script_put_asking(&c->out);
            nrep++;
        }
        rcmd_put(&r->sx, &c->out, &b->job[j], 1);
        nrep++;
    }
    return nrep;
}

/* Encode c's batch as its calls into c->out; the number of replies, or 0
 * when out of memory (nothing kept). */
static int encode_batch(rio *r, conn *c)
{
    batch *b = &c->b;
    size_t was = c->out.len;
    rio_job *shared[BATCH_MAX];
    int ns = 0, nrep = 0;

    if ((c->fcall & RCONN_MODULE) && b->how != SCRIPT_EVAL &&
        !b->probe && rcmd_batch_ok(b->job, b->nb)) {
        b->how = SCRIPT_MODULE;
        if (r->o.per_call)
            nrep = put_module_calls(r, c);
        else { /* one RL.CHECK for the batch */
            rcmd_put(&r->sx, &c->out, b->job, b->nb);
            nrep = 1;
        }
    } else if (!r->o.per_call) {
        script_put(&r->sx, &c->out, b->job, b->nb, 'c', b->how);
        nrep = 1;
    } else {
        for (int j = 0; j < b->nb; j++)
            if (!(b->flags[j] & RN_OWN_CALL))
                shared[ns++] = b->job[j];
        if (ns) {
            script_put(&r->sx, &c->out, shared, ns, 'C', b->how);
            nrep++;
        }
        for (int j = 0; j < b->nb; j++) {
            if (!(b->flags[j] & RN_OWN_CALL))
                continue;
            if (b->flags[j] & RN_ASKING) {
                script_put_asking(&c->out);
                nrep++;
            }
            script_put(&r->sx, &c->out, &b->job[j], 1, 'c', b->how);
            nrep++;
        }
    }
    if (c->out.oom) {
        c->out.oom = 0;
        c->out.len = was;
        return 0;
    }
    return nrep;
}

/* Send c's batch (b->tk[0..nb) claimed, b->job[] their jobs), then let
 * go of the jobs; they fail if it cannot be encoded. */
static void send_batch(rio *r, int i)
{
    conn *c = &r->c[i];
    int nrep = encode_batch(r, c);

    for (int j = 0; j < c->b.nb; j++) {
        if (nrep)
            tk_release(c->b.tk[j]);
        else
            rio_loop_finish(r, c->b.tk[j]);
        c->b.job[j] = NULL;
    }
    if (!nrep) {
        c->b.active = 0;
        return;
    }
    c->b.active = 1;
    push_entry(c, E_BATCH, nrep, NULL);
    stat_add(r, S_CALLS, nrep);
    stat_add(r, S_BATCHES, 1);
    stat_add(r, S_CHECKS, c->b.nb);
}

/* The next batch from the queue of checks onto idle connection i: the
 * oldest first; in per-call mode a request that would be one own call
 * too many stays queued, in its place, for the next batch, as does one
 * not to be sent before a later time; a cluster node's RL.CHECKs (a
 * reply each, and ASKING's) stop at RIO_MAX_REPLIES replies. */
void rbatch_next(rio *r, int i, int64_t now)
{
    batch *b = &r->c[i].b;
    rio_ticket *skipped = NULL, *last_skipped = NULL;
    int own = 0, replies = 0;
    int capped = r->o.per_call && (r->c[i].fcall & RCONN_MODULE);

    b->nb = b->probe = 0;
    b->how = r->c[i].fcall & RCONN_LIBRARY ? SCRIPT_FCALL : SCRIPT_EVALSHA;
    while (r->phead && b->nb < BATCH_MAX &&
           (!capped || replies <= RIO_MAX_REPLIES - 2)) {
        rio_ticket *t = r->phead;
        int flags = r->o.per_call ? t->flags : 0;
        r->phead = t->next;
        t->next = NULL;
        if (((flags & RN_OWN_CALL) && own == OWN_MAX) ||
            t->not_before_ns > now) {
            if (last_skipped)
                last_skipped->next = t;
            else
                skipped = t;
            last_skipped = t;
            continue;
        }
        if (!rio_loop_take(r, t)) /* its caller left */
            continue;
        own += (flags & RN_OWN_CALL) != 0;
        b->probe |= (flags & RN_PROBE) != 0; /* the batch through Lua */
        replies += 1 + ((flags & RN_ASKING) != 0);
        b->tk[b->nb] = t;
        b->job[b->nb] = t->job;
        b->n[b->nb] = t->n;
        b->flags[b->nb++] = flags;
    }
    if (!r->phead)
        r->ptail = last_skipped;
    if (skipped) {
        last_skipped->next = r->phead;
        r->phead = skipped;
    }
    if (b->nb)
        send_batch(r, i);
}

/* Per-call answers from reply k on: each request's call of its own
 * (after ASKING's +OK): every request's RL.CHECK (module), else those
 * flagged for one.  Slots whose call met NOSCRIPT, or an RL.CHECK
 * refused, are marked in redo[]; how many. */
static int answer_own(rio *r, conn *c, entry *e, int k, int *redo,
                      int module)
{
    batch *b = &c->b;
    int na = 0, st;

    for (int j = 0; j < b->nb; j++) {
        rio_job *jb = b->job[j];
        if (!(b->flags[j] & RN_OWN_CALL) && !module)
            continue;
        k += (b->flags[j] & RN_ASKING) != 0; /* +OK */
        if ((module ? rcmd_parse(e->rep[k++], &b->job[j], &b->n[j], 1)
                    : script_parse(e->rep[k++], &b->job[j], &b->n[j],
                                   1)) == 1) {
            if (jb)
                na += redo[j] = 1;
            continue;
        }
        st = jb ? jb->why.status : RN_OK;
        if (st == RN_MOVED || st == RN_ASK)
            stat_add(r, st == RN_MOVED ? S_MOVED : S_ASKS, 1);
    }
    return na;
}

/* Per-call answer: the shared "C" call's, then each own call's (after
 * ASKING's +OK).  Slots whose call met NOSCRIPT are marked in redo[]. */
static int answer_calls(rio *r, conn *c, entry *e, int *redo)
{
    batch *b = &c->b;
    rio_job *shared[BATCH_MAX];
    size_t sn[BATCH_MAX];
    int at[BATCH_MAX], ns = 0, k = 0, na = 0;

    for (int j = 0; j < b->nb; j++)
        if (!(b->flags[j] & RN_OWN_CALL)) {
            at[ns] = j;
            shared[ns] = b->job[j];
            sn[ns++] = b->n[j];
        }
    if (ns && script_parse(e->rep[k++], shared, sn, ns) == 1)
        for (int j = 0; j < ns; j++)
            if (shared[j])
                na += redo[at[j]] = 1;
    for (int j = 0; j < ns; j++)
        if (shared[j] && (shared[j]->why.status == RN_ELSEWHERE ||
                          shared[j]->why.status == RN_REPLICA))
            stat_add(r, S_ELSEWHERE, 1);
    return na + answer_own(r, c, e, k, redo, 0);
}

/* Claim the batch's jobs for reading its answer; those whose callers
 * left are dropped from it. */
static void claim_batch(rio *r, batch *b)
{
    for (int j = 0; j < b->nb; j++) {
        rio_ticket *t = b->tk[j];
        if (t && !rio_loop_take(r, t))
            t = b->tk[j] = NULL;
        b->job[j] = t ? t->job : NULL;
    }
}

/* A batch's replies are all in: answer its requests; those that met
 * NOSCRIPT (or no function) go again at once as EVAL (once). */
void rbatch_answer(rio *r, int i, entry *e)
{
    conn *c = &r->c[i];
    batch *b = &c->b;
    int redo[BATCH_MAX] = {0}, na = 0, nb = 0;

    claim_batch(r, b);
    if (b->how == SCRIPT_MODULE && r->o.per_call) {
        na = answer_own(r, c, e, 0, redo, 1);
    } else if (b->how == SCRIPT_MODULE) {
        if (rcmd_parse(e->rep[0], b->job, b->n, b->nb) == 1)
            for (int j = 0; j < b->nb; j++)
                if (b->job[j])
                    na += redo[j] = 1;
    } else if (!r->o.per_call) {
        if (script_parse(e->rep[0], b->job, b->n, b->nb) == 1)
            for (int j = 0; j < b->nb; j++)
                if (b->job[j])
                    na += redo[j] = 1;
    } else {
        na = answer_calls(r, c, e, redo);
    }
    if (na && b->how != SCRIPT_EVAL) {
        stat_add(r, S_NOSCRIPT, 1);
        if (b->how == SCRIPT_FCALL) /* the library is gone: EVALSHA from */
            c->fcall &= ~RCONN_LIBRARY; /* now on, FCALL after a reconnect */
        if (b->how == SCRIPT_MODULE) /* RL.CHECK gone or refused: Lua */
            c->fcall &= ~RCONN_MODULE;
        for (int j = 0; j < b->nb; j++) { /* the others are answered */
            if (!b->tk[j])
                continue;
            if (!redo[j]) {
                rio_loop_finish(r, b->tk[j]);
                continue;
            }
            b->tk[nb] = b->tk[j];
            b->job[nb] = b->job[j];
            b->n[nb] = b->n[j];
            b->flags[nb++] = b->flags[j];
        }
        b->nb = nb;
        b->how = SCRIPT_EVAL;
        send_batch(r, i);
        return;
    }
    b->active = 0;
    for (int j = 0; j < b->nb; j++)
        if (b->tk[j])
            rio_loop_finish(r, b->tk[j]);
}

