
/*
 * rlbench.c -- how fast and how big is libratelimit's in-process store?
 *
 * It measures two things through the public API only, each beside a
 * reference measured in the same run on the same machine.  (1) Latency:
 * nanoseconds per rl_allow() on the "memory://" store, median (p50) and
 * 99th percentile (p99), with --keys distinct keys (1M by default) already
 * in the store, on 1 thread and then on 2 threads sharing one limiter.  Keys
 * are strings like "user:123456" made before timing; every thread draws
 * them uniformly from the same set along a sequence fixed before timing.
 * Each call is timed alone with clock_gettime(CLOCK_MONOTONIC), so every
 * sample also carries the clock's own cost (an empty sample's median is
 * printed as timer_overhead_ns); the *_mean_untimed lines repeat the run
 * without per-call clocks and give the plain mean.  The reference,
 * "bare_hash_lookup", is the least any store must do: hash the same key
 * string (FNV-1a with a 64-bit finalizer) and find its slot in a plain
 * open-addressing, linear-probing, power-of-two table of 24-byte slots
 * (64-bit hash + 16 bytes of state), read-only and lock-free, timed the same
 * way on the same keys.  Library and reference alternate block by block so
 * drift on a shared machine hits both alike.  (2) Memory: bytes per tracked
 * key, i.e. the growth of the resident set (/proc/self/statm) while N new
 * keys are charged through rl_allow() on a fresh limiter, divided by N, at
 * --keys and at --big keys (10M by default); the empty limiter's own
 * footprint is shown apart as empty_store_bytes.  Each memory figure is
 * taken first, in a forked child of a still-small parent, so no freed heap
 * can be refilled unseen.  References: the design note's budget of 100 B
 * per key ("design_note") and the bare table above holding the same N keys
 * at a load factor of at most 0.75 ("bare_hash_table").
 *
 * Reading the ratios: ratio = value / ref.  For latency it is what the
 * library's check (argument checks, rule lookup, clock, algorithm, locking)
 * costs over a bare lookup of the same key; 1.0 would be free, and a
 * 2-thread ratio well above the 1-thread one means the store scales worse
 * than an uncontended read (cpu_share below 1 means something else took the
 * CPU and the 2-thread figures are suspect).  The timed reference looks
 * slower than its untimed mean because the clock reads stop the CPU from
 * overlapping one lookup's cache misses with the next; rl_allow() gains
 * little from that overlap, so the untimed ratio is the larger.  For memory,
 * a ratio below 1 against design_note is within budget, and the ratio
 * against bare_hash_table says how close the store is to a minimal table.
 * Rules use a limit of 10^9 so nothing is denied (a denial takes the same
 * path); any denial is counted in the "denied" field.  (3) Scaling:
 * "mem_check_scaling_2t" is 2 threads' checks per second, each thread on
 * keys of its own (even or odd indexes), over 1 thread's, untimed; the
 * reference is the bare lookup's same ratio in the same run (what the 2
 * cores give a lock-free read at the moment).  (4) Batches:
 * "mem_check_many_mean_untimed_1t" is the untimed mean per check when the
 * same keys come --batch at a time through rl_check_many() (each request's
 * user the key's value, so the same state is charged), beside the bare
 * lookup's untimed mean in the same run.  (5) Chained:
 * "mem_check_mean_chained_*" repeat the untimed pass with each key's index
 * depending on the previous call's answer (an always-zero bit of it), so
 * neither the library nor the reference can start the next call's cache
 * misses before the last call is done: a server's checks, each waiting
 * for the request the last one let through, see this latency; the plain
 * untimed mean lets the bare loop (~110 instructions a lookup) overlap
 * several lookups' misses, which a check (~1,000) cannot.  Issue 11's
 * targets ride
 * along as target_max_ratio (the 1-thread untimed mean over the bare
 * lookup's) and target_min (the scaling).
 *
 * Latency lives in rlbench_latency.c, scaling in rlbench_scaling.c,
 * batches in rlbench_batch.c,
 * memory in rlbench_memory.c, the reference table in rlbench_bare.c, the
 * rest they share in rlbench_util.c and rlbench.h; this file reads the command line, runs the
 * figures and prints them.
 */
#include "benchmodes.h"
#include "rlbench.h"

#include <stddef.h>


static void usage(FILE *f)
{
    fprintf(f,
            "usage: rlbench [--json] [--quick] [--keys N] [--big N] "
            "[--samples N] [--algo NAME] [--batch N]\n"
            "\n"
            "Measures libratelimit's memory store: ns per rl_allow() (p50, p99;\n"
            "1 and 2 threads), 2 threads' checks/s on keys of their own over 1\n"
            "thread's, and bytes per tracked key, each beside a reference\n"
            "measured in the same run.  ratio = value / ref.\n"
            "\n"
            "  --json       one JSON object per line (first: name \"params\")\n"
            "  --keys N     distinct keys for latency and memory (default 1000000)\n"
            "  --big N      keys for the second memory figure (default 10000000;\n"
            "               0 skips it)\n"
            "  --samples N  timed calls per thread per run (default 2000000)\n"
            "  --algo NAME  sliding_window (default), token_bucket, fixed_window,\n"
            "               gcra\n"
            "  --batch N    requests per rl_check_many() call for the batch\n"
            "               figure (default 32)\n"
            "  --quick      smoke run: 100k keys, 1M big, 200k samples\n"
            "  --help       this text\n"
            "N may end in k, M or G (powers of 1000).\n");
}

/* ---- the command line: one row an option ---------------------------------- */

#define OPT_AT(field) offsetof(options, field)

static const char *const algos[] = {"sliding_window", "token_bucket",
                                    "fixed_window", "gcra", NULL};

static const bench_opt opts[] = {
    {"--json", BENCH_OPT_FLAG, OPT_AT(json), 0, 0, -1, -1, NULL},
    {"--quick", BENCH_OPT_QUICK, OPT_AT(quick), 0, 0, -1, -1, NULL},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, MAX_KEYS, 1000000, 100000,
     NULL},
    {"--big", BENCH_OPT_COUNT, OPT_AT(big), 0, MAX_KEYS, 10000000, 1000000,
     NULL},
    {"--samples", BENCH_OPT_COUNT, OPT_AT(samples), 100, MAX_SAMPLES,
     2000000, 200000, NULL},
    {"--algo", BENCH_OPT_NAME, OPT_AT(algo), 0, 0, -1, -1, algos},
    {"--batch", BENCH_OPT_COUNT, OPT_AT(batch), 2, 1024, 32, 32, NULL},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "rlbench",
    .usage = usage};

/* Returns 0 to run, 1 to exit 0 (help), 2 on a usage error. */
static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->algo = "sliding_window";
    return bench_opt_args(argc, argv, &table, o);
}


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
    figure f = {0};

    f.name = name;
    f.value = value;
    f.unit = unit;
    f.nrefs = 1;
    f.ref[0] = ref;
    f.ref_name[0] = "bare_hash_lookup";
    return f;
}

static void emit_latency(const options *o, int threads, const lat_figs *lib,
                         const lat_figs *ref)
{
    static const char *names[2][4] = {
        {"mem_check_p50_1t", "mem_check_p99_1t", "mem_check_mean_untimed_1t",
         "mem_check_mean_chained_1t"},
        {"mem_check_p50_2t", "mem_check_p99_2t", "mem_check_mean_untimed_2t",
         "mem_check_mean_chained_2t"}};
    const double v[4] = {lib->p50, lib->p99, lib->untimed, lib->chained};
    const double r[4] = {ref->p50, ref->p99, ref->untimed, ref->chained};
    const double ref_x[3] = {ref->mean, ref->p999, ref->cpu_share};

    for (int i = 0; i < 4; i++) {
        figure f = beside_bare(names[threads - 1][i], v[i], "ns", r[i]);
        xnum(&f, "threads", threads);
        xnum(&f, "keys", (double)o->keys);
        if (i == 0) { /* the timed samples' mean, beside the median */
            xnum(&f, "mean", lib->mean);
            xnum(&f, "ref_mean", ref_x[i]);
        } else if (i == 1) {
            xnum(&f, "p999", lib->p999);
            xnum(&f, "ref_p999", ref_x[i]);
        } else if (i == 2) {
            xnum(&f, "cpu_share", lib->cpu_share);
            xnum(&f, "ref_cpu_share", ref_x[i]);
            if (threads == 1)
                xnum(&f, "target_max_ratio", TARGET_UNTIMED_RATIO_1T);
        }
        xnum(&f, "denied", (double)lib->denied);
        emit(o, &f);
    }
}

static void emit_scaling(const options *o, const scale_figs *s)
{
    figure f = beside_bare("mem_check_scaling_2t", s->ratio[LIB], "x",
                           s->ratio[REF]);

    xnum(&f, "checks_per_s_1t", s->per_s_1t[LIB]);
    xnum(&f, "checks_per_s_2t", s->per_s_2t[LIB]);
    xnum(&f, "ref_per_s_1t", s->per_s_1t[REF]);
    xnum(&f, "ref_per_s_2t", s->per_s_2t[REF]);
    xnum(&f, "keys", (double)o->keys);
    xnum(&f, "target_min", TARGET_SCALING_2T);
    emit(o, &f);
}

static void emit_batch(const options *o, const batch_figs *b)
{
    figure f = beside_bare("mem_check_many_mean_untimed_1t",
                           b->per_check_ns[LIB], "ns", b->per_check_ns[REF]);

    xnum(&f, "threads", 1);
    xnum(&f, "batch", (double)o->batch);
    xnum(&f, "keys", (double)o->keys);
    xnum(&f, "denied", (double)b->denied);
    emit(o, &f);
}

static void emit_memory(const options *o, const char *name, size_t n,
                        const mem_result *lib, const mem_result *ref,
                        int with_target)
{
    figure f = {0};

    f.name = name;
    f.value = lib->bytes_per_key;
    f.unit = "B";
    f.nrefs = 2;
    f.ref[0] = DESIGN_NOTE_BYTES_PER_KEY;
    f.ref_name[0] = "design_note";
    f.ref[1] = ref->bytes_per_key;
    f.ref_name[1] = "bare_hash_table";
    xnum(&f, "keys", (double)n);
    xnum(&f, "empty_store_bytes", lib->empty_bytes);
    xnum(&f, "insert_ns", lib->insert_ns);
    xnum(&f, "bare_insert_ns", ref->insert_ns);
    xnum(&f, "denied", (double)lib->denied);
    if (with_target)
        xnum(&f, "target_max", TARGET_BYTES_PER_KEY_BIG);
    emit(o, &f);
}

/* ---- main ------------------------------------------------------------------ */

static void print_params(const options *o)
{
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    /* Other work on the machine skews the 2-thread figures: show it. */
    double load = loadavg1();

    if (o->json)
        printf("{\"name\":\"params\",\"nproc\":%ld,\"keys\":%llu,\"big\":%llu,"
               "\"samples_per_thread\":%llu,\"algorithm\":\"%s\","
               "\"quick\":%s,\"timer\":\"clock_gettime(CLOCK_MONOTONIC)\","
               "\"library\":\"%s\",\"loadavg_1m\":%.2f}\n",
               nproc, o->keys, o->big, o->samples, o->algo,
               o->quick ? "true" : "false", rl_version_string(), load);
    else {
        printf("rlbench: libratelimit %s, nproc=%ld, keys=%llu, big=%llu, "
               "samples=%llu/thread, algorithm=%s, loadavg=%.2f%s\n",
               rl_version_string(), nproc, o->keys, o->big, o->samples,
               o->algo, load, o->quick ? " (quick)" : "");
        print_columns(&layout);
    }
    fflush(stdout);
}

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
        if (run_in_child(mem_limiter, o, n, &ml[big]) != 0) {
            memcpy(err, ml[big].err, ERRLEN);
            return -1;
        }
        if (run_in_child(mem_table, o, n, &mt[big]) != 0) {
            memcpy(err, mt[big].err, ERRLEN);
            return -1;
        }
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

    in->keys = malloc(nkeys * KEY_STRIDE);
    for (unsigned t = 0; t < 2; t++)
        in->seqs[t] = bench_seq(nseq, nkeys, 0, 1, 0x5EED0000ULL + t);
    in->lat[LIB] = malloc(2 * nseq * sizeof *in->lat[LIB]);
    in->lat[REF] = malloc(2 * nseq * sizeof *in->lat[REF]);
    if (in->keys == NULL || in->seqs[0] == NULL || in->seqs[1] == NULL ||
        in->lat[LIB] == NULL || in->lat[REF] == NULL) {
        snprintf(err, ERRLEN, "out of memory for keys and samples");
        return -1;
    }
    for (size_t i = 0; i < nkeys; i++)
        fmt_key(in->keys + i * KEY_STRIDE, (uint32_t)i);
    return 0;
}

static void lat_input_free(lat_input *in)
{
    free(in->keys);
    free(in->lat[LIB]);
    free(in->lat[REF]);
    free(in->seqs[0]);
    free(in->seqs[1]);
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
    figure f = {0};
    scale_figs sf;
    batch_figs bf;
    int rc = -1;

    if (lat_input_make(o, &in, err) != 0)
        goto out;
    f.name = "timer_overhead_ns";
    f.value = timer_overhead(in.lat[LIB], in.nseq < 1000000 ? in.nseq
                                                            : 1000000);
    f.unit = "ns";
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
    options o;
    int prc;
    char err[ERRLEN] = "";
    mem_result ml[2] = {{0}}, mt[2] = {{0}};

    prc = parse_args(argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    print_params(&o);
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
