/*
 * shmbench.c -- rlbench shm: checks/s and checks per CPU second of
 * shm://NAME beside memory://, 1 and 2 processes.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchmodes.h"
#include "benchutil.h"

#define PROCS_MAX 2

typedef struct tally {
    long long n;   /* checks, -1: failed */
    double cpu_s;  /* user + system seconds of the loop */
} tally;

typedef struct options {
    unsigned long long seconds, keys;
    int json, quick;
} options;

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--seconds", BENCH_OPT_COUNT, OPT_AT(seconds), 1, 1e6, 3, 1, NULL,
     "each run's length"},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e12, 100000, 100000, NULL,
     "clients drawn from"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "rlbench shm",
    .about = "rl_allow() per second on shm:// beside memory://, 1 and 2 "
             "processes."};

static rl_limiter *make_limiter(const char *uri, char *err)
{
    return bench_limiter(
        (const char *const[]){
            "store", uri, "shm_size", "8M", "rules",
            "[{\"rule_id\":\"api\",\"dimension\":\"user\","
            "\"algorithm\":\"token_bucket\","
            "\"limit\":1000000,\"window_seconds\":1}]",
            NULL},
        err);
}

/* A process: its limiter, the start signal (the pipe's end), then checks
 * for --seconds; its count (or -1) on out_fd. */
static void worker(const char *uri, const options *o, int start_fd,
                   int out_fd, int id)
{
    char err[ERRLEN], key[32], b;
    rl_limiter *lim = make_limiter(uri, err);
    rl_result res = RL_RESULT_INIT;
    uint64_t rng = 0x5eed + (uint64_t)id, end;
    long long n = -1;
    struct rusage r0, r1;
    tally t;

    if (!lim)
        fprintf(stderr, "shmbench: %s\n", err);
    while (read(start_fd, &b, 1) > 0)
        ;
    getrusage(RUSAGE_SELF, &r0);
    if (lim) {
        n = 0;
        end = now_ns() + o->seconds * 1000000000ULL;
        while (now_ns() < end) {
            for (int i = 0; i < 256; i++, n++) {
                snprintf(key, sizeof key, "u%llu",
                         (unsigned long long)pick(&rng, o->keys));
                if (rl_allow(lim, key, "api", 1, &res) != RL_OK) {
                    n = -1;
                    goto out;
                }
            }
        }
    }
out:
    getrusage(RUSAGE_SELF, &r1);
    t = (tally){n, rusage_seconds(&r1) - rusage_seconds(&r0)};
    rl_limiter_free(lim);
    _exit(write(out_fd, &t, sizeof t) == sizeof t && n >= 0 ? 0 : 1);
}

/* procs processes on uri at once: their checks per second, summed, and
 * per CPU second into *per_cpu; -1 when one failed. */
static double run(const char *uri, const options *o, int procs,
                  double *per_cpu)
{
    int start[2], out[2], failed = 0;
    pid_t pid[PROCS_MAX];
    long long total = 0;
    double cpu = 0;
    tally t;

    if (pipe(start) != 0 || pipe(out) != 0)
        return -1;
    for (int i = 0; i < procs; i++) {
        if ((pid[i] = fork()) < 0)
            return -1;
        if (pid[i] == 0) {
            close(start[1]);
            worker(uri, o, start[0], out[1], i);
        }
    }
    close(start[0]);
    usleep(200000); /* let them open their limiters before the start */
    close(start[1]);
    close(out[1]);
    for (int i = 0; i < procs; i++) {
        int status;
        waitpid(pid[i], &status, 0);
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (read(out[0], &t, sizeof t) == sizeof t && t.n > 0) {
            total += t.n;
            cpu += t.cpu_s;
        }
    }
    close(out[0]);
    *per_cpu = cpu > 0 ? (double)total / cpu : -1;
    return failed ? -1 : (double)total / (double)o->seconds;
}

int shm_main(int argc, char **argv)
{
    static const text_layout t = {26, 12, 0, 12, 12, 3};
    options o = {0};
    char shm_uri[96], region[64];
    uint64_t t0 = now_ns();
    int rc = bench_opt_args(argc, argv, &table, &o), bad = 0;

    if (rc)
        return rc == 1 ? 0 : rc;
    snprintf(region, sizeof region, "/rlbench-%ld", (long)getpid());
    snprintf(shm_uri, sizeof shm_uri, "shm://%s", region + 1);
    if (!o.json)
        print_columns(&t);
    for (int procs = 1; procs <= PROCS_MAX; procs++) {
        double mem_cpu, shm_cpu;
        double mem = run("memory://", &o, procs, &mem_cpu);
        double shm = run(shm_uri, &o, procs, &shm_cpu);
        figure f = {.name = procs == 1 ? "shm_checks_1proc"
                                       : "shm_checks_2procs",
                    .value = shm, .unit = "checks/s", .nrefs = 1,
                    .ref = {mem}, .ref_name = {"memory://"}};
        figure c = {.name = procs == 1 ? "shm_checks_per_cpu_1proc"
                                       : "shm_checks_per_cpu_2procs",
                    .value = shm_cpu, .unit = "checks/cpu-s", .nrefs = 1,
                    .ref = {mem_cpu}, .ref_name = {"memory://"}};
        XLIST(&f, XN("processes", procs), XN("keys", o.keys),
              XN("seconds", o.seconds));
        xnum(&c, "processes", procs);
        bad |= mem < 0 || shm < 0;
        emit_figure(&f, o.json, &t);
        emit_figure(&c, o.json, &t);
    }
    shm_unlink(region);
    print_done("shmbench", o.json, t0);
    return bad ? 1 : 0;
}
