/*
 * redisbench_util.c -- the parts of redisbench that every group uses: clocks
 * and sleeps, the figure's output, the blocking control connection to the
 * server under test (commands, INFO commandstats, FLUSHALL and client counts,
 * the keys the library writes), CPU accounting of the client, the server and
 * the rest of the machine, limiters and rules, and a pool of threads doing a
 * fixed number of checks.
 */
#include "redisbench.h"

int64_t rt_ns(void) /* CLOCK_REALTIME: the clock Redis TIME reads */
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

volatile sig_atomic_t g_signal;
_Atomic int g_stop;

void sleep_s(double s)
{
    uint64_t end = now_ns() + (uint64_t)(s > 0 ? s * 1e9 : 0), t;

    while (g_signal == 0 && (t = now_ns()) < end) {
        t = end - t > 50000000ULL ? 50000000ULL : end - t;
        nanosleep(&(struct timespec){0, (long)t}, NULL);
    }
}

void sleep_until(clockid_t clk, int64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000LL),
                          (long)(t_ns % 1000000000LL)};

    while (clock_nanosleep(clk, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* ---- output ----------------------------------------------------------- */

const text_layout layout = {36, 12, 2, 8, 28, 3};

void emit(const options *o, const figure *f)
{
    figure g = *f;

    while (g.nextra < (int)(sizeof g.x / sizeof g.x[0]) && g.x[g.nextra].name)
        g.nextra++;
    emit_figure(&g, o->json, &layout);
}

/* ---- the control connection (hiredis, blocking) ------------------------ */

redisContext *ctl;

int cmdstat_at(redisContext *c, const char *cmd, cmdstat *cs, char *err)
{
    char key[64], buf[256];

    snprintf(key, sizeof key, "cmdstat_%s", cmd);
    if (info_str(c, "commandstats", key, buf, sizeof buf, err) != 0)
        return -1;
    cs->calls = kv_num(buf, "calls");
    cs->usec_per_call = kv_num(buf, "usec_per_call");
    cs->failed = kv_num(buf, "failed_calls");
    cs->rejected = kv_num(buf, "rejected_calls");
    return 0;
}

/* usec_per_call: the mean of the two. */
int cmdstat_script_at(redisContext *c, cmdstat *cs, char *err)
{
    cmdstat f;

    if (cmdstat_at(c, "evalsha", cs, err) || cmdstat_at(c, "fcall", &f, err))
        return -1;
    if (cs->calls + f.calls > 0)
        cs->usec_per_call = (cs->calls * cs->usec_per_call +
                             f.calls * f.usec_per_call) /
                            (cs->calls + f.calls);
    cs->calls += f.calls;
    cs->failed += f.failed;
    cs->rejected += f.rejected;
    return 0;
}

int read_replies(unsigned long long n, int type, const char *what,
                 char *err)
{
    for (unsigned long long i = 0; i < n; i++) {
        redisReply *r = NULL;
        int bad = redisGetReply(ctl, (void **)&r) != REDIS_OK;

        if (bad)
            snprintf(err, ERRLEN, "%s: %s", what, ctl->errstr);
        else if ((bad = r->type == REDIS_REPLY_ERROR ||
                        (type && r->type != type)))
            snprintf(err, ERRLEN, "%s: %s", what, r->type ==
                     REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        freeReplyObject(r);
        if (bad)
            return -1;
    }
    return 0;
}

/* The library's key for a client "user:<digits>", read back from Redis
 * (RANDOMKEY: the database holds only the library's keys at that point),
 * as a redis-benchmark template: "rl:{user:__rand_int__}<rest>".  So the
 * reference runs on keys of the library's own shape, whatever it is. */
int key_template(char *out, size_t outlen, char *err)
{
    redisReply *r = ctl_cmd(err, "RANDOMKEY");
    int n = 0, rc = -1;

    if (r == NULL)
        return -1;
    if (r->type != REDIS_REPLY_STRING)
        snprintf(err, ERRLEN, "RANDOMKEY: the library left no key");
    else if (sscanf(r->str, "rl:{user:%*[0-9]}%n", &n) != 0 || n == 0 ||
             (size_t)snprintf(out, outlen, "rl:{user:__rand_int__}%s",
                              r->str + n) >= outlen)
        snprintf(err, ERRLEN, "library key \"%.100s\": not rl:{user:<digits>}"
                 "... (or too long)", r->str);
    else
        rc = 0;
    freeReplyObject(r);
    return rc;
}

typedef struct key_sum {
    double sum, n;
    char *example;
    size_t exlen;
} key_sum;

static int key_add(redisContext *c, const redisReply *k, void *arg,
                   char *err)
{
    key_sum *ks = arg;

    (void)c, (void)err;
    ks->sum += (double)k->len;
    ks->n++;
    if (ks->example[0] == '\0')
        snprintf(ks->example, ks->exlen, "%s", k->str);
    return 0;
}

/* Mean length of every key name in the database (SCAN), and one of them. */
int key_lengths(double *mean, char *example, size_t exlen, char *err)
{
    key_sum ks = {.example = example, .exlen = exlen};

    example[0] = '\0';
    if (scan_keys(ctl, 1000, key_add, &ks, err) != 0)
        return -1;
    *mean = ks.n > 0 ? ks.sum / ks.n : 0;
    return 0;
}

long redis_pid; /* INFO server process_id: Redis runs here */
pidset server_ps; /* {redis_pid} */

static double involuntary_switches(long pid)
{
    char path[64], line[128];
    double v = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0)
            v = strtod(line + 27, NULL);
    fclose(f);
    return v;
}

/* utime + stime of a process, all its threads, in seconds; 0 if gone. */
static double proc_cpu(pid_t pid)
{
    char buf[1024];
    unsigned long long ut = 0, st = 0;
    const char *p;

    /* state is field 3, utime 14, stime 15 */
    if (pid <= 0 || (p = proc_stat((long)pid, buf, sizeof buf)) == NULL ||
        sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

void cpu_take(cpu_snap *s, const pidset *ps)
{
    struct rusage ru, rc;

    memset(s, 0, sizeof *s);
    machine_cpu(&s->busy, &s->steal);
    getrusage(RUSAGE_SELF, &ru);
    getrusage(RUSAGE_CHILDREN, &rc);
    s->self = rusage_seconds(&ru) + rusage_seconds(&rc);
    for (int i = 0; i < ps->nmaster; i++) {
        s->redis += proc_cpu(ps->master[i]);
        s->preempt += involuntary_switches(ps->master[i]);
    }
    for (int i = 0; i < ps->nreplica; i++)
        s->replica += proc_cpu(ps->replica[i]);
    s->csw = (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
    s->wall = now_ns();
}

/* ---- limiters ---------------------------------------------------------------- */

int make_limiter(const options *o, const char *rules,
                        rl_limiter **out, char *err)
{
    char uri[64];

    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", o->port);
    /* A loaded 2-core machine can stall a reply past the 5 ms default;
     * that would be decided by the fallback, which is counted as an error. */
    *out = bench_limiter_rules(
        (const char *const[]){"store", o->uri ? o->uri : uri,
                              "timeout_ms", "1000",
                              "redis_layout", o->layout,
                              "redis_command",
                              o->command ? o->command : "auto",
                              "redis_functions", o->evalsha ? "0" : NULL,
                              NULL},
        rules, err);
    return *out ? RL_OK : -1;
}

void one_rule(char *buf, size_t len, const char *id, int algo,
                     long long limit, long long window_s, long long burst)
{
    char b[48] = "";

    if (burst > 0)
        snprintf(b, sizeof b, ",\"burst\":%lld", burst);
    snprintf(buf, len,
             "{\"rule_id\":\"%s\",\"dimension\":\"user\",\"limit\":%lld,"
             "\"window_seconds\":%lld,\"algorithm\":\"%s\"%s}",
             id, limit, window_s, algo_names[algo], b);
}

/* A limiter (make_limiter) with one rule by user (one_rule). */
int limiter_one_rule(const options *o, const char *id, int algo,
                     long long limit, long long window_s, rl_limiter **out,
                     char *err)
{
    char rule[400], rules[512];

    one_rule(rule, sizeof rule, id, algo, limit, window_s, 0);
    snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
    return make_limiter(o, rules, out, err);
}

