/*
 * clusterbench_util.c -- the parts of clusterbench that every group uses:
 * signals and the servers it started (stopped on every way out), sleeps,
 * the figure's output, control connections to a server (INFO commandstats,
 * FLUSHALL, client counts), CPU accounting of the client, the masters, the
 * replicas and the rest of the machine, limiters and rules, and a pool of
 * threads doing a fixed number of checks.
 */
#include "clusterbench.h"
/* ---- stopping: signals and the servers ------------------------------ */

volatile sig_atomic_t g_signal;
_Atomic int g_stop; /* workers: stop now */

void on_signal(int sig)
{
    g_signal = sig;
    atomic_store(&g_stop, 1);
}

int interrupted(char *err)
{
    if (g_signal == 0)
        return 0;
    snprintf(err, ERRLEN, "interrupted by signal %d", (int)g_signal);
    return 1;
}

void sleep_s(double s)
{
    uint64_t end = now_ns() + (uint64_t)(s * 1e9);

    while (g_signal == 0) {
        uint64_t t = now_ns();
        struct timespec ts;
        if (t >= end)
            break;
        t = end - t > 50000000ULL ? 50000000ULL : end - t;
        ts.tv_sec = 0;
        ts.tv_nsec = (long)t;
        nanosleep(&ts, NULL);
    }
}

rh_server single;
int single_up;
rh_cluster cl;
int cluster_up;
double cluster_start_s;  /* rh_cluster_start(), until settled */
int cluster_master[RH_CLUSTER_MAX]; /* ROLE at start: 1 master */

/* Masters at start that are masters no more (a failover): should be 0. */
int failovers(void)
{
    int n = 0;

    for (int i = 0; i < cl.n; i++)
        if (cluster_master[i] && rh_cluster_is_master(&cl, i) != 1)
            n++;
    return n;
}

/* ---- output ----------------------------------------------------------- */

const text_layout layout = {34, 12, 2, 12, 28, 3};

void emit(const options *o, const figure *f)
{
    emit_figure(f, o->json, &layout);
}

/* ---- a server's control connection (hiredis, blocking) ---------------- */

/* A control connection with long timeouts (a FLUSHALL of millions of keys
 * takes seconds). */
redisContext *control(const rh_server *s, char *err)
{
    redisContext *c = rh_connect(s);

    if (c == NULL) {
        snprintf(err, ERRLEN, "cannot connect to 127.0.0.1:%d", s->port);
        return NULL;
    }
    redisSetTimeout(c, (struct timeval){60, 0});
    return c;
}

int cmdstats_add(redisContext *c, cmdstats *cs, char *err)
{
    redisReply *r = bcmd(c, err, "INFO commandstats");

    if (r == NULL)
        return -1;
    if (r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return snprintf(err, ERRLEN, "INFO commandstats: not a string"), -1;
    }
    for (const char *p = r->str; p && *p;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        char name[32], line[512];
        const char *colon;
        size_t len, ll;
        int i;

        if (strncmp(p, "cmdstat_", 8) != 0 || !(colon = strchr(p, ':')))
            continue;
        len = (size_t)(colon - p - 8);
        if (len >= sizeof name)
            continue;
        memcpy(name, p + 8, len);
        name[len] = '\0';
        ll = strcspn(colon + 1, "\r\n");
        if (ll >= sizeof line)
            ll = sizeof line - 1;
        memcpy(line, colon + 1, ll);
        line[ll] = '\0';
        for (i = 0; i < cs->n && strcmp(cs->name[i], name) != 0; i++)
            ;
        if (i == cs->n) {
            if (cs->n == MAX_CMDS)
                continue;
            snprintf(cs->name[cs->n++], sizeof cs->name[0], "%s", name);
        }
        cs->calls[i] += kv_num(line, "calls");
        cs->usec[i] += kv_num(line, "usec");
        cs->failed[i] += kv_num(line, "failed_calls");
    }
    freeReplyObject(r);
    return 0;
}

int cmdstats_find(const cmdstats *cs, const char *name)
{
    for (int i = 0; i < cs->n; i++)
        if (strcmp(cs->name[i], name) == 0)
            return i;
    return -1;
}

double cs_calls(const cmdstats *cs, const char *name)
{
    int i = cmdstats_find(cs, name);

    return i < 0 ? 0 : cs->calls[i];
}

double cs_usec(const cmdstats *cs, const char *name)
{
    int i = cmdstats_find(cs, name);

    return i < 0 ? 0 : cs->usec[i];
}

/* The script's calls, EVALSHA and FCALL (redis_functions) together. */
double cs_script_calls(const cmdstats *cs)
{
    return cs_calls(cs, "evalsha") + cs_calls(cs, "fcall");
}

double cs_script_usec(const cmdstats *cs)
{
    return cs_usec(cs, "evalsha") + cs_usec(cs, "fcall");
}

/* ---- CPU accounting ------------------------------------------------- */

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
    struct rusage ru;

    memset(s, 0, sizeof *s);
    machine_cpu(&s->busy, &s->steal);
    getrusage(RUSAGE_SELF, &ru);
    s->self = rusage_seconds(&ru);
    for (int i = 0; i < ps->nmaster; i++)
        s->redis += proc_cpu(ps->master[i]);
    for (int i = 0; i < ps->nreplica; i++)
        s->replica += proc_cpu(ps->replica[i]);
    s->wall = now_ns();
}

/* ---- limiters --------------------------------------------------------- */

int make_limiter(const char *store, const char *redis_layout,
                        const char *rules, rl_limiter **out, char *err)
{
    *out = bench_limiter_rules(
        (const char *const[]){"store", store, "timeout_ms", "1000",
                              "redis_layout", redis_layout, NULL},
        rules, err);
    return *out ? 0 : -1;
}

void one_rule(char *buf, size_t len, const char *id, int algo,
                     long long limit, long long window_s, long long burst)
{
    char b[48] = "";

    if (burst > 0)
        snprintf(b, sizeof b, ",\"burst\":%lld", burst);
    snprintf(buf, len,
             "{\"rules\":[{\"rule_id\":\"%s\",\"dimension\":\"user\","
             "\"limit\":%lld,\"window_seconds\":%lld,\"algorithm\":\"%s\""
             "%s}]}",
             id, limit, window_s, algo_names[algo], b);
}

