
/*
 * rlbench.c -- how fast and how big is libratelimit's in-process store?
 * Latency and memory through the public API beside a bare hash lookup of
 * the same keys, scaling and batches; and the memory store's modes.  How it
 * measures and how to read the ratios: docs/BENCHMARKS.md, "How each bench
 * measures".  Latency lives in rlbench_latency.c, scaling in
 * rlbench_scaling.c, batches in rlbench_batch.c, memory in rlbench_memory.c,
 * the reference table in rlbench_bare.c; this file makes the limiter and
 * its keys, reads the command line and prints the figures.
 */
#include "benchmodes.h"
#include "rlbench.h"

/* ---- the limiter under test and its keys ------------------------------- */

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

/* ---- the command line: one row an option ---------------------------------- */

static const char *const algos[] = {"sliding_window", "token_bucket",
                                    "fixed_window", "gcra", NULL};

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, MAX_KEYS, 1000000, 100000,
     NULL, "distinct keys for latency and memory"},
    {"--big", BENCH_OPT_COUNT, OPT_AT(big), 0, MAX_KEYS, 10000000, 1000000,
     NULL, "keys for the second memory figure (0 skips it)"},
    {"--samples", BENCH_OPT_COUNT, OPT_AT(samples), 100, MAX_SAMPLES,
     2000000, 200000, NULL, "timed calls per thread per run"},
    {"--algo", BENCH_OPT_NAME, OPT_AT(algo), 0, 0, -1, -1, algos,
     "the rule's algorithm"},
    {"--batch", BENCH_OPT_COUNT, OPT_AT(batch), 2, 1024, 32, 32, NULL,
     "requests per rl_check_many() call"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "rlbench",
    .about = "The memory store: ns per rl_allow() (1 and 2 threads), scaling, "
             "batches and\nbytes per key, each beside a bare hash lookup in "
             "the same run."};

/* ---- output ----------------------------------------------------------------- */

static const text_layout layout = {28, 10, 1, 5, 17, 2};

static void emit(const options *o, const figure *f)
{
    emit_figure(f, o->json, &layout);
}

/* A figure beside the bare lookup's same figure. */
static figure beside_bare(const char *name, double value, const char *unit,
                          double ref)
{
    return (figure){.name = name, .value = value, .unit = unit, .nrefs = 1,
                    .ref = {ref}, .ref_name = {"bare_hash_lookup"}};
}

static void emit_latency(const options *o, int threads, const lat_figs *lib,
                         const lat_figs *ref)
{
    static const char *const names[4] = {"p50", "p99", "mean_untimed",
                                         "mean_chained"};
    const double v[4] = {lib->p50, lib->p99, lib->untimed, lib->chained};
    const double r[4] = {ref->p50, ref->p99, ref->untimed, ref->chained};
    /* beside the first three: the mean, p999 and cpu_share, each side's */
    static const char *const xname[3][2] = {
        {"mean", "ref_mean"}, {"p999", "ref_p999"},
        {"cpu_share", "ref_cpu_share"}};
    const double x[3][2] = {{lib->mean, ref->mean}, {lib->p999, ref->p999},
                            {lib->cpu_share, ref->cpu_share}};

    for (int i = 0; i < 4; i++) {
        char name[40];
        figure f;

        snprintf(name, sizeof name, "mem_check_%s_%dt", names[i], threads);
        f = beside_bare(name, v[i], "ns", r[i]);
        XLIST(&f, XN("threads", threads), XN("keys", o->keys));
        if (i < 3)
            XLIST(&f, XN(xname[i][0], x[i][0]), XN(xname[i][1], x[i][1]));
        if (i == 2 && threads == 1)
            xnum(&f, "target_max_ratio", TARGET_UNTIMED_RATIO_1T);
        xnum(&f, "denied", lib->denied);
        emit(o, &f);
    }
}

static void emit_scaling(const options *o, const scale_figs *s)
{
    figure f = beside_bare("mem_check_scaling_2t", s->ratio[LIB], "x",
                           s->ratio[REF]);

    XLIST(&f, XN("checks_per_s_1t", s->per_s_1t[LIB]),
          XN("checks_per_s_2t", s->per_s_2t[LIB]),
          XN("ref_per_s_1t", s->per_s_1t[REF]),
          XN("ref_per_s_2t", s->per_s_2t[REF]), XN("keys", o->keys),
          XN("target_min", TARGET_SCALING_2T));
    emit(o, &f);
}

static void emit_batch(const options *o, const batch_figs *b)
{
    figure f = beside_bare("mem_check_many_mean_untimed_1t",
                           b->per_check_ns[LIB], "ns", b->per_check_ns[REF]);

    XLIST(&f, XN("threads", 1), XN("batch", o->batch), XN("keys", o->keys),
          XN("denied", b->denied));
    emit(o, &f);
}

static void emit_memory(const options *o, const char *name, size_t n,
                        const mem_result *lib, const mem_result *ref,
                        int with_target)
{
    figure f = {.name = name, .value = lib->bytes_per_key, .unit = "B",
                 .nrefs = 2,
                 .ref = {DESIGN_NOTE_BYTES_PER_KEY, ref->bytes_per_key},
                 .ref_name = {"design_note", "bare_hash_table"}};

    XLIST(&f, XN("keys", n), XN("empty_store_bytes", lib->empty_bytes),
          XN("insert_ns", lib->insert_ns),
          XN("bare_insert_ns", ref->insert_ns), XN("denied", lib->denied));
    if (with_target)
        xnum(&f, "target_max", TARGET_BYTES_PER_KEY_BIG);
    emit(o, &f);
}

/* ---- main ------------------------------------------------------------------ */

/* 2. Memory per tracked key, measured first and printed last: each
 * measurement runs in a forked child, and the child of a parent that has
 * already allocated and freed a lot would refill that freed (still
 * resident) heap without growing its RSS. */
static int measure_memory(const options *o, mem_result ml[2],
                          mem_result mt[2], char *err)
{
    for (int big = 0; big <= 1; big++) {
        size_t n = big ? (size_t)o->big : (size_t)o->keys;
        if (n == 0)
            continue;
        if (run_in_child(mem_limiter, o, n, &ml[big]) != 0)
            return memcpy(err, ml[big].err, ERRLEN), -1;
        if (run_in_child(mem_table, o, n, &mt[big]) != 0)
            return memcpy(err, mt[big].err, ERRLEN), -1;
    }
    return 0;
}

/* Everything the timed loops read, made before timing: the key strings,
 * each thread's sequence of key indexes, and room for the samples. */
typedef struct lat_input {
    size_t nkeys, nseq;
    char *keys;
    uint32_t *seqs[2];
    uint32_t *lat[2];
} lat_input;

static int lat_input_make(const options *o, lat_input *in, char *err)
{
    size_t nkeys = in->nkeys = (size_t)o->keys;
    size_t nseq = in->nseq = (size_t)o->samples;
    int ok = (in->keys = malloc(nkeys * KEY_STRIDE)) != NULL;

    for (unsigned t = 0; t < 2; t++) {
        ok &= (in->seqs[t] = bench_seq(nseq, nkeys, 0, 1,
                                       0x5EED0000ULL + t)) != NULL;
        ok &= (in->lat[t] = malloc(2 * nseq * sizeof *in->lat[t])) != NULL;
    }
    if (!ok)
        return snprintf(err, ERRLEN, "out of memory for keys and samples"),
               -1;
    for (size_t i = 0; i < nkeys; i++)
        fmt_key(in->keys + i * KEY_STRIDE, (uint32_t)i);
    return 0;
}

static void lat_input_free(lat_input *in)
{
    free(in->keys);
    for (unsigned t = 0; t < 2; t++) {
        free(in->lat[t]);
        free(in->seqs[t]);
    }
}

/* The limiter, pre-filled so every key exists, and the reference table
 * holding the same keys. */
static int lat_prefill(const options *o, const lat_input *in,
                       rl_limiter **lim, bare_table *tab, char *err)
{
    if (make_limiter(o, in->nkeys, lim, err) != RL_OK)
        return -1;
    for (size_t i = 0; i < in->nkeys; i++) {
        rl_result res = RL_RESULT_INIT;
        int rc = rl_allow(*lim, in->keys + i * KEY_STRIDE, RULE_ID, 1, &res);
        if (rc != RL_OK) {
            set_err(err, "rl_allow while pre-filling", rc, errtext(*lim));
            return -1;
        }
    }
    if (bare_init(tab, in->nkeys) != 0) {
        snprintf(err, ERRLEN, "out of memory for the reference table");
        return -1;
    }
    for (size_t i = 0; i < in->nkeys; i++)
        bare_insert(tab, in->keys + i * KEY_STRIDE);
    if (tab->count != in->nkeys) {
        snprintf(err, ERRLEN, "reference table holds %zu keys, not %zu",
                 tab->count, in->nkeys);
        return -1;
    }
    return 0;
}

/* 1. Latency: the timer's own cost, then 1 and 2 threads; then the
 * scaling of 2 threads on keys of their own. */
static int measure_latency(const options *o, char *err)
{
    lat_input in = {0};
    rl_limiter *lim = NULL;
    bare_table tab = {NULL, 0, 0};
    figure f = {.name = "timer_overhead_ns", .unit = "ns"};
    scale_figs sf;
    batch_figs bf;
    int rc = -1;

    if (lat_input_make(o, &in, err) != 0)
        goto out;
    f.value = timer_overhead(in.lat[LIB], in.nseq < 1000000 ? in.nseq
                                                            : 1000000);
    emit(o, &f);
    if (lat_prefill(o, &in, &lim, &tab, err) != 0)
        goto out;
    for (int threads = 1; threads <= 2; threads++) {
        lat_figs lf[2];
        if (run_latency(lim, &tab, in.keys, in.seqs, in.nseq, threads, in.lat,
                        lf, err) != 0)
            goto out;
        emit_latency(o, threads, &lf[LIB], &lf[REF]);
    }
    if (run_scaling(lim, &tab, in.keys, in.nkeys, in.seqs, in.nseq, &sf,
                    err) != 0)
        goto out;
    emit_scaling(o, &sf);
    if (run_batch(lim, &tab, in.keys, in.seqs[0], in.nseq, (size_t)o->batch,
                  &bf, err) != 0)
        goto out;
    emit_batch(o, &bf);
    rc = 0;
out:
    rl_limiter_free(lim);
    bare_free(&tab);
    lat_input_free(&in);
    return rc;
}

static int rl_main(int argc, char **argv)
{
    options o = {.algo = "sliding_window"};
    char err[ERRLEN] = "";
    mem_result ml[2] = {{0}}, mt[2] = {{0}};
    int prc = bench_opt_args(argc, argv, &table, &o);

    if (prc != 0)
        return prc == 1 ? 0 : 2;
    bench_params(&table, &o, o.json); /* the load skews the 2-thread figures */
    if (!o.json)
        print_columns(&layout);
    if (measure_memory(&o, ml, mt, err) != 0 ||
        measure_latency(&o, err) != 0) {
        fprintf(stderr, "rlbench: %s\n", err[0] ? err : "failed");
        return 1;
    }
    /* 2. Memory per tracked key (measured first, see above). */
    emit_memory(&o, "mem_bytes_per_key", (size_t)o.keys, &ml[0], &mt[0], 0);
    if (o.big != 0)
        emit_memory(&o, "mem_bytes_per_key_big", (size_t)o.big, &ml[1],
                    &mt[1], 1);
    return 0;
}

/* The memory store's group: rlbench's own figures, and the modes. */
static const bench_mode modes[] = {
    {.name = "rlbench", .run = rl_main,
     .about = "memory store: ns per check, scaling, batches, bytes per key"},
    {.name = "dryrun", .run = dryrun_main,
     .about = "a rule in mode log beside the same rule enforced"},
    {.name = "metrics", .run = metrics_main,
     .about = "checks per CPU second with metrics on beside off"},
    {.name = "shm", .run = shm_main,
     .about = "shm:// beside memory://, 1 and 2 processes"},
    {.name = "log", .run = log_main,
     .about = "sliding_log beside sliding_window (memory; --port: Redis)"},
    {.name = "match", .run = match_main,
     .about = "rl_check with 10 to 5000 rules; glob matching"},
    {.name = "reserve", .run = reserve_main,
     .about = "rl_reserve then rl_settle beside rl_check (--store: any)"},
    {.name = "values", .run = values_main,
     .about = "rl_check with 10 beside 5000 per-value overrides"},
};

int main(int argc, char **argv)
{
    return bench_modes_main(argc, argv, modes, sizeof modes / sizeof *modes);
}
