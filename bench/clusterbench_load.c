/*
 * clusterbench_load.c -- the timed load that clusterbench's groups 3 and 4
 * run: THREADS threads of rl_allow (or rl_check_many, 32 per call) on one
 * limiter, keys drawn uniformly (or, while a slot moves, half from the keys of
 * the moving slots), warmed up then measured, with latency histograms, store
 * counters and CPU accounting taken around the measured part.
 */
#include "clusterbench.h"
/* ---- groups 3 and 4: a timed load ------------------------------------- */



/* The *_many figures: MANY_PER_CALL requests per rl_check_many() call,
 * THREADS / MANY_PER_CALL threads (64 in flight); keys as tp_main's (the
 * rule counts by user); each request's latency is its call's. */
static void *tp_many_main(void *arg)
{
    tp_worker *w = arg;
    tp_run *r = w->run;
    char user[MANY_PER_CALL][24];
    rl_request req[MANY_PER_CALL];
    rl_result res[MANY_PER_CALL];
    int codes[MANY_PER_CALL], ph;

    for (int i = 0; i < MANY_PER_CALL; i++)
        res[i] = (rl_result)RL_RESULT_INIT;

    while ((ph = atomic_load(&r->phase)) < 2 && !atomic_load(&g_stop)) {
        uint64_t t0, t1;

        for (int i = 0; i < MANY_PER_CALL; i++) {
            uint64_t x = splitmix64(&w->rng);
            snprintf(user[i], sizeof user[i], "%llu",
                     (unsigned long long)(((x >> 32) * r->nkeys) >> 32));
            req[i] = (rl_request)RL_REQUEST_INIT;
            req[i].user = user[i];
            req[i].cost = 1;
        }
        t0 = now_ns();
        rl_check_many(r->lim, req, res, codes, MANY_PER_CALL);
        t1 = now_ns();
        if (ph != 1 || atomic_load(&r->phase) != 1)
            continue;
        for (int i = 0; i < MANY_PER_CALL; i++) {
            w->calls++;
            if (codes[i] != RL_OK) {
                if (w->errors++ == 0)
                    set_err(w->err, "rl_check_many", codes[i],
                            errtext(r->lim));
                continue;
            }
            hist_add(&w->h, t1 - t0);
            count_result(&res[i], &w->fallback, &w->degraded, &w->denied);
        }
    }
    return NULL;
}

static void *tp_main(void *arg)
{
    tp_worker *w = arg;
    tp_run *r = w->run;
    char key[32];
    int ph;

    while ((ph = atomic_load(&r->phase)) < 2 && !atomic_load(&g_stop)) {
        rl_result res = RL_RESULT_INIT;
        uint64_t t0, t1, x = splitmix64(&w->rng);
        unsigned long long id;
        int rc, cur = r->hot ? atomic_load(&r->cur) : -1, hot = 0;

        if (cur >= 0 && (x & 1) && r->hot[cur].n > 0) {
            id = r->hot[cur].id[((x >> 32) * r->hot[cur].n) >> 32];
            hot = 1;
        } else {
            id = ((x >> 32) * r->nkeys) >> 32;
        }
        snprintf(key, sizeof key, "user:%llu", id);
        t0 = now_ns();
        rc = rl_allow(r->lim, key, "bench", 1, &res);
        t1 = now_ns();
        if (ph != 1 || atomic_load(&r->phase) != 1)
            continue;
        w->calls++;
        w->hot_calls += (unsigned long long)hot;
        if (rc != RL_OK) {
            if (w->errors++ == 0)
                set_err(w->err, "rl_allow", rc, errtext(r->lim));
            continue;
        }
        hist_add(&w->h, t1 - t0);
        count_result(&res, &w->fallback, &w->degraded, &w->denied);
    }
    return NULL;
}



int tp_start(tp *t, const char *uri, const hot_pool *hot,
                    unsigned long long nkeys, int per_call, char *err)
{
    char rules[512];
    int threads = per_call > 1 ? THREADS / per_call : THREADS;

    memset(t, 0, sizeof *t);
    atomic_store(&t->run.cur, -1);
    t->run.hot = hot;
    t->run.nkeys = nkeys;
    t->run.per_call = per_call;
    one_rule(rules, sizeof rules, "bench", 0, BIG_LIMIT, BIG_WINDOW_S, 0);
    if (make_limiter(uri, "plain", rules, &t->run.lim, err))
        return -1;
    if ((t->w = calloc(THREADS, sizeof *t->w)) == NULL) {
        rl_limiter_free(t->run.lim);
        t->run.lim = NULL;
        return snprintf(err, ERRLEN, "out of memory"), -1;
    }
    for (int i = 0; i < threads; i++) {
        t->w[i].run = &t->run;
        t->w[i].rng = 0xBE4C0000ULL + (uint64_t)i * 7919;
        if (pthread_create(&t->tid[i], NULL,
                           per_call > 1 ? tp_many_main : tp_main,
                           &t->w[i]) != 0) {
            snprintf(err, ERRLEN, "pthread_create failed");
            return -1; /* tp_stop() joins what started */
        }
        t->started++;
    }
    return 0;
}

void tp_measure_begin(tp *t, const pidset *ps)
{
    cpu_take(&t->c0, ps);
    store_redis_stats_get(limiter_store(t->run.lim), &t->s0);
    t->t0 = now_ns();
    atomic_store(&t->run.phase, 1);
}

void tp_measure_end(tp *t, const pidset *ps)
{
    atomic_store(&t->run.phase, 0); /* stop counting; keep the load on */
    t->t1 = now_ns();
    store_redis_stats_get(limiter_store(t->run.lim), &t->s1);
    cpu_take(&t->c1, ps);
}

void tp_stop(tp *t)
{
    atomic_store(&t->run.phase, 2);
    for (int i = 0; i < t->started; i++)
        pthread_join(t->tid[i], NULL);
    for (int i = 0; i < t->started; i++) {
        tp_worker *w = &t->w[i];
        if (w->errors && t->first_err[0] == '\0')
            memcpy(t->first_err, w->err, ERRLEN);
        t->calls += w->calls;
        t->hot_calls += w->hot_calls;
        t->fallback += w->fallback;
        t->degraded += w->degraded;
        t->denied += w->denied;
        t->errors += w->errors;
        hist_merge(&t->all, &w->h);
    }
    t->started = 0;
    if (t->run.lim)
        rl_limiter_free(t->run.lim);
    t->run.lim = NULL;
    free(t->w);
    t->w = NULL;
}
