/*
 * clusterbench_reshard.c -- group 4 of clusterbench: resharding under
 * load.  While the load of group 3 runs on the cluster, --slots slots move
 * one by one between masters, half the draws going to the clients of the
 * slot being moved: reshard_redirect_share, the share of script calls
 * redirected (ASK while a slot is half-moved, MOVED after), with
 * redirects per call and per call into the moving slot, and the checks/s
 * meanwhile beside throughput_cluster_64.  A redirect must be followed,
 * never failed over: reshard_fallback and reshard_errors must be 0.
 */
#include "clusterbench.h"
/* ---- group 4: resharding under load ------------------------------------ */

static int first_master_other_than(int not)
{
    for (int i = 0; i < cl.n; i++)
        if (i != not && rh_cluster_is_master(&cl, i) == 1)
            return i;
    return -1;
}

int group_reshard(const options *o, const char *uri, const pidset *ps,
                         const tp_figs *cluster_ref, char *err)
{
    int nslots = (int)o->slots, src, dst, rc = -1, moved_keys = 0;
    int *slot = NULL;
    hot_pool *hot = NULL;
    tp t;
    char key[32];
    double secs, hot_min = 1e9;
    unsigned long long scan;

    if ((slot = calloc((size_t)nslots, sizeof *slot)) == NULL ||
        (hot = calloc((size_t)nslots, sizeof *hot)) == NULL) {
        free(slot);
        return snprintf(err, ERRLEN, "out of memory"), -1;
    }
    /* nslots consecutive slots of the master of slot 1000 (redis-cli
     * gives each master one range), to the next master. */
    src = rh_cluster_master_of(&cl, 1000);
    dst = first_master_other_than(src);
    if (src < 0 || dst < 0) {
        snprintf(err, ERRLEN, "reshard: no source or target master");
        goto out_free;
    }
    for (int i = 0; i < nslots; i++) {
        slot[i] = 1000 + i;
        if (rh_cluster_master_of(&cl, slot[i]) != src) {
            snprintf(err, ERRLEN, "reshard: slot %d is not on node %d",
                     slot[i], src);
            goto out_free;
        }
    }
    /* Their clients among the key space (and past it if it is small). */
    scan = o->keys < 4000000ULL ? 4000000ULL : o->keys;
    for (unsigned long long id = 0; id < scan; id++) {
        int len = snprintf(key, sizeof key, "user:%llu", id);
        unsigned s = rh_key_slot(key, (size_t)len);
        if (s >= (unsigned)slot[0] && s < (unsigned)(slot[0] + nslots)) {
            hot_pool *h = &hot[s - (unsigned)slot[0]];
            if (h->n < HOT_PER_SLOT && (id < o->keys || h->n < 16))
                h->id[h->n++] = (unsigned)id;
        }
    }
    for (int i = 0; i < nslots; i++)
        if (hot[i].n < hot_min)
            hot_min = hot[i].n;

    if (tp_start(&t, uri, hot, o->keys, 1, err))
        goto out;
    sleep_s(WARM_S);
    if (interrupted(err))
        goto out;
    tp_measure_begin(&t, ps);
    for (int i = 0; i < nslots; i++) {
        int k;
        atomic_store(&t.run.cur, i);
        sleep_s(DWELL_S); /* the slot's clients are created on src */
        if (rh_cluster_migrate_begin(&cl, slot[i], dst) != 0) {
            snprintf(err, ERRLEN, "migrate_begin slot %d failed (stderr)",
                     slot[i]);
            goto stop;
        }
        while ((k = rh_cluster_migrate_keys(&cl, slot[i], MIGRATE_STEP)) > 0)
            moved_keys += k;
        if (k < 0 || rh_cluster_migrate_end(&cl, slot[i], dst) != 0) {
            snprintf(err, ERRLEN, "migrating slot %d failed (stderr)",
                     slot[i]);
            goto stop;
        }
        sleep_s(DWELL_S); /* MOVED met, the map refreshed */
        if (interrupted(err))
            goto stop;
    }
    tp_measure_end(&t, ps);
    rc = 0;
stop:
    atomic_store(&t.run.cur, -1);
out:
    tp_stop(&t);
    if (rc != 0)
        goto out_free;
    secs = (double)(t.t1 - t.t0) / 1e9;
    {
        figure f = {0};
        double moved = (double)(t.s1.moved - t.s0.moved),
               asks = (double)(t.s1.asks - t.s0.asks),
               checks = (double)(t.s1.checks - t.s0.checks);
        cpu_use cu = cpu_diff(&t.c0, &t.c1);

        f.name = "reshard_redirect_share";
        f.value = checks > 0 ? (moved + asks) / checks : NAN;
        f.unit = "share";
        xnum(&f, "moved", moved);
        xnum(&f, "asks", asks);
        xnum(&f, "elsewhere", (double)(t.s1.elsewhere - t.s0.elsewhere));
        xnum(&f, "tryagain", (double)(t.s1.tryagain - t.s0.tryagain));
        xnum(&f, "refreshes", (double)(t.s1.refreshes - t.s0.refreshes));
        xnum(&f, "store_checks", checks);
        xnum(&f, "calls", (double)t.calls);
        xnum(&f, "redirects_per_call",
             t.calls ? (moved + asks) / (double)t.calls : NAN);
        xnum(&f, "hot_calls", (double)t.hot_calls);
        xnum(&f, "hot_share", t.calls ? (double)t.hot_calls / (double)t.calls
                                      : NAN);
        xnum(&f, "redirects_per_hot_call",
             t.hot_calls ? (moved + asks) / (double)t.hot_calls : NAN);
        xnum(&f, "slots", nslots);
        xnum(&f, "keys_moved", moved_keys);
        xnum(&f, "min_clients_per_slot", hot_min);
        xnum(&f, "source_node", src);
        xnum(&f, "target_node", dst);
        xnum(&f, "seconds", secs);
        xnum(&f, "timeouts", (double)(t.s1.timeouts - t.s0.timeouts));
        xnum(&f, "reconnects", (double)(t.s1.reconnects - t.s0.reconnects));
        xnum(&f, "client_cpu", cu.client);
        xnum(&f, "redis_cpu", cu.redis);
        xnum(&f, "replica_cpu", cu.replica);
        xnum(&f, "other_cpu", cu.other);
        xnum(&f, "failovers", failovers());
        emit(o, &f);

        f = (figure){0};
        f.name = "reshard_checks_per_s";
        f.value = (double)t.calls / secs;
        f.unit = "checks/s";
        if (cluster_ref && cluster_ref->rate > 0) {
            f.nrefs = 1;
            f.ref[0] = cluster_ref->rate;
            f.ref_name[0] = "throughput_cluster_64";
        }
        xnum(&f, "p50_us", hist_pct(&t.all, 0.50) / 1000.0);
        xnum(&f, "p99_us", hist_pct(&t.all, 0.99) / 1000.0);
        xnum(&f, "p999_us", hist_pct(&t.all, 0.999) / 1000.0);
        xnum(&f, "max_us", hist_pct(&t.all, 1.0) / 1000.0);
        emit(o, &f);

        f = (figure){0};
        f.name = "reshard_fallback";
        f.value = (double)t.fallback;
        f.unit = "checks";
        xnum(&f, "degraded", (double)t.degraded);
        xnum(&f, "denied", (double)t.denied);
        emit(o, &f);

        f = (figure){0};
        f.name = "reshard_errors";
        f.value = (double)t.errors;
        f.unit = "calls";
        xstr(&f, "first_error", t.first_err);
        emit(o, &f);
    }
out_free:
    free(slot);
    free(hot);
    return rc;
}
