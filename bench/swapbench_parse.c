/*
 * swapbench_parse.c -- swapbench's (d): a rule set's parse, whole and with
 * one rule changed, beside jansson's json_loadb() of the same text.
 */
#include "swapbench.h"

enum { P_JANSSON, P_FULL, P_ONE, P_KINDS };

typedef struct parse_run {
    const char *text[2];       /* the set, and the set with r0 changed  */
    size_t len[2];
    const rl_ruleset *prev;    /* the set parsed from text[0]           */
    uint64_t ns[P_KINDS], calls[P_KINDS], failures;
} parse_run;

/* Parse for `seconds` as `kind` says: jansson's DOM alone (the
 * reference), the whole set, or the changed set against the set of the
 * unchanged one (what taking a one-rule change costs).  Each result is
 * freed after the next is made, as a limiter frees the set it replaces
 * (parse, free, parse... would time the allocator giving memory back to
 * the system and faulting it in again). */
static void parse_block(parse_run *p, int kind, double seconds)
{
    uint64_t t0 = now_ns(), until = t0 + (uint64_t)(seconds * 1e9), n = 0;
    rl_ruleset *held = NULL;
    json_t *held_doc = NULL;
    char err[ERRLEN];

    do {
        rl_ruleset *rs = NULL;
        json_t *doc = NULL;
        int ok;
        if (kind == P_JANSSON)
            ok = (doc = json_loadb(p->text[0], p->len[0],
                                   JSON_REJECT_DUPLICATES, NULL)) != NULL;
        else if (kind == P_FULL)
            ok = ruleset_parse(p->text[0], p->len[0], -1, &rs, err,
                               sizeof err) == RL_OK;
        else
            ok = parse_next(p->text[1], p->len[1], p->prev, &rs, err) ==
                 RL_OK;
        json_decref(held_doc);
        ruleset_free(held);
        held_doc = doc;
        held = rs;
        p->failures += !ok;
        n++;
    } while (now_ns() < until);
    p->ns[kind] += now_ns() - t0;
    p->calls[kind] += n;
    json_decref(held_doc);
    ruleset_free(held);
}

/* What taking the change does: the rules it copies, those it parses. */
static void note_reuse(figure *f, const parse_run *p)
{
    rl_ruleset *rs = NULL;
    delta_info di;
    char err[ERRLEN];

    ruleset_parse_delta(p->text[1], p->len[1], -1, p->prev, &rs, &di, err,
                        sizeof err);
    XLIST(f, XN("reused", di.reused),
          XN("parsed", di.whole && rs ? rs->n : di.parsed));
    ruleset_free(rs);
}

static double mean_ms(const parse_run *p, int kind)
{
    return p->calls[kind] ? p->ns[kind] / 1e6 / (double)p->calls[kind] : 0;
}

int bench_parse(const options *o, char *err)
{
    char *text = rule_set(o->rules, o->minimal, 7, RULE_LIMIT);
    char *text2 = rule_set(o->rules, o->minimal, 8, RULE_LIMIT - 1);
    rl_ruleset *prev = NULL;
    parse_run p = {.text = {text, text2}};
    figure full = {.name = "parse_full_ms", .unit = "ms", .nrefs = 1,
                   .ref_name = {"jansson_load"}};
    figure one = {.name = "parse_one_changed_ms", .unit = "ms", .nrefs = 1,
                  .ref_name = {"parse_full"}};
    int rc = RL_ENOMEM;

    if (!text || !text2 ||
        (rc = parse_next(text, strlen(text), NULL, &prev, err)) != RL_OK) {
        if (!err[0])
            set_err(err, "parse", rc, "");
        free(text);
        free(text2);
        return -1;
    }
    p.len[0] = strlen(text);
    p.len[1] = strlen(text2);
    p.prev = prev;
    note_reuse(&one, &p);
    for (unsigned long long r = 0; r < o->rounds; r++)
        for (int k = 0; k < P_KINDS; k++)
            parse_block(&p, (int)((k + r) % P_KINDS), o->seconds / 2);
    full.value = mean_ms(&p, P_FULL);
    full.ref[0] = mean_ms(&p, P_JANSSON);
    one.value = mean_ms(&p, P_ONE);
    one.ref[0] = full.value;
    XLIST(&full, XN("rules", o->rules), XN("text_bytes", p.len[0]),
          XN("calls", p.calls[P_FULL]));
    XLIST(&one, XN("calls", p.calls[P_ONE]), XN("failures", p.failures));
    emit_figure(&full, o->json, &layout);
    emit_figure(&one, o->json, &layout);
    ruleset_free(prev);
    free(text);
    free(text2);
    return p.failures ? (snprintf(err, ERRLEN, "parse: %llu failures",
                                  (unsigned long long)p.failures), -1)
                      : 0;
}
