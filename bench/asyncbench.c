/*
 * asyncbench.c -- the asynchronous checks against a real Redis, beside the
 * library's other ways of keeping 64 checks in flight and beside
 * rate-limiter-flexible, all in one run against one redis-server
 * (bench/redisbench.sh starts a private one).  Method and figures: docs/BENCHMARKS.md, "How each bench measures".
 */
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmodes.h"
#include "benchutil.h"
#include "ratelimit.h"
#include "redisutil.h"

#define INFLIGHT 64
#define MANY_THREADS 2
#define MANY_BATCH 32
#define BLOCKING_THREADS 64
#define KEY_LEN 24

static const char *rules =
    "[{\"rule_id\":\"b\",\"dimension\":\"user\",\"limit\":1000000000,"
    "\"window_seconds\":3600}]";

#define ROUNDS_MAX 15

typedef struct options {
    int port, json, rounds, blocking; /* blocking: rl_check's rows only */
    double seconds;
    unsigned long long keys;
    const char *peer;           /* path of peer.js, or NULL: not run      */
} options;

/* What one measurement gives. */
typedef struct result {
    double checks_per_s, p50_us, p99_us, client_us, server_us;
    double csw;                 /* this process's context switches a check */
    double io_us;               /* the I/O threads' ("rl-io") CPU a check */
    uint64_t checks, errors, denied;
} result;

static const text_layout layout = {22, 12, 1, 10, 22, 3};

static rl_limiter *open_limiter(const options *o, char *err)
{
    char uri[64];

    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/0", o->port);
    return bench_limiter((const char *const[]){"store", uri, "rules", rules,
                                               "timeout_ms", "1000", NULL},
                         err);
}

static void key_of(uint64_t *rng, const options *o, char *buf)
{
    snprintf(buf, KEY_LEN, "%llu",
             (unsigned long long)pick(rng, o->keys));
}

/* CPU seconds so far: this process's, and the server's (0 when it cannot
 * be read); this process's context switches (voluntary and not); the CPU
 * seconds of the library's I/O threads (RIO_THREAD_NAME, from schedstat),
 * the loop's share of client. */
typedef struct meter {
    double client, server, csw, io;
} meter;

static double io_seconds(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    double s = 0;

    while (d && (e = readdir(d))) {
        char p[300], comm[32] = "";
        unsigned long long ns = 0;
        FILE *f;
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
        if ((f = fopen(p, "r")) && fgets(comm, sizeof comm, f) &&
            strcmp(comm, "rl-io\n") == 0) {
            fclose(f);
            snprintf(p, sizeof p, "/proc/self/task/%s/schedstat", e->d_name);
            f = fopen(p, "r");
            s += f && fscanf(f, "%llu", &ns) == 1 ? (double)ns / 1e9 : 0;
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return s;
}

static meter meter_now(const options *o)
{
    struct rusage ru;
    meter m = {.io = io_seconds()};
    redisContext *c = redisConnect("127.0.0.1", o->port);
    double u = 0, s = 0;
    char err[ERRLEN];

    if (c && !c->err && info_num(c, "cpu", "used_cpu_user", &u, err) == 0 &&
        info_num(c, "cpu", "used_cpu_sys", &s, err) == 0)
        m.server = u + s;
    if (c)
        redisFree(c);
    getrusage(RUSAGE_SELF, &ru);
    m.client = rusage_seconds(&ru);
    m.csw = (double)(ru.ru_nvcsw + ru.ru_nivcsw);
    return m;
}

static void finish(const options *o, result *r, const hist *h, uint64_t ns,
                   meter m0)
{
    meter m = meter_now(o);

    r->checks = h->n;
    r->client_us = h->n ? (m.client - m0.client) * 1e6 / (double)h->n : 0;
    r->server_us = h->n ? (m.server - m0.server) * 1e6 / (double)h->n : 0;
    r->csw = h->n ? (m.csw - m0.csw) / (double)h->n : 0;
    r->io_us = h->n ? (m.io - m0.io) * 1e6 / (double)h->n : 0;
    r->checks_per_s = ns ? (double)h->n * 1e9 / (double)ns : 0;
    r->p50_us = hist_pct(h, 0.50) / 1000.0;
    r->p99_us = hist_pct(h, 0.99) / 1000.0;
}

/* ---- one event-loop thread, 64 checks in flight --------------------------- */

typedef struct aslot {
    rl_async_check chk;
    rl_result res;
    rl_request req;
    char key[KEY_LEN];
    uint64_t t0;
    struct arun *run;
} aslot;

typedef struct arun {
    rl_async *a;
    const options *o;
    uint64_t rng;
    int stop;
    hist h;
    uint64_t errors, denied;
    aslot slot[INFLIGHT];
} arun;

static void start_one(aslot *s)
{
    key_of(&s->run->rng, s->run->o, s->key);
    s->t0 = now_ns();
    if (rl_check_start(s->run->a, &s->req, &s->chk) != RL_OK)
        s->run->errors++;
}

static void answered(rl_async_check *chk, int rc)
{
    aslot *s = chk->data;
    arun *r = s->run;

    hist_add(&r->h, now_ns() - s->t0);
    if (rc != RL_OK)
        r->errors++;
    else
        r->denied += !s->res.allowed;
    if (!r->stop)
        start_one(s);
}

static int run_async(const options *o, rl_limiter *lim, result *out,
                     char *err)
{
    static arun r;
    uint64_t start, end;
    meter m0 = meter_now(o);
    int rc;

    memset(&r, 0, sizeof r);
    r.o = o;
    r.rng = 0x5eed;
    if ((rc = rl_async_new(lim, INFLIGHT, &r.a)) != RL_OK)
        return set_err(err, "rl_async_new", rc, errtext(lim)), -1;
    for (int i = 0; i < INFLIGHT; i++) {
        aslot *s = &r.slot[i];
        s->run = &r;
        s->chk = (rl_async_check)RL_ASYNC_CHECK_INIT;
        s->chk.cb = answered;
        s->chk.data = s;
        s->res = (rl_result)RL_RESULT_INIT;
        s->chk.result = &s->res;
        s->req = (rl_request){.size = sizeof(rl_request), .user = s->key, .cost = 1};
        start_one(s);
    }
    start = now_ns();
    end = start + (uint64_t)(o->seconds * 1e9);
    while (now_ns() < end) {
        struct pollfd p = {.fd = rl_async_fd(r.a), .events = POLLIN};
        poll(&p, 1, 100);
        rl_async_process(r.a);
    }
    r.stop = 1;
    finish(o, out, &r.h, now_ns() - start, m0);
    while (rl_async_in_flight(r.a)) { /* the last ones, not counted */
        struct pollfd p = {.fd = rl_async_fd(r.a), .events = POLLIN};
        poll(&p, 1, 100);
        rl_async_process(r.a);
    }
    out->errors = r.errors;
    out->denied = r.denied;
    rl_async_free(r.a);
    return 0;
}

/* ---- threads: rl_check_many of 32, or rl_check (redisutil's load) ------- */

static int run_threads(const options *o, rl_limiter *lim, int nthreads,
                       int batch, result *out, char *err)
{
    static tp_load l;
    static tp_sums sum;
    meter m0 = meter_now(o);
    uint64_t start = now_ns();
    int rc;

    memset(&l, 0, sizeof l);
    memset(&sum, 0, sizeof sum);
    l.run = (tp_run){.lim = lim, .nkeys = o->keys, .check = !batch,
                     .per_call = batch ? batch : 1};
    rc = tp_load_for(&l, nthreads, (long)(o->seconds * 1000), &sum, err);
    finish(o, out, &sum.all, now_ns() - start, m0);
    out->errors += sum.errors;
    out->denied += sum.denied;
    return rc;
}

/* ---- the peer -------------------------------------------------------------- */

/* The number of `"name":"<name>","value":<v>` in a peer.js --json line. */
static int peer_value(const char *line, const char *name, double *v)
{
    char pat[96];
    const char *p;

    snprintf(pat, sizeof pat, "\"name\":\"%s\",\"value\":", name);
    if (!(p = strstr(line, pat)))
        return 0;
    *v = strtod(p + strlen(pat), NULL);
    return 1;
}

static int run_peer(const options *o, int inflight, result *out, char *err)
{
    char cmd[1024], line[1024];
    FILE *f;
    int got = 0;
    double client = 0, server = 0; /* cores */

    snprintf(cmd, sizeof cmd, "node '%s' --port %d --seconds %g --keys %llu "
             "--mem-keys 1000 --concurrency %d --json --force", o->peer,
             o->port, o->seconds, o->keys, inflight);
    if (!(f = popen(cmd, "r")))
        return set_err(err, "popen node", -1, cmd), -1;
    while (fgets(line, sizeof line, f)) {
        got += peer_value(line, "peer_rlf_checks_per_s", &out->checks_per_s);
        got += peer_value(line, "peer_rlf_p50_us", &out->p50_us);
        got += peer_value(line, "peer_rlf_p99_us", &out->p99_us);
        peer_value(line, "peer_rlf_client_cpu_share", &client);
        peer_value(line, "peer_rlf_server_cpu_share", &server);
    }
    if (out->checks_per_s > 0) {
        out->client_us = client * 1e6 / out->checks_per_s;
        out->server_us = server * 1e6 / out->checks_per_s;
    }
    if (pclose(f) != 0 || got < 3)
        return set_err(err, "peer.js", -1, "failed or gave no figures"), -1;
    return 0;
}

/* ---- output ----------------------------------------------------------------- */

/* name (checks/s) and name_p99 (us), each beside refs[0..nrefs), nrefs
 * <= 2. */
static void emit_pair(const options *o, const char *name, const result *r,
                      const result *refs, const char *const *ref_names,
                      int nrefs)
{
    figure f = {.name = name, .value = r->checks_per_s, .unit = "checks/s",
                .nrefs = nrefs};
    char pname[64];

    for (int i = 0; i < nrefs; i++) {
        f.ref[i] = refs[i].checks_per_s;
        f.ref_name[i] = ref_names[i];
    }
    xnum(&f, "checks", (double)r->checks);
    xnum(&f, "errors", (double)r->errors);
    xnum(&f, "denied", (double)r->denied);
    if (r->client_us > 0) {
        xnum(&f, "client_us", r->client_us);
        xnum(&f, "server_us", r->server_us);
    }
    if (r->csw > 0)
        xnum(&f, "csw", r->csw);
    if (r->io_us > 0)
        xnum(&f, "io_us", r->io_us);
    emit_figure(&f, o->json, &layout);
    snprintf(pname, sizeof pname, "%s_p99", name);
    f = (figure){.name = pname, .value = r->p99_us, .unit = "us",
                 .nrefs = nrefs};
    for (int i = 0; i < nrefs; i++) {
        f.ref[i] = refs[i].p99_us;
        f.ref_name[i] = ref_names[i];
    }
    xnum(&f, "p50_us", r->p50_us);
    emit_figure(&f, o->json, &layout);
    if (r->client_us <= 0)
        return;
    snprintf(pname, sizeof pname, "%s_cpu", name); /* client + server */
    f = (figure){.name = pname, .value = r->client_us + r->server_us,
                 .unit = "us/check", .nrefs = nrefs};
    for (int i = 0; i < nrefs; i++) {
        f.ref[i] = refs[i].client_us + refs[i].server_us;
        f.ref_name[i] = ref_names[i];
    }
    emit_figure(&f, o->json, &layout);
}

#define OPT_AT(field) offsetof(options, field)

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    {"--port", BENCH_OPT_INT, OPT_AT(port), 1, 65535, -1, -1, NULL,
     "Redis port on 127.0.0.1 (required)"},
    {"--seconds", BENCH_OPT_REAL, OPT_AT(seconds), 0.1, 3600, 10, 10, NULL,
     "per measurement"},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e12, 100000, 100000, NULL,
     "key space"},
    {"--rounds", BENCH_OPT_INT, OPT_AT(rounds), 1, ROUNDS_MAX, 1, 1, NULL,
     "each measurement R times in turn, medians"},
    {"--blocking", BENCH_OPT_FLAG, OPT_AT(blocking), .help =
     "the rl_check rows (and the peer's) only"},
    {"--peer", BENCH_OPT_NAME, OPT_AT(peer), .def = -1, .help =
     "PATH of peer.js: run it (needs node and its npm packages)"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0],
    .prog = "redisbench async",
    .about = "One event-loop thread with 64 asynchronous checks in flight "
             "(checks/s, p99) beside\nrl_check_many (2 threads x 32), 64 "
             "threads of rl_check and, with --peer,\nrate-limiter-flexible "
             "(64 in flight, one Node loop), in this order, against the\n"
             "Redis on 127.0.0.1:P (bench/redisbench.sh starts a private "
             "one; the peer\nflushes it)."};

enum { M_ASYNC, M_MANY, M_BLK, M_ONE, M_PEER, M_PEER1, M_COUNT };

/* One round: each of ours on one limiter, then the peer's two. */
static int run_round(const options *o, result *m, char *err)
{
    rl_limiter *lim = open_limiter(o, err);
    int rc = !lim ||
             (!o->blocking && (run_async(o, lim, &m[M_ASYNC], err) ||
              run_threads(o, lim, MANY_THREADS, MANY_BATCH, &m[M_MANY], err))) ||
             run_threads(o, lim, BLOCKING_THREADS, 0, &m[M_BLK], err) ||
             run_threads(o, lim, 1, 0, &m[M_ONE], err);

    rl_limiter_free(lim);
    if (rc)
        return -1;
    if (o->peer && (run_peer(o, INFLIGHT, &m[M_PEER], err) ||
                    run_peer(o, 1, &m[M_PEER1], err)))
        return 1;
    return 0;
}

/* med[k] = the rounds' medians of m[.][k], field by field (counts
 * summed). */
static void medians(result m[][M_COUNT], int rounds, result *med)
{
    for (int k = 0; k < M_COUNT; k++) {
        double v[7][ROUNDS_MAX];
        for (int r = 0; r < rounds; r++) {
            v[0][r] = m[r][k].checks_per_s;
            v[1][r] = m[r][k].p50_us;
            v[2][r] = m[r][k].p99_us;
            v[3][r] = m[r][k].client_us;
            v[4][r] = m[r][k].server_us;
            v[5][r] = m[r][k].csw;
            v[6][r] = m[r][k].io_us;
            med[k].checks += m[r][k].checks;
            med[k].errors += m[r][k].errors;
            med[k].denied += m[r][k].denied;
        }
        med[k].checks_per_s = median_of(v[0], (size_t)rounds);
        med[k].p50_us = median_of(v[1], (size_t)rounds);
        med[k].p99_us = median_of(v[2], (size_t)rounds);
        med[k].client_us = median_of(v[3], (size_t)rounds);
        med[k].server_us = median_of(v[4], (size_t)rounds);
        med[k].csw = median_of(v[5], (size_t)rounds);
        med[k].io_us = median_of(v[6], (size_t)rounds);
    }
}

int async_main(int argc, char **argv)
{
    static result m[ROUNDS_MAX][M_COUNT];
    options o = {0};
    result med[M_COUNT] = {{0}};
    char err[ERRLEN] = "";
    int rc = bench_opt_args(argc, argv, &table, &o), with_peer;

    if (rc || o.port == 0) {
        if (rc == 0)
            fprintf(stderr, "redisbench async: --port is required\n");
        return rc == 1 ? 0 : 2;
    }
    memset(m, 0, sizeof m);
    for (int r = 0; r < o.rounds && rc == 0; r++)
        if ((rc = run_round(&o, m[r], err)) < 0) {
            fprintf(stderr, "asyncbench: %s\n", err);
            return 1;
        }
    if (rc)
        fprintf(stderr, "asyncbench: %s\n", err);
    with_peer = o.peer && rc == 0;
    medians(m, o.rounds, med);
    bench_params(&table, &o, o.json);
    if (!o.json)
        print_columns(&layout);
    {   /* at most two refs per figure: the peer first, when it ran */
        result refs[2] = {med[M_PEER], med[M_MANY]};
        const char *names[2] = {"rate_limiter_flexible",
                                "rl_check_many_2x32"};
        int nrefs = with_peer + !o.blocking;
        if (!o.blocking)
            emit_pair(&o, "async_64", &med[M_ASYNC], refs + !with_peer,
                      names + !with_peer, nrefs);
        emit_pair(&o, "blocking_64", &med[M_BLK], refs + !with_peer,
                  names + !with_peer, nrefs);
        if (!o.blocking)
            emit_pair(&o, "many_2x32", &med[M_MANY], NULL, NULL, 0);
    }
    emit_pair(&o, "blocking_1", &med[M_ONE], &med[M_PEER1],
              (const char *const[]){"rate_limiter_flexible_1"}, with_peer);
    if (with_peer) {
        emit_pair(&o, "peer_rlf_64", &med[M_PEER], NULL, NULL, 0);
        emit_pair(&o, "peer_rlf_1", &med[M_PEER1], NULL, NULL, 0);
    }
    return rc || med[M_ASYNC].errors || med[M_MANY].errors ||
                   med[M_BLK].errors || med[M_ONE].errors ? 1 : 0;
}
