/*
 * redisutil.c -- see redisutil.h.
 */
#include "redisutil.h"
#include "benchutil.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

redisReply *bcmd(redisContext *c, char *err, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        snprintf(err, ERRLEN, "redis (%s): %s", fmt, r ? r->str : c->errstr);
    if (r && r->type == REDIS_REPLY_ERROR)
        freeReplyObject(r), r = NULL;
    return r;
}

int bcmd_done(redisReply *r)
{
    if (r == NULL)
        return -1;
    freeReplyObject(r);
    return 0;
}

int info_str(redisContext *c, const char *section, const char *key,
             char *out, size_t outlen, char *err)
{
    redisReply *r = bcmd(c, err, "INFO %s", section);
    size_t klen = strlen(key);
    const char *p;

    if (r == NULL)
        return -1;
    out[0] = '\0';
    if (r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return snprintf(err, ERRLEN, "INFO %s: not a string", section), -1;
    }
    for (p = r->str; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
            size_t n = strcspn(p + klen + 1, "\r\n");
            if (n >= outlen)
                n = outlen - 1;
            memcpy(out, p + klen + 1, n);
            out[n] = '\0';
            break;
        }
    }
    freeReplyObject(r);
    return 0;
}

int info_num(redisContext *c, const char *section, const char *key,
             double *v, char *err)
{
    char buf[256];

    if (info_str(c, section, key, buf, sizeof buf, err) != 0)
        return -1;
    if (buf[0] == '\0')
        return snprintf(err, ERRLEN, "INFO %s has no %s", section, key), -1;
    *v = strtod(buf, NULL);
    return 0;
}

double kv_num(const char *line, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = line; p && *p;
         p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == '=')
            return strtod(p + n + 1, NULL);
    return 0;
}

int used_memory_settled(redisContext *c, double *v, char *err)
{
    double last = -1, cur = 0;
    int same = 0;

    for (int i = 0; i < 100 && same < 3; i++) {
        if (info_num(c, "memory", "used_memory", &cur, err))
            return -1;
        same = cur == last ? same + 1 : 0;
        last = cur;
        if (same < 3)
            nanosleep(&(struct timespec){0, 150000000}, NULL);
    }
    *v = cur;
    return 0;
}

/* Polls INFO <section> <key> every 10 ms, at most `tries` times, until it
 * is at most `most`: 0, or -1 with err ("<what> after <tries * 10> ms"). */
static int info_below(redisContext *c, const char *section, const char *key,
                      double most, int tries, const char *what, char *err)
{
    double v = most + 1;

    for (int i = 0; i < tries && v > most; i++) {
        if (info_num(c, section, key, &v, err))
            return -1;
        if (v > most)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (v > most)
        return snprintf(err, ERRLEN, "%g %s after %d ms", v, what,
                        tries * 10), -1;
    return 0;
}

int clients_wait(redisContext *c, double n, char *err)
{
    return info_below(c, "clients", "connected_clients", n, 500,
                      "clients still connected", err);
}

int flushall_wait(redisContext *c, char *err)
{
    return bcmd_ok(c, err, "FLUSHALL SYNC") ||
           info_below(c, "memory", "lazyfree_pending_objects", 0, 1000,
                      "objects still pending lazyfree", err) ? -1 : 0;
}

int scan_keys(redisContext *c, int count,
              int (*fn)(redisContext *c, const redisReply *key, void *arg,
                        char *err),
              void *arg, char *err)
{
    char cursor[32] = "0";
    int more = 0;

    do {
        redisReply *r = bcmd(c, err, "SCAN %s COUNT %d", cursor, count);
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            return snprintf(err, ERRLEN, "SCAN: unexpected reply"), -1;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements && more == 0; i++)
            more = fn(c, r->element[1]->element[i], arg, err);
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && more == 0);
    return more < 0 ? -1 : 0;
}

/* ---- the timed load ---------------------------------------------------- */

/* One call's outcome for the requests it decided, when phase 1 held
 * throughout. */
static void tp_count(tp_sums *w, const rl_result *res, uint64_t ns, int rc,
                     const char *what, rl_limiter *lim)
{
    w->calls++;
    if (rc != RL_OK) {
        if (w->errors++ == 0)
            set_err(w->first_err, what, rc, errtext(lim));
        return;
    }
    hist_add(&w->all, ns);
    w->fallback += (res->flags & RL_FLAG_FALLBACK) != 0;
    w->degraded += (res->flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN |
                                  RL_FLAG_FAIL_CLOSED)) != 0;
    w->denied += !res->allowed;
    w->local += res->allowed && (res->flags & RL_FLAG_FALLBACK);
}

/* The next client id, and whether it came from the hot pool. */
static unsigned long long tp_draw(tp_run *r, uint64_t *rng, int *hot)
{
    uint64_t x = splitmix64(rng);
    int cur = r->hot ? atomic_load(&r->cur) : -1;

    *hot = cur >= 0 && (x & 1) && r->hot[cur].n > 0;
    if (*hot)
        return r->hot[cur].id[((x >> 32) * r->hot[cur].n) >> 32];
    return ((x >> 32) * r->nkeys) >> 32;
}

/* The next client id of worker i (ULLONG_MAX: no ticket left): with
 * r->total a ticket's (the ticket, or drawn, or the ticket % nkeys), else
 * drawn (tp_draw()) or, nkeys 0, the worker's own. */
static unsigned long long tp_id(tp_run *r, int i, uint64_t *rng, int *hot)
{
    unsigned long long t = r->total ? atomic_fetch_add(&r->next, 1) : 0;

    if (r->total && t >= r->total)
        return ULLONG_MAX;
    if (r->nkeys == 0)
        return r->total ? t : (unsigned long long)i;
    return r->total && !r->random ? t % r->nkeys : tp_draw(r, rng, hot);
}

static int tp_going(tp_run *r)
{
    return atomic_load(&r->phase) < 2 && !(r->stop && atomic_load(r->stop));
}

/* A worker: per_call requests a call (rl_check_many() of them when more
 * than one; else rl_check() or rl_allow()), timed and, in phase 1,
 * counted. */
static void *tp_main(void *arg)
{
    struct tp_arg *a = arg;
    tp_run *r = &a->l->run;
    tp_sums *w = &a->l->w[a->i];
    int n = r->per_call > 1 ? r->per_call : 1, codes[TP_MAX_PER_CALL];
    int hot[TP_MAX_PER_CALL] = {0};
    char key[TP_MAX_PER_CALL][40];
    rl_request req[TP_MAX_PER_CALL];
    rl_result res[TP_MAX_PER_CALL];

    while (tp_going(r)) {
        int ph = atomic_load(&r->phase);
        uint64_t t0;

        for (int i = 0; i < n; i++) {
            unsigned long long id = r->key ? 0
                                    : tp_id(r, a->i, &a->rng, &hot[i]);
            if (id == ULLONG_MAX)
                return NULL;
            snprintf(key[i], sizeof key[i], "user:%0*llu", r->key_digits, id);
            req[i] = (rl_request)RL_REQUEST_INIT;
            req[i].user = (r->key ? r->key : key[i]) + 5; /* past "user:" */
            req[i].cost = 1;
            res[i] = (rl_result)RL_RESULT_INIT;
        }
        t0 = now_ns();
        if (n > 1)
            rl_check_many(r->lim, req, res, codes, (size_t)n);
        else
            codes[0] = r->check ? rl_check(r->lim, req, res)
                       : rl_allow(r->lim, r->key ? r->key : key[0],
                                  r->rule ? r->rule : "bench", 1, res);
        t0 = now_ns() - t0;
        ph = ph == 1 && atomic_load(&r->phase) == 1;
        for (int i = 0; i < n && ph; i++) {
            w->hot_calls += (unsigned long long)hot[i];
            tp_count(w, &res[i], t0, codes[i],
                     n > 1 ? "rl_check_many" : "rl_allow", r->lim);
            if (codes[i] != RL_OK && r->total) /* a job ends at an error */
                atomic_store(&r->next, r->total);
        }
    }
    return NULL;
}

int tp_load_start(tp_load *l, int threads, char *err)
{
    l->started = 0;
    if (threads > TP_MAX_THREADS || l->run.per_call > TP_MAX_PER_CALL)
        return snprintf(err, ERRLEN, "too many threads or requests"), -1;
    if ((l->w = calloc((size_t)threads, sizeof *l->w)) == NULL)
        return snprintf(err, ERRLEN, "out of memory"), -1;
    for (int i = 0; i < threads; i++) {
        l->arg[i] = (struct tp_arg){.l = l, .i = i,
                                    .rng = 0xBE4C0000ULL + (uint64_t)i * 7919};
        if (pthread_create(&l->tid[i], NULL, tp_main, &l->arg[i]) != 0)
            return snprintf(err, ERRLEN, "pthread_create failed"), -1;
        l->started++;
    }
    return 0;
}

void tp_load_stop(tp_load *l, tp_sums *sum)
{
    if (l->run.total == 0) /* a job's workers end with its tickets */
        atomic_store(&l->run.phase, 2);
    for (int i = 0; i < l->started; i++)
        pthread_join(l->tid[i], NULL);
    for (int i = 0; i < l->started; i++) {
        tp_sums *w = &l->w[i];
        if (w->errors && sum->errors == 0)
            memcpy(sum->first_err, w->first_err, ERRLEN);
        sum->calls += w->calls;
        sum->hot_calls += w->hot_calls;
        sum->fallback += w->fallback;
        sum->degraded += w->degraded;
        sum->denied += w->denied;
        sum->errors += w->errors;
        sum->local += w->local;
        hist_merge(&sum->all, &w->all);
    }
    l->started = 0;
    free(l->w);
    l->w = NULL;
}

int tp_load_for(tp_load *l, int threads, long ms, tp_sums *sum, char *err)
{
    uint64_t end = now_ns() + (uint64_t)ms * 1000000ULL;
    int rc = tp_load_start(l, threads, err);

    atomic_store(&l->run.phase, 1);
    while (rc == 0 && now_ns() < end && tp_going(&l->run))
        bench_sleep_ms(1);
    tp_load_stop(l, sum);
    return rc;
}

/* A job is a load of j->total tickets, counted from the start. */
int run_job(job *j, int n, job_result *jr, const char *prog, char *err)
{
    tp_load l = {.run = {.lim = j->lim, .rule = j->rule_id, .total = j->total,
                         .nkeys = j->nkeys, .random = j->random,
                         .stop = j->stop, .phase = 1}};
    tp_sums sum = {0};
    uint64_t t0 = now_ns();
    int rc = tp_load_start(&l, n < JOB_THREADS ? n : JOB_THREADS, err);

    (void)prog;
    tp_load_stop(&l, &sum);
    jr->seconds = (double)(now_ns() - t0) / 1e9;
    jr->fallback += sum.fallback;
    jr->degraded += sum.degraded;
    jr->denied += sum.denied;
    if (rc == 0 && sum.errors)
        rc = (memcpy(err, sum.first_err, ERRLEN), -1);
    if (rc == 0 && j->stop && atomic_load(j->stop))
        rc = (snprintf(err, ERRLEN, "interrupted"), -1);
    return rc;
}

cpu_use cpu_diff(const cpu_snap *a, const cpu_snap *b)
{
    double w = (double)(b->wall - a->wall) / 1e9;
    cpu_use u;

    if (w <= 0)
        w = 1e-9;
    u.client = (b->self - a->self) / w;
    u.redis = (b->redis - a->redis) / w;
    u.replica = (b->replica - a->replica) / w;
    u.other = (b->busy - a->busy) / w - u.client - u.redis - u.replica;
    if (u.other < 0)
        u.other = 0; /* /proc/stat ticks are coarse */
    u.steal = (b->steal - a->steal) / w;
    u.preempt = (b->preempt - a->preempt) / w;
    u.csw = (b->csw - a->csw) / w;
    return u;
}
