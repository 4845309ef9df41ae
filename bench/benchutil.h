/*
 * benchutil.h -- what the programs in bench/ share: the figures they print,
 * error text, an option table, limiters from config pairs, keys and their
 * sequences, threads, two limiters timed in turn (ABBA), latency
 * histograms, the clock, a generator, /proc and the load average.
 *
 * It includes what every bench uses: stdint, stdio, stdlib, string, time
 * and ratelimit.h.
 *
 * A figure is a value with its unit, beside up to two references (ratio =
 * value / ref), and up to FIGURE_EXTRA_MAX (32) extra fields, numbers or
 * strings.  In JSON:
 *   {"name":..,"value":..,"unit":..[,"ref":..,"ref_name":..,"ratio":..]
 *    [,"refs":[{"ref_name":..,"ref":..,"ratio":..},..]][,"<extra>":..]..}
 * ("refs" only when there are two references); in the table it is a row
 * of the columns each program sets out in its text_layout.
 */
#ifndef RL_BENCH_BENCHUTIL_H
#define RL_BENCH_BENCHUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ratelimit.h"

#define ERRLEN 512

/* A number macro as a string, for rl_config_set() values. */
#define BENCH_STR_(x) #x
#define BENCH_STR(x) BENCH_STR_(x)

/* The growable structs' init macros; before the 1.0 header, all zero. */
#ifndef RL_RESULT_INIT
#define RL_RESULT_INIT {0}
#endif
#ifndef RL_REQUEST_INIT
#define RL_REQUEST_INIT {0}
#endif
#ifndef RL_STATS_INIT
#define RL_STATS_INIT {0}
#endif

/* ---- figures ---------------------------------------------------------- */

typedef struct extra {
    const char *name;
    double value;
    const char *str; /* non-NULL: a string field instead */
} extra;

#define FIGURE_EXTRA_MAX 32

typedef struct figure {
    const char *name;
    double value;
    const char *unit;
    int nrefs; /* 0..2; the first is ref/ref_name/ratio */
    double ref[2];
    const char *ref_name[2];
    int nextra;
    extra x[FIGURE_EXTRA_MAX];
} figure;

/* The table's column widths: name, value and ref (width and decimals),
 * unit, ref_name, and the ratio's decimals (the ratio is 7 wide). */
typedef struct text_layout {
    int name_w, num_w, num_prec, unit_w, ref_name_w, ratio_prec;
} text_layout;

/* Adds extra fields (past FIGURE_EXTRA_MAX, none: each named on stderr):
 * a list, XN(name, number) or XS(name, string) each, as
 * XLIST(&f, XN("checks", n), XS("fault", "x")), or one, xnum(&f, name,
 * number) or xstr(&f, name, string). */
#define XN(n, v) {(n), (double)(v), NULL}
#define XS(n, s) {(n), 0, (s)}
#define XLIST(f, ...) xlist((f), (const extra[]){__VA_ARGS__, {NULL, 0, NULL}})
#define xnum(f, n, v) XLIST(f, XN(n, v))
#define xstr(f, n, s) XLIST(f, XS(n, s))

static inline void xlist(figure *f, const extra *x)
{
    for (; x->name != NULL; x++)
        if (f->nextra < FIGURE_EXTRA_MAX)
            f->x[f->nextra++] = *x;
        else
            fprintf(stderr, "%s: field %s left out (FIGURE_EXTRA_MAX)\n",
                    f->name, x->name);
}

/* A string as JSON, quoted, with '"', '\\' and control bytes escaped. */
void json_str(const char *s);

/* f on stdout, a JSON object a line or a table row (and a row more per
 * further reference), flushed. */
void emit_figure(const figure *f, int json, const text_layout *t);

/* The table's heading row: figure value unit ref ref_name ratio. */
void print_columns(const text_layout *t);

/* rl_errmsg() for lim ("" if none; NULL: the thread's last handle-less
 * error, e.g. rl_limiter_new()'s). */
const char *errtext(const rl_limiter *lim);

/* err (ERRLEN bytes) = "what: detail (rc)", detail rl_errmsg() text, or
 * when there is none rl_strerror(rc). */
void set_err(char *err, const char *what, int rc, const char *detail);

/* ---- a command line read by an option table ----------------------------- */

/* The kinds of option. */
enum {
    BENCH_OPT_FLAG,  /* an int set to 1                                */
    BENCH_OPT_QUICK, /* the same, and the counts and reals not given
                        take their quick values                         */
    BENCH_OPT_COUNT, /* an unsigned long long, optionally ending in k, M
                        or G (powers of 1000), in [lo, hi] when hi > 0  */
    BENCH_OPT_REAL,  /* a double in [lo, hi]                            */
    BENCH_OPT_NAME,  /* a const char * (into argv), one of names (names
                        NULL: any)                                      */
    BENCH_OPT_INT    /* an int in [lo, hi] (a port, a number of rounds) */
};

#define BENCH_OPT_MAX 64 /* rows a table may have */

/* One row of an option table: "--name" (a flag), or "--name V" or
 * "--name=V". */
typedef struct bench_opt {
    const char *name;
    int kind;
    size_t off;         /* the field in the bench's options struct      */
    double lo, hi;      /* the bounds of a real (of a count: hi > 0)    */
    double def, quick;  /* counts and reals not given: the full run's
                           value and the quick one (def < 0: left as is) */
    const char *const *names; /* BENCH_OPT_NAME: the values, NULL-ended  */
    const char *help;   /* its line in the usage bench_opt_usage() prints */
} bench_opt;

/* A field's offset in the bench's options struct, whose type each bench
 * names `options`. */
#define OPT_AT(field) offsetof(options, field)

/* The rows every table has, on the fields json and quick of the bench's
 * options struct T. */
#define BENCH_OPT_JSON_ROW(T)                                             \
    {"--json", BENCH_OPT_FLAG, offsetof(T, json),                         \
     .help = "one JSON object a line (the first: \"params\")"}
#define BENCH_OPT_QUICK_ROW(T)                                            \
    {"--quick", BENCH_OPT_QUICK, offsetof(T, quick), .help = "a short run"}

typedef struct bench_opts {
    const bench_opt *rows;
    size_t n;                /* at most BENCH_OPT_MAX                   */
    const char *prog;        /* the name error messages start with     */
    const char *about;       /* the usage's second line: what it measures */
} bench_opts;

/* "usage: PROG [options]", t->about, then a line a row (its help,
 * default, quick value and bounds or names). */
void bench_opt_usage(const bench_opts *t, FILE *f);

/* Reads argv by t into the options struct o, then sets the counts and
 * reals not given to their def, or to their quick value after a
 * BENCH_OPT_QUICK row (rows with def < 0 are left as they are): 0; 1 after
 * --help or -h (the usage on stdout); 2 after saying on stderr what is
 * wrong. */
int bench_opt_args(int argc, char **argv, const bench_opts *t, void *o);

/* The library's version, the CPUs (number, model), each row's value in o
 * but --json's (named without "--", '-' as '_') and the load: the JSON
 * object "params", or "<prog>: libratelimit V, nproc=N, name=value, ...,
 * loadavg=L". */
void bench_params(const bench_opts *t, const void *o, int json);

/* A limiter from rl_config_set() pairs ("key", "value", ..., NULL; a
 * NULL value skips its key), or NULL with err set. */
rl_limiter *bench_limiter(const char *const *kv, char *err);

/* The same with `rules` loaded by rl_rules_load_string(). */
rl_limiter *bench_limiter_rules(const char *const *kv, const char *rules,
                                char *err);

/* n key indexes drawn uniformly (pick(), the generator seeded with seed)
 * from the keys i < nkeys with i % parts == part: one thread's sequence,
 * fixed before timing (malloc'd), or NULL. */
uint32_t *bench_seq(size_t n, unsigned long long nkeys, unsigned part,
                    unsigned parts, uint64_t seed);

/* What a two-thread bench makes before timing: the keys ("0", "1", ...
 * each in `stride` bytes) and each thread's n indexes (bench_seq, seed
 * 0xD27A0000 + thread; split: thread t draws only the keys i % 2 == t). */
typedef struct bench_input {
    char *keys;
    uint32_t *seq[2];
} bench_input;

/* 0, or -1 after "<prog>: out of memory" on stderr (in freed). */
int bench_input_make(bench_input *in, unsigned long long nkeys,
                     size_t stride, size_t n, int split, const char *prog);
void bench_input_free(bench_input *in);

/* v[0..n) sorted ascending; its median (n > 0; the mean of the middle
 * two when n is even), v sorted in passing. */
void sort_doubles(double *v, size_t n);
double median_of(double *v, size_t n);

/* A worker thread's outcome: the FIRST member of a bench's worker struct,
 * so that bench_threads() finds it in workers of any type. */
typedef struct bench_status {
    int rc;             /* 0, or the first failure's code */
    char err[ERRLEN];   /* its message                    */
} bench_status;

/* fn on n workers (the structs at w, size bytes apart, each starting with
 * a bench_status), a thread each, joined: 0, or the first failed worker's
 * rc, its message in err.  A thread that cannot be made ends the program
 * (prog: the message's name). */
int bench_threads(void *w, size_t size, int n, void *(*fn)(void *),
                  const char *prog, char *err);

/* ---- latency histogram: 64 sub-buckets per power of two (~1.6 %) ------ */

#define HB (128 + 41 * 64)

typedef struct hist {
    uint64_t n;
    uint32_t b[HB];
} hist;

void hist_add(hist *h, uint64_t v);
void hist_merge(hist *into, const hist *h);
double hist_pct(const hist *h, double p); /* p in (0, 1]; NAN if empty */

/* ---- two limiters side by side: timed blocks in turn (rlbench dryrun,
 * metrics, redisbench events) ---------------------------------------------- */

#define AB_MAX_PAIRS 1000

/* Two limiters, side 0 (the reference) and side 1, checked in timed blocks
 * of `calls` checks on the same keys by up to 2 threads at once (a barrier
 * starts every block).  Pair p is A B (blocks 2) or A B B A (blocks 4), A
 * being side (first + p) % 2.  A check is rl_check() of endpoint "/api"
 * by the key as user (with all_dims, as ip and api_key too). */
typedef struct ab_run {
    rl_limiter *lim[2];
    const char *keys;       /* key i at keys + i * stride (bench_input) */
    size_t stride, calls;
    int pairs, blocks, first, all_dims;
    hist *h;      /* one thread: one check in 16 timed into h[side]     */
    long pause_ms; /* slept after each timed block (e.g. for a sender)  */
} ab_run;

/* Per pair and side, the threads' mean CPU and wall ns a check; the
 * denials on each side. */
typedef struct ab_result {
    double cpu[AB_MAX_PAIRS][2], wall[AB_MAX_PAIRS][2];
    unsigned long long denied[2];
} ab_result;

/* Keys 0 .. nkeys-1 checked once on each side (state made before timing):
 * 0, or rl_check()'s code with err set. */
int bench_ab_charge(const ab_run *r, size_t nkeys, char *err);

/* r on `threads` threads (seqs[t]: thread t's r->calls key indexes), after
 * an untimed block a side: 0, or the first failure's code with err set. */
int bench_ab(const ab_run *r, uint32_t *const *seqs, int threads,
             ab_result *out, const char *prog, char *err);

/* The 1-minute load average, or -1 when it cannot be read. */
double loadavg1(void);

static inline uint64_t now_ns(void) /* CLOCK_MONOTONIC */
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The calling thread's CPU time, ns (not the time it waited for a core). */
uint64_t thread_cpu_ns(void);

/* Sleeps ms milliseconds, signals or not. */
static inline void bench_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* "<prog>: done in S s, loadavg=L" (S since t_start), or JSON "done". */
void print_done(const char *prog, int json, uint64_t t_start);

static inline uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline uint64_t pick(uint64_t *rng, unsigned long long n) /* uniform < n */
{
    return ((splitmix64(rng) >> 32) * n) >> 32;
}

/* ---- CPU time ----------------------------------------------------------- */

/* The machine's busy and stolen CPU seconds so far (/proc/stat: user, nice,
 * system, irq, softirq; steal); both 0 where it cannot be read. */
void machine_cpu(double *busy, double *steal);

/* /proc/<pid>/stat into buf (len bytes): a pointer to its third field,
 * the state letter (past "pid (comm) "), or NULL. */
const char *proc_stat(long pid, char *buf, size_t len);

/* user + system seconds of a getrusage() result. */
double rusage_seconds(const struct rusage *ru);

/* ---- one program, several benches: a table of modes -------------------- */

/* One bench of a group's program, selected by its name as argv[1]. */
typedef struct bench_mode {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the mode's name */
    const char *about;                 /* one line for --modes        */
} bench_mode;

/* The mode argv[1] names, argv shifted by one; else modes[0], the
 * program's own, with argv as given; "--modes" lists them.  Its status. */
int bench_modes_main(int argc, char **argv, const bench_mode *modes,
                     size_t n);

#endif
