/*
 * benchutil.c -- the output, error and command-line helpers, and the
 * frames, that the programs of bench/ share (see benchutil.h).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchutil.h"

/* ---- figures ---------------------------------------------------------- */

static void json_num(double v)
{
    if (!isfinite(v))
        fputs("null", stdout);
    else if (v == (double)(long long)v && v < 1e15 && v > -1e15)
        printf("%lld", (long long)v);
    else
        printf("%.3f", v);
}

void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

void emit_figure(const figure *f, int json, const text_layout *t)
{
    if (json) {
        printf("{\"name\":\"%s\",\"value\":", f->name);
        json_num(f->value);
        printf(",\"unit\":\"%s\"", f->unit);
        if (f->nrefs > 0) {
            printf(",\"ref\":");
            json_num(f->ref[0]);
            printf(",\"ref_name\":\"%s\",\"ratio\":", f->ref_name[0]);
            json_num(f->ref[0] > 0 ? f->value / f->ref[0] : NAN);
        }
        if (f->nrefs > 1) {
            printf(",\"refs\":[");
            for (int i = 0; i < f->nrefs; i++) {
                printf("%s{\"ref_name\":\"%s\",\"ref\":", i ? "," : "",
                       f->ref_name[i]);
                json_num(f->ref[i]);
                printf(",\"ratio\":");
                json_num(f->ref[i] > 0 ? f->value / f->ref[i] : NAN);
                printf("}");
            }
            printf("]");
        }
        for (int i = 0; i < f->nextra; i++) {
            printf(",\"%s\":", f->x[i].name);
            if (f->x[i].str)
                json_str(f->x[i].str);
            else
                json_num(f->x[i].value);
        }
        printf("}\n");
    } else {
        printf("%-*s %*.*f %-*s", t->name_w, f->name, t->num_w, t->num_prec,
               f->value, t->unit_w, f->unit);
        if (f->nrefs > 0)
            printf(" %*.*f %-*s %7.*f", t->num_w, t->num_prec, f->ref[0],
                   t->ref_name_w, f->ref_name[0], t->ratio_prec,
                   f->ref[0] > 0 ? f->value / f->ref[0] : 0.0);
        else
            printf(" %*s %-*s %7s", t->num_w, "-", t->ref_name_w, "-", "-");
        for (int i = 0; i < f->nextra; i++) {
            if (f->x[i].str)
                printf("  %s=\"%s\"", f->x[i].name, f->x[i].str);
            else
                printf("  %s=%.6g", f->x[i].name, f->x[i].value);
        }
        printf("\n");
        for (int i = 1; i < f->nrefs; i++)
            printf("%-*s %*s %-*s %*.*f %-*s %7.*f\n", t->name_w, "",
                   t->num_w, "", t->unit_w, "", t->num_w, t->num_prec,
                   f->ref[i], t->ref_name_w, f->ref_name[i], t->ratio_prec,
                   f->ref[i] > 0 ? f->value / f->ref[i] : 0.0);
    }
    fflush(stdout);
}

void print_columns(const text_layout *t)
{
    printf("%-*s %*s %-*s %*s %-*s %7s\n", t->name_w, "figure", t->num_w,
           "value", t->unit_w, "unit", t->num_w, "ref", t->ref_name_w,
           "ref_name", "ratio");
}

/* ---- errors ----------------------------------------------------------- */

const char *errtext(const rl_limiter *lim)
{
    const char *m = rl_errmsg(lim);

    return m != NULL ? m : "";
}

void set_err(char *err, const char *what, int rc, const char *detail)
{
    snprintf(err, ERRLEN, "%s: %s (%d)", what,
             detail && *detail ? detail : rl_strerror(rc), rc);
}

/* ---- the command line, the machine ------------------------------------ */

/* A count, optionally ending in k, M or G (powers of 1000): 0, or -1 when
 * s is no such number or it overflows. */
static int parse_count(const char *s, unsigned long long *out)
{
    static const char units[] = "kKmMgG";
    const char *u;
    char *end = NULL;
    unsigned long long v, mul = 1;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return -1;
    if (*end && (u = strchr(units, *end)) != NULL)
        for (long e = (u - units) / 2; e >= 0; e--)
            mul *= 1000;
    end += mul > 1;
    if (*end != '\0' || v > ULLONG_MAX / mul)
        return -1;
    *out = v * mul;
    return 0;
}

double loadavg1(void)
{
    double l[1];

    return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

/* The CPU's "model name" from /proc/cpuinfo into buf, or buf as it is. */
static void cpu_model_name(char *buf, size_t len)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];

    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(buf, len, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = '\0';
            break;
        }
    if (f)
        fclose(f);
}

int bench_modes_main(int argc, char **argv, const bench_mode *modes,
                     size_t n)
{
    for (size_t i = 1; argc > 1 && i < n; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            return modes[i].run(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "--modes") == 0) {
        printf("usage: %s [MODE] [options]  (MODE --help: its options)\n",
               argv[0]);
        for (size_t i = 0; i < n; i++)
            printf("  %-10s %s%s\n", modes[i].name, modes[i].about,
                   i ? "" : " (the default)");
        return 0;
    }
    return modes[0].run(argc, argv);
}

void print_done(const char *prog, int json, uint64_t t_start)
{
    printf(json ? "{\"name\":\"done\",%.0s\"seconds\":%.1f,"
                  "\"loadavg_1m\":%.2f}\n"
                : "%s: done in %.1f s, loadavg=%.2f\n",
           prog, (double)(now_ns() - t_start) / 1e9, loadavg1());
}

/* ---- latency histogram ------------------------------------------------ */

void hist_add(hist *h, uint64_t v)
{
    int i;

    if (v < 128) {
        i = (int)v;
    } else {
        int e = 63 - __builtin_clzll(v);
        i = 128 + (e - 7) * 64 + (int)((v >> (e - 6)) - 64);
        if (i >= HB)
            i = HB - 1;
    }
    h->b[i]++;
    h->n++;
}

void hist_merge(hist *into, const hist *h)
{
    for (int i = 0; i < HB; i++)
        into->b[i] += h->b[i];
    into->n += h->n;
}

double hist_pct(const hist *h, double p)
{
    uint64_t rank = (uint64_t)ceil((double)h->n * p), seen = 0;

    if (rank < 1)
        rank = 1;
    for (int i = 0; i < HB; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            if (i < 128)
                return (double)i;
            int e = (i - 128) / 64 + 7;
            double lo = (double)((uint64_t)((i - 128) % 64 + 64) << (e - 6));
            return lo + (double)(1ULL << (e - 6)) / 2.0;
        }
    }
    return NAN;
}

/* ---- CPU time ----------------------------------------------------------- */

void machine_cpu(double *busy, double *steal)
{
    unsigned long long v[8] = {0};
    long hz = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "r");

    if (f != NULL) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
            memset(v, 0, sizeof v);
        fclose(f);
    }
    /* user nice system idle iowait irq softirq steal */
    *busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)hz;
    *steal = (double)v[7] / (double)hz;
}

const char *proc_stat(long pid, char *buf, size_t len)
{
    char path[64];
    const char *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (len == 0 || (f = fopen(path, "r")) == NULL)
        return NULL;
    n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* comm may hold anything but ends at the last */
    return p && p[1] == ' ' ? p + 2 : NULL;
}

double rusage_seconds(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 +
           (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
}

/* ---- the command line, a limiter, keys --------------------------------- */

/* A real number in [lo, hi]: 0, or -1 for anything else. */
static int parse_real(const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    double v;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int is_flag(int kind)
{
    return kind == BENCH_OPT_FLAG || kind == BENCH_OPT_QUICK;
}

/* The row argument a names (flags exactly; the others as "--name" or
 * "--name=value", *val then pointing past the '='), or -1. */
static int bench_opt_find(const bench_opts *t, const char *a,
                          const char **val)
{
    for (size_t k = 0; k < t->n; k++) {
        const bench_opt *r = &t->rows[k];
        size_t n = strlen(r->name);
        if (strncmp(a, r->name, n) == 0 &&
            (a[n] == '\0' || (a[n] == '=' && !is_flag(r->kind)))) {
            *val = a[n] == '=' ? a + n + 1 : NULL;
            return (int)k;
        }
    }
    return -1;
}

/* Stores val for row r (a: the argument as given); 0, or 2 after saying
 * what is wrong. */
static int bench_opt_set(const bench_opts *t, const bench_opt *r,
                         const char *a, const char *val, void *o)
{
    char *field = (char *)o + r->off;
    int ok = 0;

    if (r->kind == BENCH_OPT_COUNT) {
        unsigned long long *n = (unsigned long long *)(void *)field;
        ok = parse_count(val, n) == 0 &&
             (r->hi <= 0 || ((double)*n >= r->lo && (double)*n <= r->hi));
    } else if (r->kind == BENCH_OPT_REAL) {
        ok = parse_real(val, r->lo, r->hi, (double *)(void *)field) == 0;
    } else if (r->kind == BENCH_OPT_INT) {
        double v;
        if ((ok = parse_real(val, r->lo, r->hi, &v) == 0 && v == (int)v))
            *(int *)(void *)field = (int)v;
    } else { /* BENCH_OPT_NAME */
        ok = r->names == NULL;
        for (const char *const *nm = r->names; nm && *nm && !ok; nm++)
            ok = strcmp(val, *nm) == 0;
        if (ok)
            *(const char **)(void *)field = val;
    }
    if (!ok)
        fprintf(stderr, "%s: bad value '%s' for %s\n", t->prog, val, a);
    return ok ? 0 : 2;
}

/* The counts and reals not given: their def, or their quick value. */
static void bench_opt_defaults(const bench_opts *t, void *o,
                               const int *given, int quick)
{
    for (size_t k = 0; k < t->n; k++) {
        const bench_opt *r = &t->rows[k];
        double d = quick ? r->quick : r->def;
        char *field = (char *)o + r->off;
        if (given[k] || r->def < 0)
            continue;
        if (r->kind == BENCH_OPT_REAL)
            *(double *)(void *)field = d;
        else if (r->kind == BENCH_OPT_INT)
            *(int *)(void *)field = (int)d;
        else if (r->kind == BENCH_OPT_COUNT)
            *(unsigned long long *)(void *)field = (unsigned long long)d;
    }
}

void bench_opt_usage(const bench_opts *t, FILE *f)
{
    static const char *const arg[] = {
        [BENCH_OPT_COUNT] = " N", [BENCH_OPT_REAL] = " X",
        [BENCH_OPT_NAME] = " NAME", [BENCH_OPT_INT] = " N"};

    fprintf(f, "usage: %s [options]\n%s%s", t->prog, t->about ? t->about : "",
            t->about ? "\n" : "");
    for (size_t k = 0; k < t->n; k++) {
        const bench_opt *r = &t->rows[k];
        char left[64];

        snprintf(left, sizeof left, "%s%s", r->name,
                 arg[r->kind] ? arg[r->kind] : "");
        fprintf(f, "  %-18s %s", left, r->help ? r->help : "");
        if (r->kind == BENCH_OPT_COUNT || r->kind == BENCH_OPT_REAL ||
            r->kind == BENCH_OPT_INT) {
            if (r->def >= 0)
                fprintf(f, " (default %.15g", r->def);
            if (r->def >= 0 && r->quick != r->def)
                fprintf(f, "; --quick %.15g", r->quick);
            if (r->hi > 0)
                fprintf(f, "%s%.15g..%.15g", r->def >= 0 ? "; " : " (",
                        r->lo, r->hi);
            fputs(r->def >= 0 || r->hi > 0 ? ")" : "", f);
        }
        for (const char *const *nm = r->names; nm && *nm; nm++)
            fprintf(f, "%s%s", nm == r->names ? " (" : "|", *nm);
        fputs(r->names ? ")\n" : "\n", f);
    }
    fprintf(f, "  --help             this text\n"
               "N may end in k, M or G (powers of 1000).  What it measures: "
               "docs/BENCHMARKS.md.\n");
}

int bench_opt_args(int argc, char **argv, const bench_opts *t, void *o)
{
    int given[BENCH_OPT_MAX] = {0}, quick = 0;

    if (t->n > BENCH_OPT_MAX)
        return fprintf(stderr, "%s: %zu options (at most %d)\n", t->prog,
                       t->n, BENCH_OPT_MAX), 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        int k;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return bench_opt_usage(t, stdout), 1;
        if ((k = bench_opt_find(t, a, &val)) < 0) {
            fprintf(stderr, "%s: unknown option '%s'\n", t->prog, a);
            return bench_opt_usage(t, stderr), 2;
        }
        given[k] = 1;
        if (is_flag(t->rows[k].kind)) {
            *(int *)(void *)((char *)o + t->rows[k].off) = 1;
            quick |= t->rows[k].kind == BENCH_OPT_QUICK;
            continue;
        }
        if (val == NULL && i + 1 >= argc)
            return fprintf(stderr, "%s: option '%s' needs a value\n",
                           t->prog, a), 2;
        if (val == NULL)
            val = argv[++i];
        if (bench_opt_set(t, &t->rows[k], a, val, o) != 0)
            return 2;
    }
    bench_opt_defaults(t, o, given, quick);
    return 0;
}

/* Row r's value in o, as JSON when json is set. */
static void bench_param(const bench_opt *r, const void *o, int json)
{
    const void *field = (const char *)o + r->off;
    const char *name = *(const char *const *)field;

    if (r->kind == BENCH_OPT_COUNT)
        printf("%llu", *(const unsigned long long *)field);
    else if (r->kind == BENCH_OPT_REAL)
        printf("%g", *(const double *)field);
    else if (r->kind != BENCH_OPT_NAME)
        printf("%d", *(const int *)field);
    else if (json && name)
        json_str(name);
    else
        printf("%s", name ? name : json ? "null" : "-");
}

void bench_params(const bench_opts *t, const void *o, int json)
{
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    char cpu[128] = "";

    cpu_model_name(cpu, sizeof cpu);
    if (json) {
        printf("{\"name\":\"params\",\"library\":\"%s\",\"nproc\":%ld,"
               "\"cpu_model\":", rl_version_string(), nproc);
        json_str(cpu);
    } else {
        printf("%s: libratelimit %s, nproc=%ld (%s)", t->prog,
               rl_version_string(), nproc, cpu);
    }
    for (size_t k = 0; k < t->n; k++) {
        const bench_opt *r = &t->rows[k];
        if (strcmp(r->name, "--json") == 0)
            continue;
        fputs(json ? ",\"" : ", ", stdout);
        for (const char *c = r->name + 2; *c; c++)
            putchar(*c == '-' ? '_' : *c);
        fputs(json ? "\":" : "=", stdout);
        bench_param(r, o, json);
    }
    printf(json ? ",\"loadavg_1m\":%.2f}\n" : ", loadavg=%.2f\n",
           loadavg1());
}

rl_limiter *bench_limiter(const char *const *kv, char *err)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc = cfg ? RL_OK : RL_ENOMEM;

    for (; rc == RL_OK && kv[0]; kv += 2)
        if (kv[1] && (rc = rl_config_set(cfg, kv[0], kv[1])) != RL_OK)
            set_err(err, kv[0], rc, errtext(NULL));
    if (rc == RL_OK && (rc = rl_limiter_new(&lim, cfg)) != RL_OK)
        set_err(err, "rl_limiter_new", rc, errtext(NULL));
    else if (!cfg)
        set_err(err, "rl_config_new", rc, NULL);
    rl_config_free(cfg);
    return lim;
}

rl_limiter *bench_limiter_rules(const char *const *kv, const char *rules,
                                char *err)
{
    rl_limiter *lim = bench_limiter(kv, err);
    int rc;

    if (lim && (rc = rl_rules_load_string(lim, rules)) != RL_OK) {
        set_err(err, "rl_rules_load_string", rc, errtext(lim));
        rl_limiter_free(lim);
        return NULL;
    }
    return lim;
}

static char *bench_keys(size_t n, size_t stride)
{
    char *keys = malloc(n * stride);

    for (size_t i = 0; keys && i < n; i++)
        snprintf(keys + i * stride, stride, "%zu", i);
    return keys;
}

uint32_t *bench_seq(size_t n, unsigned long long nkeys, unsigned part,
                    unsigned parts, uint64_t seed)
{
    uint32_t *seq = malloc(n * sizeof *seq);

    for (size_t i = 0; seq && i < n; i++)
        seq[i] = (uint32_t)(parts * pick(&seed, nkeys / parts) + part);
    return seq;
}

int bench_input_make(bench_input *in, unsigned long long nkeys,
                     size_t stride, size_t n, int split, const char *prog)
{
    unsigned parts = split ? 2 : 1;

    in->keys = bench_keys((size_t)nkeys, stride);
    for (unsigned t = 0; t < 2; t++)
        in->seq[t] = bench_seq(n, nkeys, t % parts, parts, 0xD27A0000ULL + t);
    if (in->keys && in->seq[0] && in->seq[1])
        return 0;
    fprintf(stderr, "%s: out of memory\n", prog);
    bench_input_free(in);
    return -1;
}

void bench_input_free(bench_input *in)
{
    free(in->keys);
    free(in->seq[0]);
    free(in->seq[1]);
    *in = (bench_input){0};
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

void sort_doubles(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
}

double median_of(double *v, size_t n)
{
    sort_doubles(v, n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int bench_threads(void *w, size_t size, int n, void *(*fn)(void *),
                  const char *prog, char *err)
{
    pthread_t tid[64];
    int rc = 0;

    if (n < 1 || n > 64)
        exit((fprintf(stderr, "%s: %d threads (1..64)\n", prog, n), 1));
    for (int t = 0; t < n; t++)
        if (pthread_create(&tid[t], NULL, fn, (char *)w + (size_t)t * size))
            exit((fprintf(stderr, "%s: pthread_create failed\n", prog), 1));
    for (int t = 0; t < n; t++) {
        const bench_status *st = (const void *)((char *)w + (size_t)t * size);
        pthread_join(tid[t], NULL);
        if (rc == 0 && (rc = st->rc) != 0)
            memcpy(err, st->err, ERRLEN);
    }
    return rc;
}

/* ---- two limiters side by side ------------------------------------------- */

typedef struct ab_worker {
    bench_status st;        /* first: bench_threads() reads it */
    const ab_run *r;
    const uint32_t *seq;
    pthread_barrier_t *bar;
    double cpu[AB_MAX_PAIRS][2], wall[AB_MAX_PAIRS][2];
    unsigned long long denied[2];
} ab_worker;

static int ab_check(ab_worker *w, int side, size_t key)
{
    const ab_run *r = w->r;
    const char *user = r->keys + key * r->stride;
    rl_request req = {.size = sizeof req, .endpoint = "/api", .user = user,
                      .ip = r->all_dims ? user : NULL,
                      .api_key = r->all_dims ? user : NULL, .cost = 1};
    rl_result res = RL_RESULT_INIT;
    int rc = rl_check(r->lim[side], &req, &res);

    if (rc != RL_OK) {
        set_err(w->st.err, "rl_check", rc, errtext(r->lim[side]));
        return w->st.rc = rc;
    }
    w->denied[side] += !res.allowed;
    return RL_OK;
}

uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One timed block on `side`, its ns a check added to pair p's with weight
 * share (a side's blocks in a pair add up to 1). */
static void ab_block(ab_worker *w, int p, int side, double share)
{
    uint64_t t0, c0;

    pthread_barrier_wait(w->bar);
    t0 = now_ns();
    c0 = thread_cpu_ns();
    for (size_t i = 0; i < w->r->calls && w->st.rc == 0; i++) {
        uint64_t t1 = w->r->h && !(i & 15) ? now_ns() : 0;
        ab_check(w, side, w->seq[i]);
        if (t1)
            hist_add(&w->r->h[side], now_ns() - t1);
    }
    w->cpu[p][side] += (double)(thread_cpu_ns() - c0) / (double)w->r->calls * share;
    w->wall[p][side] += (double)(now_ns() - t0) / (double)w->r->calls * share;
    if (w->r->pause_ms)
        bench_sleep_ms(w->r->pause_ms);
}

static void *ab_main(void *arg)
{
    ab_worker *w = arg;
    const ab_run *r = w->r;

    for (int side = 0; side <= 1; side++) /* warm-up, untimed */
        for (size_t i = 0; i < r->calls && w->st.rc == 0; i++)
            ab_check(w, side, w->seq[i]);
    w->denied[0] = w->denied[1] = 0;
    for (int p = 0; p < r->pairs; p++) {
        int a = (r->first + p) % 2;
        for (int k = 0; k < r->blocks; k++)
            ab_block(w, p, k == 0 || k == 3 ? a : !a, 2.0 / r->blocks);
    }
    return NULL;
}

int bench_ab_charge(const ab_run *r, size_t nkeys, char *err)
{
    static ab_worker w;

    w = (ab_worker){.r = r};
    for (size_t i = 0; i < nkeys && w.st.rc == 0; i++)
        for (int side = 0; side <= 1 && w.st.rc == 0; side++)
            ab_check(&w, side, i);
    if (w.st.rc)
        memcpy(err, w.st.err, ERRLEN);
    return w.st.rc;
}

int bench_ab(const ab_run *r, uint32_t *const *seqs, int threads,
             ab_result *out, const char *prog, char *err)
{
    static ab_worker w[2];
    pthread_barrier_t bar;
    int rc;

    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++)
        w[t] = (ab_worker){.r = r, .seq = seqs[t], .bar = &bar};
    rc = bench_threads(w, sizeof w[0], threads, ab_main, prog, err);
    pthread_barrier_destroy(&bar);
    memset(out, 0, sizeof *out);
    for (int t = 0; t < threads; t++)
        for (int side = 0; side <= 1; side++) {
            out->denied[side] += w[t].denied[side];
            for (int p = 0; p < r->pairs; p++) {
                out->cpu[p][side] += w[t].cpu[p][side] / threads;
                out->wall[p][side] += w[t].wall[p][side] / threads;
            }
        }
    return rc;
}
