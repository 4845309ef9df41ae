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
    double moved = (double)(t->s1.moved - t->s0.moved),
           asks = (double)(t->s1.asks - t->s0.asks),
           checks = (double)(t->s1.checks - t->s0.checks),
           calls = (double)t->sum.calls, hot = (double)t->sum.hot_calls;
    cpu_use cu = cpu_diff(&t->c0, &t->c1);
    figure f = {.name = "reshard_redirect_share",
                .value = checks > 0 ? (moved + asks) / checks : NAN,
                .unit = "share"};

    XLIST(&f, XN("moved", moved), XN("asks", asks),
          XN("elsewhere", t->s1.elsewhere - t->s0.elsewhere),
          XN("tryagain", t->s1.tryagain - t->s0.tryagain),
          XN("refreshes", t->s1.refreshes - t->s0.refreshes),
          XN("store_checks", checks), XN("calls", calls),
          XN("redirects_per_call", calls ? (moved + asks) / calls : NAN),
          XN("hot_calls", hot), XN("hot_share", calls ? hot / calls : NAN),
          XN("redirects_per_hot_call", hot ? (moved + asks) / hot : NAN),
          XN("slots", p->nslots), XN("keys_moved", moved_keys),
          XN("min_clients_per_slot", p->hot_min), XN("source_node", p->src),
          XN("target_node", p->dst),
          XN("seconds", (double)(t->t1 - t->t0) / 1e9),
          XN("timeouts", t->s1.timeouts - t->s0.timeouts),
          XN("reconnects", t->s1.reconnects - t->s0.reconnects),
          XN("client_cpu", cu.client), XN("redis_cpu", cu.redis),
          XN("replica_cpu", cu.replica), XN("other_cpu", cu.other),
          XN("failovers", failovers()));
    emit(o, &f);
}

/* checks/s (beside throughput_cluster_64 when it ran), fallback results
 * and errors: the last two must be 0. */
static void rs_emit_load(const options *o, const tp *t,
                         const tp_figs *cluster_ref)
{
    int ref = cluster_ref && cluster_ref->rate > 0;
    figure f = {.name = "reshard_checks_per_s",
                .value = (double)t->sum.calls / ((double)(t->t1 - t->t0) / 1e9),
                .unit = "checks/s", .nrefs = ref,
                .ref = {ref ? cluster_ref->rate : 0},
                .ref_name = {"throughput_cluster_64"}};

    XLIST(&f, XN("p50_us", hist_pct(&t->sum.all, 0.50) / 1000.0),
          XN("p99_us", hist_pct(&t->sum.all, 0.99) / 1000.0),
          XN("p999_us", hist_pct(&t->sum.all, 0.999) / 1000.0),
          XN("max_us", hist_pct(&t->sum.all, 1.0) / 1000.0));
    emit(o, &f);
    f = (figure){.name = "reshard_fallback", .value = (double)t->sum.fallback,
                 .unit = "checks"};
    XLIST(&f, XN("degraded", t->sum.degraded), XN("denied", t->sum.denied));
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
