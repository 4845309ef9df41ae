/*
 * rlbench_memory.c -- rlbench's memory figures: bytes per tracked key,
 * each taken in a forked child.  Method: docs/BENCHMARKS.md, "How each
 * bench measures".
 */
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/mman.h>
#include <sys/wait.h>

#include "rlbench.h"

/* Resident set size in bytes, from /proc/self/statm; 0 if unreadable.
 * Uses no heap so that reading it does not disturb what it measures. */
static uint64_t rss_bytes(void)
{
    char buf[128];
    unsigned long long size = 0, resident = 0;
    ssize_t got;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0)
        return 0;
    buf[got] = '\0';
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void mem_limiter(const options *o, size_t n, mem_result *r)
{
    rl_limiter *lim = NULL;
    char key[KEY_STRIDE];
    uint64_t r0, r1, r2, t0, t1;

    r0 = rss_bytes();
    r->rc = make_limiter(o, n, &lim, r->err);
    if (r->rc != RL_OK)
        return;
    r1 = rss_bytes();
    t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        rl_result res = RL_RESULT_INIT;
        int rc;

        fmt_key(key, (uint32_t)i);
        if ((rc = rl_allow(lim, key, RULE_ID, 1, &res)) != RL_OK) {
            char what[64];
            snprintf(what, sizeof what, "rl_allow(%s) while filling", key);
            set_err(r->err, what, rc, errtext(lim));
            r->rc = rc;
            rl_limiter_free(lim);
            return;
        }
        r->denied += !res.allowed;
    }
    t1 = now_ns();
    r2 = rss_bytes();
    rl_limiter_free(lim);
    r->bytes_per_key = ((double)r2 - (double)r1) / (double)n;
    r->empty_bytes = (double)r1 - (double)r0;
    r->insert_ns = (double)(t1 - t0) / (double)n;
}

void mem_table(const options *o, size_t n, mem_result *r)
{
    bare_table t;
    char key[KEY_STRIDE];
    uint64_t r0, r1, r2, t0, t1;

    (void)o;
    r0 = rss_bytes();
    if (bare_init(&t, n) != 0) {
        snprintf(r->err, ERRLEN, "bare table: out of memory");
        r->rc = RL_ENOMEM;
        return;
    }
    r1 = rss_bytes();
    t0 = now_ns();
    for (size_t i = 0; i < n; i++) {
        fmt_key(key, (uint32_t)i);
        bare_insert(&t, key);
    }
    t1 = now_ns();
    r2 = rss_bytes();
    if (t.count != n) {
        snprintf(r->err, ERRLEN, "bare table holds %zu keys, not %zu (hash "
                 "collision)", t.count, n);
        r->rc = -100;
    }
    bare_free(&t);
    /* calloc'd pages cost nothing until touched, so measure from r0. */
    r->bytes_per_key = ((double)r2 - (double)r0) / (double)n;
    r->empty_bytes = (double)r1 - (double)r0;
    r->insert_ns = (double)(t1 - t0) / (double)n;
}

int run_in_child(void (*fn)(const options *, size_t, mem_result *),
                 const options *o, size_t n, mem_result *r)
{
    /* The child's result: a shared page it touches only when done. */
    mem_result *shared = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int status = 0, ok = 0;
    pid_t pid;

    memset(r, 0, sizeof *r);
    if (shared == MAP_FAILED)
        return snprintf(r->err, ERRLEN, "mmap: %s", strerror(errno)),
               r->rc = -1;
    fflush(NULL);
    if ((pid = fork()) == 0) {
#ifdef __GLIBC__
        malloc_trim(0); /* hand back free heap so it cannot be reused unseen */
#endif
        fn(o, n, r);
        *shared = *r;
        _exit(0);
    }
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pid < 0)
        snprintf(r->err, ERRLEN, "fork: %s", strerror(errno));
    else if (WIFSIGNALED(status))
        snprintf(r->err, ERRLEN, "memory child killed by signal %d",
                 WTERMSIG(status));
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        snprintf(r->err, ERRLEN, "memory child failed (status %d)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    else
        ok = 1, *r = *shared; /* its rc and err */
    munmap(shared, sizeof *r);
    return ok ? r->rc : (r->rc = -1);
}
