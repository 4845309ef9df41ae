/*
 * rlbench_util.c -- what rlbench's figures share: the key names, the
 * resident set, percentiles of sorted samples, and the limiter under test
 * (the memory store, one rule of limit 10^9 so nothing is denied, --keys keys
 * charged once before timing).
 */
#include "rlbench.h"
/* ---- small helpers ---------------------------------------------------- */

/* Writes "user:<i>" and its NUL into buf (at least KEY_STRIDE bytes). */
void fmt_key(char *buf, uint32_t i)
{
    char digits[10];
    int n = 0;

    memcpy(buf, KEY_PREFIX, KEY_PREFIX_LEN);
    do {
        digits[n++] = (char)('0' + i % 10);
        i /= 10;
    } while (i != 0);
    for (int j = 0; j < n; j++)
        buf[KEY_PREFIX_LEN + j] = digits[n - 1 - j];
    buf[KEY_PREFIX_LEN + n] = '\0';
}

/* Resident set size in bytes, from /proc/self/statm; 0 if unreadable.
 * Uses no heap so that reading it does not disturb what it measures. */
uint64_t rss_bytes(void)
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

int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
double percentile(const uint32_t *sorted, size_t n, double p)
{
    size_t rank = (size_t)((double)n * p + 0.999999);

    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return (double)sorted[rank - 1];
}

/* ---- limiter setup ------------------------------------------------------ */

int make_limiter(const options *o, unsigned long long nkeys,
                        rl_limiter **out, char *err)
{
    char cap[32], rules[512];
    /* 8 GiB, or 256 B per key if that is more: the cap must never bind. */
    unsigned long long gib = (nkeys * 256ULL + (1ULL << 30) - 1) >> 30;

    snprintf(cap, sizeof cap, "%lluG", gib < 8 ? 8 : gib);
    snprintf(rules, sizeof rules,
             "{\"rules\":[{\"rule_id\":\"" RULE_ID "\",\"dimension\":\"" RULE_DIM "\","
             "\"limit\":%lld,\"window_seconds\":%d,\"algorithm\":\"%s\"}]}",
             RULE_LIMIT, RULE_WINDOW, o->algo);
    *out = bench_limiter_rules(
        (const char *const[]){"store", "memory://", "memory_max_bytes", cap,
                              NULL},
        rules, err);
    return *out ? RL_OK : -1;
}
