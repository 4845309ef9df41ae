/*
 * clusterbench_reshard.c -- the group reshard of `redisbench cluster`:
 * resharding under load (reshard_redirect_share, the checks/s meanwhile;
 * fallback and errors must be 0).  Method: docs/BENCHMARKS.md, "How each bench
 * measures".
 */
#include "clusterbench.h"

static int first_master_other_than(int not)
{
    for (int i = 0; i < cl.n; i++)
        if (i != not && rh_cluster_is_master(&cl, i) == 1)
            return i;
    return -1;
}

/* The slots to move: nslots consecutive slots from src to dst, and the
 * pools of their clients the load draws from. */
typedef struct rs_plan {
    int nslots, src, dst;
    int *slot;
    hot_pool *hot;
    double hot_min; /* clients in the smallest pool */
} rs_plan;

/* nslots consecutive slots of the master of slot 1000 (redis-cli gives
 * each master one range), to the next master. */
static int rs_pick_slots(rs_plan *p, char *err)
{
    p->src = rh_cluster_master_of(&cl, 1000);
    p->dst = first_master_other_than(p->src);
    if (p->src < 0 || p->dst < 0)
        return snprintf(err, ERRLEN, "reshard: no source or target master"),
               -1;
    for (int i = 0; i < p->nslots; i++) {
        p->slot[i] = 1000 + i;
        if (rh_cluster_master_of(&cl, p->slot[i]) != p->src)
            return snprintf(err, ERRLEN, "reshard: slot %d is not on node %d",
                            p->slot[i], p->src), -1;
    }
    return 0;
}

/* Their clients among the key space (and past it if it is small). */
static void rs_hot_pools(const options *o, rs_plan *p)
{
    unsigned long long scan = o->keys < 4000000ULL ? 4000000ULL : o->keys;
    unsigned first = (unsigned)p->slot[0];
    char key[32];

    p->hot_min = 1e9;
    for (unsigned long long id = 0; id < scan; id++) {
        int len = snprintf(key, sizeof key, "user:%llu", id);
        unsigned s = rh_key_slot(key, (size_t)len);
        if (s >= first && s < first + (unsigned)p->nslots) {
            hot_pool *h = &p->hot[s - first];
            if (h->n < HOT_PER_SLOT && (id < o->keys || h->n < 16))
                h->id[h->n++] = (unsigned)id;
        }
    }
    for (int i = 0; i < p->nslots; i++)
        if (p->hot[i].n < p->hot_min)
            p->hot_min = p->hot[i].n;
}

/* Moves the slots one by one, the draws going to the one moving. */
static int rs_move(const rs_plan *p, tp *t, int *moved_keys, char *err)
{
    for (int i = 0; i < p->nslots; i++) {
        int k;
        atomic_store(&t->l.run.cur, i);
        sleep_s(DWELL_S); /* the slot's clients are created on src */
        if (rh_cluster_migrate_begin(&cl, p->slot[i], p->dst) != 0)
            return snprintf(err, ERRLEN, "migrate_begin slot %d failed "
                            "(stderr)", p->slot[i]), -1;
        while ((k = rh_cluster_migrate_keys(&cl, p->slot[i], MIGRATE_STEP)) >
               0)
            *moved_keys += k;
        if (k < 0 || rh_cluster_migrate_end(&cl, p->slot[i], p->dst) != 0)
            return snprintf(err, ERRLEN, "migrating slot %d failed (stderr)",
                            p->slot[i]), -1;
        sleep_s(DWELL_S); /* MOVED met, the map refreshed */
        if (interrupted(err))
            return -1;
    }
    return 0;
}

/* The load started, warmed up, measured while the slots move, stopped. */
static int rs_run(const options *o, const pidset *ps, const rs_plan *p,
                  tp *t, int *moved_keys, char *err)
{
    int rc = -1;

    if (tp_start(t, o, p->hot, TP_THREADS, 1, 0, err) == 0) {
        sleep_s(WARM_S);
        if (!interrupted(err)) {
            tp_measure_begin(t, ps);
            rc = rs_move(p, t, moved_keys, err);
            if (rc == 0)
                tp_measure_end(t, ps);
            atomic_store(&t->l.run.cur, -1);
        }
    }
    tp_stop(t);
    return rc;
}

static void rs_emit_redirects(const options *o, const rs_plan *p,
                              const tp *t, int moved_keys)
{
    figure f = {0};
    double moved = (double)(t->s1.moved - t->s0.moved),
           asks = (double)(t->s1.asks - t->s0.asks),
           checks = (double)(t->s1.checks - t->s0.checks);
    cpu_use cu = cpu_diff(&t->c0, &t->c1);

    f = (figure){.name = "reshard_redirect_share",
                  .value = checks > 0 ? (moved + asks) / checks : NAN,
                  .unit = "share"};
    xnum(&f, "moved", moved);
    xnum(&f, "asks", asks);
    xnum(&f, "elsewhere", (double)(t->s1.elsewhere - t->s0.elsewhere));
    xnum(&f, "tryagain", (double)(t->s1.tryagain - t->s0.tryagain));
    xnum(&f, "refreshes", (double)(t->s1.refreshes - t->s0.refreshes));
    xnum(&f, "store_checks", checks);
    xnum(&f, "calls", (double)t->sum.calls);
    xnum(&f, "redirects_per_call",
         t->sum.calls ? (moved + asks) / (double)t->sum.calls : NAN);
    xnum(&f, "hot_calls", (double)t->sum.hot_calls);
    xnum(&f, "hot_share",
         t->sum.calls ? (double)t->sum.hot_calls / (double)t->sum.calls : NAN);
    xnum(&f, "redirects_per_hot_call",
         t->sum.hot_calls ? (moved + asks) / (double)t->sum.hot_calls : NAN);
    xnum(&f, "slots", p->nslots);
    xnum(&f, "keys_moved", moved_keys);
    xnum(&f, "min_clients_per_slot", p->hot_min);
    xnum(&f, "source_node", p->src);
    xnum(&f, "target_node", p->dst);
    xnum(&f, "seconds", (double)(t->t1 - t->t0) / 1e9);
    xnum(&f, "timeouts", (double)(t->s1.timeouts - t->s0.timeouts));
    xnum(&f, "reconnects", (double)(t->s1.reconnects - t->s0.reconnects));
    xnum(&f, "client_cpu", cu.client);
    xnum(&f, "redis_cpu", cu.redis);
    xnum(&f, "replica_cpu", cu.replica);
    xnum(&f, "other_cpu", cu.other);
    xnum(&f, "failovers", failovers());
    emit(o, &f);
}

/* checks/s (beside throughput_cluster_64 when it ran), fallback results
 * and errors: the last two must be 0. */
static void rs_emit_load(const options *o, const tp *t,
                         const tp_figs *cluster_ref)
{
    figure f = {.name = "reshard_checks_per_s",
                 .value = (double)t->sum.calls / ((double)(t->t1 - t->t0) / 1e9),
                 .unit = "checks/s"};

    if (cluster_ref && cluster_ref->rate > 0) {
        f.nrefs = 1;
        f.ref[0] = cluster_ref->rate;
        f.ref_name[0] = "throughput_cluster_64";
    }
    xnum(&f, "p50_us", hist_pct(&t->sum.all, 0.50) / 1000.0);
    xnum(&f, "p99_us", hist_pct(&t->sum.all, 0.99) / 1000.0);
    xnum(&f, "p999_us", hist_pct(&t->sum.all, 0.999) / 1000.0);
    xnum(&f, "max_us", hist_pct(&t->sum.all, 1.0) / 1000.0);
    emit(o, &f);
    f = (figure){.name = "reshard_fallback", .value = (double)t->sum.fallback,
                  .unit = "checks"};
    xnum(&f, "degraded", (double)t->sum.degraded);
    xnum(&f, "denied", (double)t->sum.denied);
    emit(o, &f);
    f = (figure){.name = "reshard_errors", .value = (double)t->sum.errors,
                  .unit = "calls"};
    xstr(&f, "first_error", t->sum.first_err);
    emit(o, &f);
}

int group_reshard(const options *o, const pidset *ps,
                  const tp_figs *cluster_ref, char *err)
{
    rs_plan p = {.nslots = (int)o->slots};
    int moved_keys = 0, rc = -1;
    tp t;

    if ((p.slot = calloc((size_t)p.nslots, sizeof *p.slot)) == NULL ||
        (p.hot = calloc((size_t)p.nslots, sizeof *p.hot)) == NULL) {
        free(p.slot);
        return snprintf(err, ERRLEN, "out of memory"), -1;
    }
    if (rs_pick_slots(&p, err) == 0) {
        rs_hot_pools(o, &p);
        rc = rs_run(o, ps, &p, &t, &moved_keys, err);
    }
    if (rc == 0) {
        rs_emit_redirects(o, &p, &t, moved_keys);
        rs_emit_load(o, &t, cluster_ref);
    }
    free(p.slot);
    free(p.hot);
    return rc;
}
