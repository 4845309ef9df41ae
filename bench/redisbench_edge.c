/*
 * redisbench_edge.c -- window_edge in redisbench's group 5: 100 per 10 s,
 * 100 admitted 9.2 s into a window, then 200 fired by 32 threads 0.1 s into
 * the next; the sliding window must stay within 1.1 x limit, where the fixed
 * window is expected to let 2 x limit through -- the burst at a window's
 * edge that the sliding window exists to stop.
 */
#include "redisbench.h"
/* ---- window edge: 32 threads, one limiter ------------------------------------- */

typedef struct edge {
    rl_limiter *lim;
    const char *key;
    int64_t t1, t1_end, t2; /* CLOCK_REALTIME ns */
    _Atomic int adm1[2], adm2[2], fired2[2];
    _Atomic unsigned long long fb;
    _Atomic int64_t last1; /* latest end of a phase-1 call */
    _Atomic int failed;
    char err[ERRLEN];
} edge;

static const char *const edge_rules[2] = {"esw", "efw"};

static int edge_call(edge *e, int a, int *allowed)
{
    rl_result res = RL_RESULT_INIT;
    int rc = rl_allow(e->lim, e->key, edge_rules[a], 1, &res);

    if (rc != RL_OK) {
        if (atomic_exchange(&e->failed, 1) == 0)
            set_err(e->err, "rl_allow", rc, errtext(e->lim));
        return -1;
    }
    if (res.flags & RL_FLAG_FALLBACK)
        atomic_fetch_add(&e->fb, 1);
    *allowed = res.allowed;
    return 0;
}

static void *edge_main(void *arg)
{
    edge *e = arg;
    int allowed;

    sleep_until_rt(e->t1);
    for (;;) { /* phase 1: until each rule admitted its limit */
        int busy = 0;
        for (int a = 0; a < 2; a++) {
            if (atomic_load(&e->adm1[a]) >= EDGE_LIMIT || rt_ns() >= e->t1_end)
                continue;
            busy = 1;
            if (edge_call(e, a, &allowed))
                return NULL;
            if (allowed)
                atomic_fetch_add(&e->adm1[a], 1);
            int64_t t = rt_ns(), l = atomic_load(&e->last1);
            while (t > l && !atomic_compare_exchange_weak(&e->last1, &l, t))
                ;
        }
        if (!busy)
            break;
    }
    sleep_until_rt(e->t2);
    for (;;) { /* phase 2: EDGE_FIRE2 checks per rule, all threads */
        int busy = 0;
        for (int a = 0; a < 2; a++) {
            if (atomic_fetch_add(&e->fired2[a], 1) >= EDGE_FIRE2)
                continue;
            busy = 1;
            if (edge_call(e, a, &allowed))
                return NULL;
            if (allowed)
                atomic_fetch_add(&e->adm2[a], 1);
        }
        if (!busy)
            break;
    }
    return NULL;
}

/* Phase 1 at EDGE_PHASE1_MS into the next window that leaves 50 ms to
 * start, phase 2 EDGE_PHASE2_MS into the one after; returns the start of
 * phase 1's window.  Redis runs on this machine: its TIME is this
 * CLOCK_REALTIME. */
static int64_t edge_schedule(edge *e)
{
    int64_t w = EDGE_WINDOW_MS * 1000000LL, now = rt_ns(), ws;

    ws = (now / w) * w;
    if (ws + EDGE_PHASE1_MS * 1000000LL < now + 50000000LL)
        ws += w;
    e->t1 = ws + EDGE_PHASE1_MS * 1000000LL;
    e->t1_end = ws + w - 100000000LL; /* give up 0.1 s before the edge */
    e->t2 = ws + w + EDGE_PHASE2_MS * 1000000LL;
    return ws;
}

/* 0 when both phases ran as planned, else -1 with err. */
static int edge_ran(edge *e, int64_t ws, char *err)
{
    if (atomic_load(&e->failed)) {
        memcpy(err, e->err, ERRLEN);
        return -1;
    }
    for (int a = 0; a < 2; a++)
        if (atomic_load(&e->adm1[a]) < EDGE_LIMIT) {
            snprintf(err, ERRLEN, "window_edge: %s admitted only %d of %d in "
                     "phase 1 before the window ended", edge_rules[a],
                     atomic_load(&e->adm1[a]), EDGE_LIMIT);
            return -1;
        }
    if (atomic_load(&e->last1) >= ws + EDGE_WINDOW_MS * 1000000LL) {
        snprintf(err, ERRLEN, "window_edge: phase 1 ran past the window "
                 "edge (machine too loaded)");
        return -1;
    }
    return 0;
}

static void edge_emit(const options *o, edge *e, int64_t ws)
{
    for (int a = 0; a < 2; a++) {
        figure f = {0};
        int total = atomic_load(&e->adm1[a]) + atomic_load(&e->adm2[a]);

        f = (figure){.name = a == 0 ? "window_edge_sliding_window" : "window_edge_fixed_window",
                      .value = total, .unit = "admitted", .nrefs = 1,
                      .ref = {a == 0 ? 1.1 * EDGE_LIMIT : 2.0 * EDGE_LIMIT},
                      .ref_name = {a == 0 ? "1.1_x_limit_max" : "2_x_limit_expected"}};
        xnum(&f, "limit", EDGE_LIMIT);
        xnum(&f, "window_s", (double)EDGE_WINDOW_MS / 1000);
        xnum(&f, "phase1_admitted", atomic_load(&e->adm1[a]));
        xnum(&f, "phase2_admitted", atomic_load(&e->adm2[a]));
        xnum(&f, "phase2_fired", EDGE_FIRE2);
        xnum(&f, "phase1_at_s", (double)EDGE_PHASE1_MS / 1000);
        xnum(&f, "phase1_done_at_s",
             (double)(atomic_load(&e->last1) - ws) / 1e9);
        xnum(&f, "phase2_at_s", (double)(EDGE_WINDOW_MS + EDGE_PHASE2_MS) / 1000);
        xnum(&f, "threads", EDGE_THREADS);
        xnum(&f, "fallback", (double)atomic_load(&e->fb));
        emit(o, &f);
    }
}

int group_edge(const options *o, char *err)
{
    edge *e = calloc(1, sizeof *e);
    char rules[1024], r0[256], r1[256], key[64];
    pthread_t tid[EDGE_THREADS];
    int started = 0, rc = -1;
    int64_t ws;

    if (e == NULL)
        return snprintf(err, ERRLEN, "out of memory"), -1;
    one_rule(r0, sizeof r0, "esw", 0, EDGE_LIMIT, EDGE_WINDOW_MS / 1000, 0);
    one_rule(r1, sizeof r1, "efw", 2, EDGE_LIMIT, EDGE_WINDOW_MS / 1000, 0);
    snprintf(rules, sizeof rules, "{\"rules\":[%s,%s]}", r0, r1);
    snprintf(key, sizeof key, "edge:%ld:%lld", (long)getpid(),
             (long long)(rt_ns() / 1000000));
    e->key = key;
    if (make_limiter(o, rules, &e->lim, err) != RL_OK) {
        free(e);
        return -1;
    }
    ws = edge_schedule(e);
    for (int t = 0; t < EDGE_THREADS; t++) {
        if (pthread_create(&tid[t], NULL, edge_main, e) != 0) {
            snprintf(err, ERRLEN, "pthread_create failed");
            break; /* the started ones finish by themselves */
        }
        started++;
    }
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    rl_limiter_free(e->lim);
    if (started == EDGE_THREADS && edge_ran(e, ws, err) == 0) {
        edge_emit(o, e, ws);
        if (atomic_load(&e->fb) != 0)
            snprintf(err, ERRLEN, "window_edge: %llu fallback results",
                     (unsigned long long)atomic_load(&e->fb));
        else
            rc = 0;
    }
    free(e);
    return rc;
}
