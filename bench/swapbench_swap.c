/*
 * swapbench_swap.c -- swapbench's (a): checks/s while another thread swaps
 * the rule set, beside no swaps and parse only.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include "swapbench.h"

enum { NO_SWAPS, SWAPS, PARSE_ONLY, MODES };

typedef struct swapper {
    rl_limiter *lim;
    const char *text[2];       /* r0's limit differs (--same-text: not) */
    size_t len[2];
    unsigned turn[MODES];      /* loads made in each mode: the next text
                                  is text[(turn + 1) & 1]               */
    rl_ruleset *held;          /* PARSE_ONLY: the set last parsed, which
                                  the next parse takes as in force      */
    int mode;                  /* SWAPS or PARSE_ONLY                   */
    uint64_t interval_ns;
    _Atomic int stop;
    uint64_t swaps, swap_ns, failures;
} swapper;

/* What the library does with a new set's text given the set in force
 * (prev): parse it, reusing prev's unchanged rules (rules_take_json()). */
int parse_next(const char *text, size_t len, const rl_ruleset *prev,
                      rl_ruleset **out, char *err)
{
    return ruleset_parse_delta(text, len, -1, prev, out, NULL, err, ERRLEN);
}

/* Every interval: load the next set (SWAPS), or parse it against the set
 * last parsed and keep it in place of that one, never swapping
 * (PARSE_ONLY: the same CPU on the other thread, no swap). */
static void *swapper_main(void *arg)
{
    swapper *s = arg;
    uint64_t next = now_ns();
    char err[ERRLEN];

    while (!atomic_load(&s->stop)) {
        uint64_t t0 = now_ns();
        unsigned k = ++s->turn[s->mode] & 1;
        rl_ruleset *rs = NULL;
        int rc = s->mode == SWAPS
                     ? rl_rules_load_string(s->lim, s->text[k])
                     : parse_next(s->text[k], s->len[k], s->held, &rs, err);
        if (rs) {
            ruleset_free(s->held);
            s->held = rs;
        }
        if (rc == RL_OK && s->mode == SWAPS)
            s->swaps++;
        else if (rc != RL_OK)
            s->failures++;
        s->swap_ns += now_ns() - t0;
        next += s->interval_ns;
        if (next > now_ns())
            sleep_ns(next - now_ns());
    }
    return NULL;
}

/* rl_allow() for `seconds`; the checks made.  Ids and keys are drawn
 * ahead, so the loop costs the call and little else. */
static uint64_t check_for(rl_limiter *lim, double seconds,
                          unsigned long long rules, uint64_t *denied)
{
    static char ids[4096][16], keys[4096][16];
    uint64_t rng = 42, n = 0, until = now_ns() + (uint64_t)(seconds * 1e9);
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 4096; i++) {
        snprintf(ids[i], sizeof ids[i], "r%llu",
                 (unsigned long long)pick(&rng, rules));
        snprintf(keys[i], sizeof keys[i], "user:%llu",
                 (unsigned long long)pick(&rng, USERS));
    }
    while (now_ns() < until) {
        for (int i = 0; i < 256; i++, n++) {
            if (rl_allow(lim, keys[n & 4095], ids[(n * 7) & 4095], 1,
                         &res) != RL_OK || !res.allowed)
                ++*denied;
        }
    }
    return n;
}

/* One block of checks with the other thread in `mode`; busy: the cores
 * the whole machine kept busy meanwhile. */
static uint64_t block(rl_limiter *lim, const options *o, swapper *sw,
                      int mode, uint64_t *denied, double *busy)
{
    double b0, b1, st;
    pthread_t th;
    uint64_t n;

    machine_cpu(&b0, &st);
    sw->mode = mode;
    atomic_store(&sw->stop, 0);
    if (mode != NO_SWAPS)
        pthread_create(&th, NULL, swapper_main, sw);
    n = check_for(lim, o->seconds, o->rules, denied);
    atomic_store(&sw->stop, 1);
    if (mode != NO_SWAPS)
        pthread_join(th, NULL);
    machine_cpu(&b1, &st);
    *busy += (b1 - b0) / o->seconds;
    return n;
}

int bench_swap(const options *o, char *err)
{
    char *text = rule_set(o->rules, o->minimal, -1, RULE_LIMIT);
    char *text2 = rule_set(o->rules, o->minimal, -1,
                           o->same_text ? RULE_LIMIT : RULE_LIMIT - 1);
    rl_limiter *lim = NULL;
    uint64_t n[MODES] = {0}, denied = 0, swap_ns = 0;
    double busy[MODES] = {0}, secs = o->seconds * (double)o->rounds;
    swapper sw = {.interval_ns = (uint64_t)(o->interval_ms * 1e6)};
    figure f = {.name = "swap_checks_per_s", .unit = "checks/s", .nrefs = 2,
                .ref_name = {"no_swaps", "parse_only"}};
    int rc = RL_ENOMEM;

    if (!text || !text2 || (rc = rl_limiter_new(&lim, NULL)) != RL_OK ||
        (rc = rl_rules_load_string(lim, text)) != RL_OK ||
        (rc = parse_next(text, strlen(text), NULL, &sw.held, err)) != RL_OK) {
        set_err(err, "swap: limiter", rc, errtext(lim));
        rl_limiter_free(lim);
        free(text);
        free(text2);
        return -1;
    }
    sw.lim = lim;
    sw.text[0] = text;
    sw.text[1] = text2;
    sw.len[0] = strlen(text);
    sw.len[1] = strlen(text2);
    for (unsigned long long r = 0; r < o->rounds; r++)
        for (int m = 0; m < MODES; m++) { /* rotate the order by round */
            int mode = (int)((m + r) % MODES);
            uint64_t before = sw.swap_ns;
            n[mode] += block(lim, o, &sw, mode, &denied, &busy[mode]);
            if (mode == SWAPS)
                swap_ns += sw.swap_ns - before;
        }
    f.value = (double)n[SWAPS] / secs;
    f.ref[0] = (double)n[NO_SWAPS] / secs;
    f.ref[1] = (double)n[PARSE_ONLY] / secs;
    XLIST(&f, XN("target", TARGET_RATIO), XN("rules", o->rules),
          XN("text_bytes", sw.len[0]),
          XS("change", o->same_text ? "none" : "r0"),
          XN("interval_ms", o->interval_ms), XN("swaps", sw.swaps),
          XN("swap_ms_mean", sw.swaps ? swap_ns / 1e6 / sw.swaps : 0),
          XN("failures", sw.failures), XN("denied", denied),
          XN("busy_cores_no_swaps", busy[NO_SWAPS] / (double)o->rounds),
          XN("busy_cores_swaps", busy[SWAPS] / (double)o->rounds),
          XN("busy_cores_parse_only", busy[PARSE_ONLY] / (double)o->rounds));
    emit_figure(&f, o->json, &layout);
    rl_limiter_free(lim);
    ruleset_free(sw.held);
    free(text);
    free(text2);
    return 0;
}
