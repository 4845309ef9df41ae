/*
 * redisbench_accuracy.c -- group 5 of redisbench: accuracy, how many checks
 * each algorithm admits when 8 processes x 4 threads, each process with its
 * own limiter, hammer one key for --accuracy-seconds, beside what the
 * algorithm allows over the measured span (CLOCK_REALTIME, the clock Redis
 * TIME reads): several processes share state only through Redis, which is
 * what the figure checks.
 */
#include "redisbench.h"
/* ---- accuracy (group 5): 8 processes x 4 threads ------------------------------ */

static const char *const acc_rule_ids[4] = {"sw", "tb", "fw", "gc"};

static void futex_wait_shared(_Atomic int *w, int val)
{
    syscall(SYS_futex, (int *)w, FUTEX_WAIT, val, NULL, NULL, 0);
}

static void futex_wake_shared(_Atomic int *w)
{
    syscall(SYS_futex, (int *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

typedef struct acc_thread {
    acc_shared *sh;
    rl_limiter *lim;
    acc_slot *slot;
} acc_thread;

static void *acc_thread_main(void *arg)
{
    acc_thread *t = arg;
    acc_shared *sh = t->sh;
    acc_slot *s = t->slot;

    while (atomic_load(&sh->go) == 0)
        futex_wait_shared(&sh->go, 0);
    if (atomic_load(&sh->go) != 1)
        return NULL;
    sleep_until_rt(sh->start_ns);
    for (;;) {
        for (int a = 0; a < 4; a++) {
            rl_result res = RL_RESULT_INIT;
            int64_t t0 = rt_ns();
            int rc;

            if (t0 >= sh->stop_ns)
                return NULL;
            if (s->first_ns == 0)
                s->first_ns = t0;
            rc = rl_allow(t->lim, sh->key, acc_rule_ids[a], 1, &res);
            s->last_ns = rt_ns();
            if (rc != RL_OK) {
                snprintf(s->err, sizeof s->err, "rl_allow: %s (%d)",
                         errtext(t->lim), rc);
                s->rc = rc;
                return NULL;
            }
            s->checks[a]++;
            if (res.allowed)
                s->admitted[a]++;
            if (res.flags & RL_FLAG_FALLBACK)
                s->fallback++;
        }
    }
}

static void acc_child(const options *o, acc_shared *sh, int p)
{
    char rules[1100], r[4][256], err[ERRLEN];
    rl_limiter *lim = NULL;
    acc_thread at[ACC_THREADS];
    pthread_t tid[ACC_THREADS];
    int started = 0;

    for (int a = 0; a < 4; a++) /* a burst for token bucket and GCRA */
        one_rule(r[a], sizeof r[a], acc_rule_ids[a], a, ACC_LIMIT,
                 ACC_WINDOW_MS / 1000, a % 2 ? ACC_BURST : 0);
    snprintf(rules, sizeof rules, "{\"rules\":[%s,%s,%s,%s]}", r[0], r[1],
             r[2], r[3]);
    if (make_limiter(o, rules, &lim, err) != RL_OK) {
        acc_slot *s = &sh->slot[p * ACC_THREADS];
        snprintf(s->err, sizeof s->err, "%.190s", err);
        s->rc = -1;
        atomic_fetch_add(&sh->ready, 1);
        _exit(1);
    }
    for (int t = 0; t < ACC_THREADS; t++) {
        at[t] = (acc_thread){sh, lim, &sh->slot[p * ACC_THREADS + t]};
        if (pthread_create(&tid[t], NULL, acc_thread_main, &at[t]) != 0) {
            at[t].slot->rc = -1;
            snprintf(at[t].slot->err, sizeof at[t].slot->err,
                     "pthread_create failed");
            break;
        }
        started++;
    }
    atomic_fetch_add(&sh->ready, 1);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    rl_limiter_free(lim);
    _exit(started == ACC_THREADS ? 0 : 1);
}

/* Reaps the processes; -1 with err naming the first that failed. */
static int acc_reap(acc *ac, char *err)
{
    int dead = 0;

    for (int i = 0; i < ac->nproc; i++) {
        int status = 0;
        while (waitpid(ac->pid[i], &status, 0) < 0 && errno == EINTR)
            ;
        if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && !dead++)
            snprintf(err, ERRLEN, "accuracy process %d failed (status %d)",
                     i, status);
    }
    ac->nproc = 0;
    return dead ? -1 : 0;
}

void acc_stop(acc *ac)
{
    char err[ERRLEN];

    atomic_store(&ac->sh->go, 2);
    futex_wake_shared(&ac->sh->go);
    acc_reap(ac, err);
    munmap(ac->sh, sizeof *ac->sh);
    ac->sh = NULL;
}

/* Fork the processes (while this one has no other thread) and let them
 * connect; they wait for acc_run(). */
int acc_prepare(const options *o, acc *ac, char *err)
{
    memset(ac, 0, sizeof *ac);
    ac->sh = mmap(NULL, sizeof *ac->sh, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ac->sh == MAP_FAILED) {
        ac->sh = NULL;
        return snprintf(err, ERRLEN, "mmap: %s", strerror(errno)), -1;
    }
    memset(ac->sh, 0, sizeof *ac->sh);
    snprintf(ac->sh->key, sizeof ac->sh->key, "acc:%ld:%lld", (long)getpid(),
             (long long)(rt_ns() / 1000000));
    fflush(NULL);
    for (int p = 0; p < ACC_PROCS; p++) {
        pid_t pid = fork();
        if (pid < 0) {
            snprintf(err, ERRLEN, "fork: %s", strerror(errno));
            acc_stop(ac);
            return -1;
        }
        if (pid == 0)
            acc_child(o, ac->sh, p);
        ac->pid[ac->nproc++] = pid;
    }
    for (int i = 0; i < 2000 && atomic_load(&ac->sh->ready) < ACC_PROCS; i++)
        sleep_s(0.005);
    for (int i = 0; i < ACC_PROCS * ACC_THREADS; i++)
        if (ac->sh->slot[i].rc != 0) {
            snprintf(err, ERRLEN, "accuracy process: %s", ac->sh->slot[i].err);
            acc_stop(ac);
            return -1;
        }
    if (atomic_load(&ac->sh->ready) < ACC_PROCS) {
        snprintf(err, ERRLEN, "accuracy processes not ready after 10 s");
        acc_stop(ac);
        return -1;
    }
    return 0;
}

/* What the accuracy threads counted, summed, and the measured span
 * [first call, last reply] (CLOCK_REALTIME ns). */
typedef struct acc_sum {
    unsigned long long adm[4], chk[4], fb;
    int64_t first, last;
} acc_sum;

/* Starts the waiting processes ACC_START_OFFSET_MS into a window, so the
 * sliding window's first (full) window costs little against limit x span
 * / window, for o->acc_seconds. */
static void acc_go(const options *o, acc_shared *sh)
{
    int64_t w = ACC_WINDOW_MS * 1000000LL, now = rt_ns(), start;

    start = (now / w) * w + ACC_START_OFFSET_MS * 1000000LL;
    if (start < now + 20000000LL)
        start += w;
    sh->start_ns = start;
    sh->stop_ns = start + (int64_t)(o->acc_seconds * 1e9);
    atomic_store(&sh->go, 1);
    futex_wake_shared(&sh->go);
}

static int acc_total(const acc_shared *sh, acc_sum *t, char *err)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < ACC_PROCS * ACC_THREADS; i++) {
        const acc_slot *s = &sh->slot[i];
        if (s->rc != 0) {
            snprintf(err, ERRLEN, "accuracy thread: %s", s->err);
            return -1;
        }
        for (int a = 0; a < 4; a++) {
            t->adm[a] += s->admitted[a];
            t->chk[a] += s->checks[a];
        }
        t->fb += s->fallback;
        if (s->first_ns && (t->first == 0 || s->first_ns < t->first))
            t->first = s->first_ns;
        if (s->last_ns > t->last)
            t->last = s->last_ns;
    }
    if (t->first == 0 || t->last <= t->first)
        return snprintf(err, ERRLEN, "accuracy: no checks ran"), -1;
    return 0;
}

/* What algorithm a allows over the span (span_s seconds, starting s0 into
 * a window, touching `windows` windows): f's reference(s). */
static void acc_allowed(figure *f, int a, double span, double s0,
                        long long windows)
{
    double w = (double)(ACC_WINDOW_MS * 1000000LL);
    double rate = (double)ACC_LIMIT / ((double)ACC_WINDOW_MS / 1000.0);

    f->nrefs = 1;
    switch (a) {
    case 1:
    case 3: /* token bucket, GCRA: full bucket, then the refill rate */
        f->ref[0] = ACC_BURST + span * rate;
        f->ref_name[0] = "burst_plus_span_x_rate";
        break;
    case 2:
        f->ref[0] = (double)ACC_LIMIT * (double)windows;
        f->ref_name[0] = "limit_x_windows_touched";
        break;
    default:
        /* Hammered from empty state, a sliding window counter admits a
         * full limit at once, then limit per window as the previous
         * window's weight slides out: over a run that starts s0 into a
         * window that is limit x max(1, (span + s0) / window).  The plain
         * limit x span / window is the second reference; the two agree to
         * s0 / span (0.8 % in the default 30 s run). */
        f->ref[0] = (double)ACC_LIMIT * (span + s0) * 1e9 / w;
        if (f->ref[0] < ACC_LIMIT)
            f->ref[0] = ACC_LIMIT;
        f->ref_name[0] = "limit_x_max1_span_plus_s0_over_window";
        f->nrefs = 2;
        f->ref[1] = (double)ACC_LIMIT * span * 1e9 / w;
        f->ref_name[1] = "limit_x_span_over_window";
    }
}

static void acc_emit(const options *o, const acc_sum *t)
{
    int64_t w = ACC_WINDOW_MS * 1000000LL;
    double span = (double)(t->last - t->first) / 1e9;
    double s0 = (double)(t->first % w) / 1e9;
    long long windows = (long long)(t->last / w - t->first / w + 1);

    for (int a = 0; a < 4; a++) {
        figure f = {0};
        char name[48];

        snprintf(name, sizeof name, "accuracy_%s", algo_names[a]);
        f = (figure){.name = name, .value = (double)t->adm[a],
                      .unit = "admitted"};
        acc_allowed(&f, a, span, s0, windows);
        xnum(&f, "over", (double)t->adm[a] - f.ref[0]);
        if (a == 1 || a == 3)
            xnum(&f, "over_max", 1);
        if (a == 2)
            xnum(&f, "windows", (double)windows);
        if (a == 0)
            xnum(&f, "tolerance", ACC_TOLERANCE);
        xnum(&f, "span_s", span);
        xnum(&f, "start_offset_s", s0);
        xnum(&f, "checks", (double)t->chk[a]);
        xnum(&f, "processes", ACC_PROCS);
        xnum(&f, "threads_per_process", ACC_THREADS);
        xnum(&f, "fallback", (double)t->fb);
        emit(o, &f);
    }
}

int acc_run(const options *o, acc *ac, char *err)
{
    acc_sum t;

    acc_go(o, ac->sh);
    if (acc_reap(ac, err) || acc_total(ac->sh, &t, err))
        return -1;
    acc_emit(o, &t);
    if (t.fb != 0)
        return snprintf(err, ERRLEN, "accuracy: %llu results came from the "
                        "fallback; the figures above are not valid", t.fb),
               -1;
    return 0;
}
