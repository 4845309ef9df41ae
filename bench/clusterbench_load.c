/*
 * clusterbench_load.c -- the timed load that clusterbench's groups 3 and 4
 * run (redisutil.h's tp_load): THREADS threads of rl_allow (or
 * rl_check_many, 32 per call) on one limiter, keys drawn uniformly (or,
 * while a slot moves, half from the keys of the moving slots), warmed up
 * then measured, with the store's counters and CPU accounting taken around
 * the measured part.
 */
#include "clusterbench.h"

int tp_start(tp *t, const char *uri, const hot_pool *hot,
                    unsigned long long nkeys, int per_call, char *err)
{
    char rules[512];

    memset(t, 0, sizeof *t);
    atomic_store(&t->l.run.cur, -1);
    t->l.run.hot = hot;
    t->l.run.nkeys = nkeys;
    t->l.run.per_call = per_call;
    t->l.run.stop = &g_stop;
    one_rule(rules, sizeof rules, "bench", 0, BIG_LIMIT, BIG_WINDOW_S, 0);
    if (make_limiter(uri, "plain", rules, &t->l.run.lim, err))
        return -1;
    return tp_load_start(&t->l, per_call > 1 ? THREADS / per_call : THREADS,
                         err); /* tp_stop() joins what started */
}

void tp_measure_begin(tp *t, const pidset *ps)
{
    cpu_take(&t->c0, ps);
    store_redis_stats_get(limiter_store(t->l.run.lim), &t->s0);
    t->t0 = now_ns();
    atomic_store(&t->l.run.phase, 1);
}

void tp_measure_end(tp *t, const pidset *ps)
{
    atomic_store(&t->l.run.phase, 0); /* stop counting; keep the load on */
    t->t1 = now_ns();
    store_redis_stats_get(limiter_store(t->l.run.lim), &t->s1);
    cpu_take(&t->c1, ps);
}

void tp_stop(tp *t)
{
    tp_load_stop(&t->l, &t->sum);
    if (t->l.run.lim)
        rl_limiter_free(t->l.run.lim);
    t->l.run.lim = NULL;
}
