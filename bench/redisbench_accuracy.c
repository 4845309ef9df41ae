/*
 * redisbench_accuracy.c -- group 5 of redisbench: accuracy (8 processes x 4
 * threads, each process with its own limiter, hammer one key per algorithm
 * for --accuracy-seconds) and window_edge (32 threads: a limit spent late in
 * a window, then a burst early in the next).  Both run one frame, hammer():
 * threads checking one key under a few rules in turn.  Method and what the
 * references are: docs/BENCHMARKS.md, "redisbench: one Redis server".
 */
#include "redisbench.h"

#define ACC_PROCS 8
#define ACC_THREADS 4
#define ACC_LIMIT 1000
#define ACC_BURST 100 /* token bucket and GCRA */
#define ACC_WINDOW_S 10
#define ACC_START_OFFSET_NS 250000000LL
#define ACC_TOLERANCE 0.03
#define EDGE_THREADS 32
#define EDGE_LIMIT 100
#define EDGE_WINDOW_NS 10000000000LL
#define EDGE_PHASE1_NS 9200000000LL /* into window W     */
#define EDGE_PHASE2_NS 100000000LL  /* into window W + 1 */
#define EDGE_FIRE2 200
#define MS_NS 1000000LL

/* What threads check, from start_ns to until_ns (CLOCK_REALTIME, the clock
 * Redis TIME reads): key under ids[0..nrules) in turn, each rule until it
 * admitted max_adm or was fired max_fired times (0: no cap); counted per
 * rule (each thread counts its checks and span on its own, then adds them
 * here), with the span [first call, last reply]. */
typedef struct hammer {
    char key[64];
    const char *const *ids;
    int nrules;
    unsigned long long max_adm, max_fired;
    int64_t start_ns, until_ns;
    _Atomic unsigned long long fired[4], adm[4], checks[4], fb;
    _Atomic int64_t first_ns, last_ns;
} hammer;

typedef struct hworker {
    bench_status st; /* first: bench_threads() reads it */
    rl_limiter *lim;
    hammer *h[2];   /* the phases, in turn (NULL: none) */
    _Atomic int *go; /* non-NULL: wait until it is not 0; run if 1 */
} hworker;

static const char *const acc_ids[4] = {"sw", "tb", "fw", "gc"};
static const char *const edge_ids[2] = {"esw", "efw"};
static const int edge_algos[2] = {0, 2};

static void hammer_init(hammer *h, const char *what, const char *const *ids,
                        int nrules)
{
    memset(h, 0, sizeof *h);
    snprintf(h->key, sizeof h->key, "%s:%ld:%lld", what, (long)getpid(),
             (long long)(rt_ns() / MS_NS));
    h->ids = ids;
    h->nrules = nrules;
    h->until_ns = h->first_ns = INT64_MAX;
    h->max_adm = ULLONG_MAX;
}

static void atomic_minmax(_Atomic int64_t *v, int64_t x, int max)
{
    int64_t old = atomic_load(v);

    while ((max ? x > old : x < old) &&
           !atomic_compare_exchange_weak(v, &old, x))
        ;
}

/* One thread's checks of h: 0, or -1 with w->st set. */
static int hammer_run(hworker *w, hammer *h)
{
    unsigned long long n[4] = {0}, fb = 0;
    int64_t first = INT64_MAX, last = 0;

    for (int busy = 1; busy && w->st.rc == 0;) {
        busy = 0;
        for (int a = 0; a < h->nrules && w->st.rc == 0; a++) {
            rl_result res = RL_RESULT_INIT;
            int64_t t0 = rt_ns();

            if (t0 >= h->until_ns || atomic_load(&h->adm[a]) >= h->max_adm ||
                (h->max_fired &&
                 atomic_fetch_add(&h->fired[a], 1) >= h->max_fired))
                continue;
            busy = 1;
            first = first < t0 ? first : t0;
            if ((w->st.rc = rl_allow(w->lim, h->key, h->ids[a], 1, &res)))
                set_err(w->st.err, "rl_allow", w->st.rc, errtext(w->lim));
            last = rt_ns();
            n[a]++;
            if (res.allowed && w->st.rc == 0)
                atomic_fetch_add(&h->adm[a], 1);
            fb += (res.flags & RL_FLAG_FALLBACK) != 0;
        }
    }
    for (int a = 0; a < h->nrules; a++)
        atomic_fetch_add(&h->checks[a], n[a]);
    atomic_fetch_add(&h->fb, fb);
    atomic_minmax(&h->first_ns, first, 0);
    atomic_minmax(&h->last_ns, last, 1);
    return w->st.rc ? -1 : 0;
}

static void futex(_Atomic int *w, int op, int val)
{
    syscall(SYS_futex, (int *)w, op, val, NULL, NULL, 0);
}

static void *hworker_main(void *arg)
{
    hworker *w = arg;

    while (w->go && atomic_load(w->go) == 0)
        futex(w->go, FUTEX_WAIT, 0);
    if (w->go && atomic_load(w->go) != 1)
        return NULL;
    for (int p = 0; p < 2 && w->h[p]; p++) {
        sleep_until_rt(w->h[p]->start_ns);
        if (hammer_run(w, w->h[p]))
            break;
    }
    return NULL;
}

/* {"rules":[...]}: n rules by user, ids[i] of algorithm algos[i] (token
 * bucket and GCRA: a burst of ACC_BURST), limit per window_s. */
static void rules_of(char *buf, size_t len, const char *const *ids,
                     const int *algos, int n, long long limit, long long win)
{
    size_t at = (size_t)snprintf(buf, len, "{\"rules\":[");
    char r[256];

    for (int i = 0; i < n; i++) {
        one_rule(r, sizeof r, ids[i], algos[i], limit, win,
                 algos[i] % 2 ? ACC_BURST : 0);
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? "," : "", r);
    }
    snprintf(buf + at, len - at, "]}");
}

/* ---- accuracy: forked processes sharing only Redis --------------------- */

typedef struct acc_shared {
    _Atomic int ready; /* children whose threads wait for `go`    */
    _Atomic int go;    /* 0 wait, 1 run, 2 quit                    */
    _Atomic int failed;
    char err[ERRLEN];
    hammer h;
} acc_shared;

static acc_shared *sh;
static pid_t acc_pid[ACC_PROCS];
static int acc_nproc;

static void acc_child(const options *o)
{
    char rules[1100], err[ERRLEN];
    hworker w[ACC_THREADS];
    rl_limiter *lim = NULL;
    int rc;

    rules_of(rules, sizeof rules, acc_ids, (const int[]){0, 1, 2, 3}, 4,
             ACC_LIMIT, ACC_WINDOW_S);
    if ((rc = make_limiter(o, rules, &lim, err)) == RL_OK) {
        for (int t = 0; t < ACC_THREADS; t++)
            w[t] = (hworker){.lim = lim, .h = {&sh->h}, .go = &sh->go};
        atomic_fetch_add(&sh->ready, 1);
        rc = bench_threads(w, sizeof *w, ACC_THREADS, hworker_main,
                           "redisbench", err);
    }
    if (rc && atomic_exchange(&sh->failed, 1) == 0)
        snprintf(sh->err, sizeof sh->err, "%s", err);
    atomic_fetch_add(&sh->ready, rc && lim == NULL);
    rl_limiter_free(lim);
    _exit(rc ? 1 : 0);
}

/* Reaps the processes; -1 with err naming the first that failed. */
static int acc_reap(char *err)
{
    int dead = 0;

    for (int i = 0; i < acc_nproc; i++) {
        int status = 0;
        while (waitpid(acc_pid[i], &status, 0) < 0 && errno == EINTR)
            ;
        if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && !dead++)
            snprintf(err, ERRLEN, "accuracy process %d failed (status %d)%s"
                     "%.300s", i, status, sh->failed ? ": " : "", sh->err);
    }
    acc_nproc = 0;
    return dead ? -1 : 0;
}

void acc_stop(void)
{
    char err[ERRLEN];

    if (sh == NULL)
        return;
    atomic_store(&sh->go, 2);
    futex(&sh->go, FUTEX_WAKE, INT_MAX);
    acc_reap(err);
    munmap(sh, sizeof *sh);
    sh = NULL;
}

/* Forks the processes (while this one has no other thread) and lets them
 * connect; they wait for acc_run(). */
int acc_prepare(const options *o, char *err)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return sh = NULL, snprintf(err, ERRLEN, "mmap: %s", strerror(errno)),
               -1;
    memset(sh, 0, sizeof *sh);
    hammer_init(&sh->h, "acc", acc_ids, 4);
    fflush(NULL);
    for (int p = 0; p < ACC_PROCS; p++) {
        pid_t pid = fork();
        if (pid < 0)
            return snprintf(err, ERRLEN, "fork: %s", strerror(errno)),
                   acc_stop(), -1;
        if (pid == 0)
            acc_child(o);
        acc_pid[acc_nproc++] = pid;
    }
    for (int i = 0; i < 2000 && atomic_load(&sh->ready) < ACC_PROCS; i++)
        sleep_s(0.005);
    if (sh->failed || atomic_load(&sh->ready) < ACC_PROCS) {
        snprintf(err, ERRLEN, "accuracy process: %.300s", sh->failed ? sh->err
                 : "not ready after 10 s");
        return acc_stop(), -1;
    }
    return 0;
}

/* Each algorithm's admitted count beside what it allows over the span. */
static void acc_emit(const options *o, const hammer *h)
{
    int64_t w = ACC_WINDOW_S * 1000 * MS_NS;
    double span = (double)(h->last_ns - h->first_ns) / 1e9;
    double s0 = (double)(h->first_ns % w) / 1e9;
    double windows = (double)(h->last_ns / w - h->first_ns / w + 1);
    double sw = ACC_LIMIT * (span + s0) / ACC_WINDOW_S;
    double tb = ACC_BURST + span * ACC_LIMIT / ACC_WINDOW_S;
    const struct { double ref; const char *ref_name, *x; double xv; } alg[4] = {
        {sw > ACC_LIMIT ? sw : ACC_LIMIT,
         "limit_x_max1_span_plus_s0_over_window", "tolerance", ACC_TOLERANCE},
        {tb, "burst_plus_span_x_rate", "over_max", 1},
        {ACC_LIMIT * windows, "limit_x_windows_touched", "windows", windows},
        {tb, "burst_plus_span_x_rate", "over_max", 1}};

    for (int a = 0; a < 4; a++) {
        char name[48];
        double adm = (double)h->adm[a];
        figure f = {.name = name, .value = adm, .unit = "admitted",
                    .nrefs = a ? 1 : 2, .ref = {alg[a].ref,
                    ACC_LIMIT * span / ACC_WINDOW_S}, .ref_name =
                    {alg[a].ref_name, "limit_x_span_over_window"}, .x = {
                    {"over", adm - alg[a].ref}, {alg[a].x, alg[a].xv},
                    {"span_s", span}, {"start_offset_s", s0},
                    {"checks", (double)h->checks[a]},
                    {"processes", ACC_PROCS},
                    {"threads_per_process", ACC_THREADS},
                    {"fallback", (double)h->fb}}};

        snprintf(name, sizeof name, "accuracy_%s", algo_names[a]);
        emit(o, &f);
    }
}

/* Starts the waiting processes ACC_START_OFFSET_NS into a window, so the
 * sliding window's first (full) window costs little against limit x span
 * / window, for o->acc_seconds; then the figures. */
int acc_run(const options *o, char *err)
{
    int64_t w = ACC_WINDOW_S * 1000 * MS_NS, now = rt_ns();
    hammer *h = &sh->h;

    h->start_ns = now / w * w + ACC_START_OFFSET_NS;
    h->start_ns += h->start_ns < now + 20 * MS_NS ? w : 0;
    h->until_ns = h->start_ns + (int64_t)(o->acc_seconds * 1e9);
    atomic_store(&sh->go, 1);
    futex(&sh->go, FUTEX_WAKE, INT_MAX);
    if (acc_reap(err))
        return -1;
    if (h->first_ns == INT64_MAX || h->last_ns <= h->first_ns)
        return snprintf(err, ERRLEN, "accuracy: no checks ran"), -1;
    acc_emit(o, h);
    if (h->fb != 0)
        return snprintf(err, ERRLEN, "accuracy: %llu results came from the "
                        "fallback; the figures above are not valid",
                        (unsigned long long)h->fb), -1;
    return 0;
}

/* ---- window edge: 32 threads, one limiter, two phases ------------------ */

static void edge_emit(const options *o, const hammer *h, int64_t ws)
{
    for (int a = 0; a < 2; a++) {
        double adm1 = (double)h[0].adm[a], adm2 = (double)h[1].adm[a];
        figure f = {.name = a ? "window_edge_fixed_window"
                              : "window_edge_sliding_window",
                    .value = adm1 + adm2, .unit = "admitted", .nrefs = 1,
                    .ref = {a ? 2.0 * EDGE_LIMIT : 1.1 * EDGE_LIMIT},
                    .ref_name = {a ? "2_x_limit_expected" : "1.1_x_limit_max"},
                    .x = {{"limit", EDGE_LIMIT},
                          {"window_s", EDGE_WINDOW_NS / 1e9},
                          {"phase1_admitted", adm1},
                          {"phase2_admitted", adm2},
                          {"phase2_fired", EDGE_FIRE2},
                          {"phase1_at_s", EDGE_PHASE1_NS / 1e9},
                          {"phase1_done_at_s",
                           (double)(h[0].last_ns - ws) / 1e9},
                          {"phase2_at_s",
                           (EDGE_WINDOW_NS + EDGE_PHASE2_NS) / 1e9},
                          {"threads", EDGE_THREADS},
                          {"fallback", (double)(h[0].fb + h[1].fb)}}};
        emit(o, &f);
    }
}

/* Phase 1 EDGE_PHASE1_NS into the next window that leaves 50 ms to start
 * (until each rule admitted its limit, giving up 0.1 s before the edge),
 * phase 2 EDGE_PHASE2_NS into the one after (EDGE_FIRE2 checks a rule).
 * Redis runs on this machine: its TIME is this CLOCK_REALTIME. */
int group_edge(const options *o, char *err)
{
    static hammer h[2];
    hworker w[EDGE_THREADS];
    char rules[1024];
    rl_limiter *lim;
    int64_t ws = rt_ns() / EDGE_WINDOW_NS * EDGE_WINDOW_NS;

    ws += ws + EDGE_PHASE1_NS < rt_ns() + 50 * MS_NS ? EDGE_WINDOW_NS : 0;
    for (int p = 0; p < 2; p++)
        hammer_init(&h[p], "edge", edge_ids, 2);
    memcpy(h[1].key, h[0].key, sizeof h[0].key);
    h[0].start_ns = ws + EDGE_PHASE1_NS;
    h[0].until_ns = ws + EDGE_WINDOW_NS - 100 * MS_NS;
    h[0].max_adm = EDGE_LIMIT;
    h[1].start_ns = ws + EDGE_WINDOW_NS + EDGE_PHASE2_NS;
    h[1].max_fired = EDGE_FIRE2;
    rules_of(rules, sizeof rules, edge_ids, edge_algos, 2, EDGE_LIMIT,
             EDGE_WINDOW_NS / 1000000000LL);
    if (make_limiter(o, rules, &lim, err) != RL_OK)
        return -1;
    for (int t = 0; t < EDGE_THREADS; t++)
        w[t] = (hworker){.lim = lim, .h = {&h[0], &h[1]}};
    if (bench_threads(w, sizeof *w, EDGE_THREADS, hworker_main, "redisbench",
                      err) != 0)
        return rl_limiter_free(lim), -1;
    rl_limiter_free(lim);
    for (int a = 0; a < 2; a++)
        if (h[0].adm[a] < EDGE_LIMIT)
            return snprintf(err, ERRLEN, "window_edge: %s admitted only %llu "
                            "of %d in phase 1 before the window ended",
                            edge_ids[a], (unsigned long long)h[0].adm[a],
                            EDGE_LIMIT), -1;
    if (h[0].last_ns >= ws + EDGE_WINDOW_NS)
        return snprintf(err, ERRLEN, "window_edge: phase 1 ran past the "
                        "window edge (machine too loaded)"), -1;
    edge_emit(o, h, ws);
    if (h[0].fb + h[1].fb != 0)
        return snprintf(err, ERRLEN, "window_edge: %llu fallback results",
                        (unsigned long long)(h[0].fb + h[1].fb)), -1;
    return 0;
}
