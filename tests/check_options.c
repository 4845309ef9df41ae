/*
 * check_options.c -- the options table (src/options.c) against what it
 * drives and what describes it.  The table drives rl_config_set(): every
 * number's bounds are accepted and the value one past each is refused with
 * the message made from the bounds; a string's length bounds likewise; the
 * defaults parse.  The docs are hand-written, so they are held to the
 * table here: the options and their values and defaults in ratelimit(3)'s
 * "Configuration" table, the option list, its ranges and defaults and the
 * ERRORS list in rl_config_set(3); docs/OPERATING.md keeps no copy of
 * them (issue 26: one place), it links rl_config_set(3) and names options
 * only.  A row added to the table without its docs (or docs left behind by
 * a changed bound) fails here.  The files are read from $top_srcdir.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "ratelimit.h"
#include "testutil.h"

#define LINE_MAX_ 1024
#define MAX_LINES 4096

/* ---- reading the docs --------------------------------------------------- */

typedef struct doc {
    char *text;
    char *line[MAX_LINES];
    size_t n;
} doc;

static void doc_read(doc *d, const char *rel)
{
    const char *top = getenv("top_srcdir");
    char path[512];
    FILE *f;
    long len;

    snprintf(path, sizeof path, "%s/%s", top ? top : ".", rel);
    ck_assert_msg((f = fopen(path, "rb")) != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    rewind(f);
    d->text = malloc((size_t)len + 1);
    ck_assert_ptr_nonnull(d->text);
    ck_assert_int_eq(fread(d->text, 1, (size_t)len, f), (size_t)len);
    d->text[len] = '\0';
    fclose(f);
    d->n = 0;
    for (char *p = d->text; *p && d->n < MAX_LINES;) {
        char *nl = strchr(p, '\n');
        d->line[d->n++] = p;
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
}

/* An mdoc macro name: two letters, an upper then a lower case one. */
static int is_macro(const char *t, size_t n)
{
    return n == 2 && isupper((unsigned char)t[0]) &&
           islower((unsigned char)t[1]);
}

/* The words of mdoc text s, macros dropped ("Ns" glues its neighbours),
 * into out, appended after a space. */
static void mdoc_words(const char *s, char *out, size_t len)
{
    int glue = 0;

    if (*s == '.')
        s += strcspn(s, " ");
    while (*s) {
        size_t n;
        s += strspn(s, " ");
        if (!(n = strcspn(s, " ")))
            break;
        if (n == 2 && strncmp(s, "Ns", 2) == 0)
            glue = 1;
        else if (!is_macro(s, n)) {
            size_t used = strlen(out);
            snprintf(out + used, len - used, "%s%.*s",
                     glue || used == 0 ? "" : " ", (int)n, s);
            glue = 0;
        }
        s += n;
    }
}

/* s contains word w, not as a part of a longer number or name. */
static int has_word(const char *s, const char *w)
{
    size_t n = strlen(w);

    for (const char *p = strstr(s, w); p; p = strstr(p + 1, w))
        if ((p == s || !isalnum((unsigned char)p[-1])) &&
            !isalnum((unsigned char)p[n]) && p[n] != '_')
            return 1;
    return 0;
}

static int is_number(const opt_def *o)
{
    return o->kind != OPT_TEXT && o->kind != OPT_ENUM;
}

/* ---- the table drives parsing ------------------------------------------ */

static void set_fails(const opt_def *o, const char *v, const char *want)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, o->name, v), RL_EOPTION);
    ck_assert_msg(strstr(rl_errmsg(NULL), want) != NULL,
                  "%s=%s: \"%s\" not in \"%s\"", o->name, v, want,
                  rl_errmsg(NULL));
    rl_config_free(cfg);
}

static void set_ok(const opt_def *o, const char *v)
{
    rl_config *cfg = rl_config_new();

    ck_assert_msg(rl_config_set(cfg, o->name, v) == RL_OK, "%s=%s: %s",
                  o->name, v, rl_errmsg(NULL));
    rl_config_free(cfg);
}

START_TEST(numbers_bounds_and_messages)
{
    size_t n;
    const opt_def *t = options_table(&n);

    for (size_t i = 0; i < n; i++) {
        char v[32], want[128];
        if (!is_number(&t[i]))
            continue;
        snprintf(v, sizeof v, "%lld", (long long)t[i].lo);
        set_ok(&t[i], v);
        snprintf(v, sizeof v, "%lld", (long long)t[i].hi);
        set_ok(&t[i], v);
        snprintf(v, sizeof v, "%lld", (long long)t[i].hi + 1);
        snprintf(want, sizeof want, "%s: must be %lld..%lld, got %s",
                 t[i].name, (long long)t[i].lo, (long long)t[i].hi, v);
        set_fails(&t[i], v, want);
        if (t[i].lo > 0) {
            snprintf(v, sizeof v, "%lld", (long long)t[i].lo - 1);
            snprintf(want, sizeof want, "%s: must be %lld..%lld, got %s",
                     t[i].name, (long long)t[i].lo, (long long)t[i].hi, v);
            set_fails(&t[i], v, want);
        }
    }
}
END_TEST

START_TEST(strings_length_bounds)
{
    size_t n;
    const opt_def *t = options_table(&n);

    for (size_t i = 0; i < n; i++) {
        char v[LINE_MAX_], want[128];
        if (t[i].kind != OPT_TEXT || t[i].hi <= 0)
            continue;
        memset(v, 'a', (size_t)t[i].hi + 1);
        v[t[i].hi + 1] = '\0';
        snprintf(want, sizeof want, "%s: must be %lld..%lld bytes, got %lld",
                 t[i].name, (long long)t[i].lo, (long long)t[i].hi,
                 (long long)t[i].hi + 1);
        set_fails(&t[i], v, want);
        v[t[i].hi] = '\0';
        set_ok(&t[i], v);
    }
}
END_TEST

/* Every default is a value rl_config_set() takes, and rl_config_new()
 * holds it: the same numbers as config_defaults(), the text defaults
 * copied. */
START_TEST(defaults_parse)
{
    size_t n;
    const opt_def *t = options_table(&n);
    struct rl_config d;
    rl_config *cfg = rl_config_new();

    config_defaults(&d);
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_eq(options_find(t[i].name), &t[i]);
        ck_assert_msg(t[i].doc && *t[i].doc, "%s: no doc", t[i].name);
        if (!t[i].def)
            continue;
        set_ok(&t[i], t[i].def);
        if (is_number(&t[i]) || t[i].kind == OPT_ENUM)
            ck_assert_int_eq(*(int64_t *)((char *)&d + t[i].off),
                             *(int64_t *)((char *)cfg + t[i].off));
        else
            ck_assert_str_eq(*(char **)((char *)cfg + t[i].off), t[i].def);
    }
    rl_config_free(cfg);
}
END_TEST

/* ---- the docs follow the table ----------------------------------------- */

/* The defaults as the docs write them: "not set" / "none", or the row's. */
static int default_matches(const opt_def *o, const char *text,
                           const char *unset)
{
    if (!o->def)
        return strcmp(text, unset) == 0;
    if (strcmp(text, o->def) == 0)
        return 1;
    /* A byte count may be written with its suffix (1G). */
    if (o->kind == OPT_BYTES) {
        long long v = atoll(o->def);
        char alt[32];
        const char *sfx = "KMG";
        for (int k = 3; k >= 1; k--)
            if (v % (1LL << (10 * k)) == 0) {
                snprintf(alt, sizeof alt, "%lld%c", v >> (10 * k),
                         sfx[k - 1]);
                return strcmp(text, alt) == 0;
            }
    }
    return 0;
}

/* ratelimit(3), "Configuration": ".It Li name Ta values Ta default". */
START_TEST(docs_ratelimit_3)
{
    size_t n, row = 0;
    const opt_def *t = options_table(&n);
    doc d;
    int in = 0;

    doc_read(&d, "man/man3/ratelimit.3");
    for (size_t i = 0; i < d.n; i++) {
        char *cell[3], *l = d.line[i], vals[128];
        char name[128] = "", values[256] = "", def[128] = "";
        if (strcmp(l, ".Ss Configuration") == 0)
            in = 1;
        if (in && strcmp(l, ".El") == 0)
            break;
        if (!in || strncmp(l, ".It Li ", 7) != 0)
            continue;
        cell[0] = l;
        ck_assert_ptr_nonnull(cell[1] = strstr(l, " Ta "));
        ck_assert_ptr_nonnull(cell[2] = strstr(cell[1] + 4, " Ta "));
        *cell[1] = *cell[2] = '\0';
        mdoc_words(cell[0], name, sizeof name);
        mdoc_words(cell[1] + 4, values, sizeof values);
        mdoc_words(cell[2] + 4, def, sizeof def);
        ck_assert_msg(row < n, "ratelimit(3): %s is not in the table", name);
        ck_assert_str_eq(name, t[row].name);
        options_values_text(&t[row], vals, sizeof vals);
        ck_assert_str_eq(values, vals);
        ck_assert_msg(default_matches(&t[row], def, "not set"),
                      "ratelimit(3): %s default \"%s\"", name, def);
        row++;
    }
    ck_assert_msg(row == n, "ratelimit(3) lists %zu options of %zu", row, n);
    free(d.text);
}
END_TEST

/* The text of the option item starting at line i of a ".Bl -tag" list,
 * macros dropped, up to the next item at the same depth; *next: the line
 * after it, or the list's end. */
static void item_text(const doc *d, size_t i, char *out, size_t len,
                      size_t *next)
{
    int depth = 0;

    out[0] = '\0';
    for (i++; i < d->n; i++) {
        const char *l = d->line[i];
        if (strncmp(l, ".Bl", 3) == 0)
            depth++;
        if (strcmp(l, ".El") == 0 && depth-- == 0)
            break;
        if (depth == 0 && strncmp(l, ".It", 3) == 0)
            break;
        mdoc_words(l, out, len);
    }
    *next = i;
}

/* A number's item says its bounds and its default. */
static void item_says(const opt_def *o, const char *text)
{
    char lo[32], hi[32], def[64], the[64];

    snprintf(lo, sizeof lo, "%lld", (long long)o->lo);
    snprintf(hi, sizeof hi, "%lld", (long long)o->hi);
    if (is_number(o) || o->kind == OPT_TEXT) {
        ck_assert_msg(o->hi == 0 || (has_word(text, lo) && has_word(text, hi)),
                      "rl_config_set(3): %s does not say %s and %s",
                      o->name, lo, hi);
    }
    if (!o->def)
        return;
    snprintf(def, sizeof def, "Default %s", o->def);
    snprintf(the, sizeof the, "%s (the default)", o->def);
    ck_assert_msg(strstr(text, def) || strstr(text, the),
                  "rl_config_set(3): %s does not say \"%s\"", o->name, def);
}

/* rl_config_set(3): the ".Ss Options" list and the numbers in ERRORS. */
START_TEST(docs_rl_config_set_3)
{
    size_t n, row = 0, i = 0;
    const opt_def *t = options_table(&n);
    static char text[16384];
    doc d;

    doc_read(&d, "man/man3/rl_config_set.3");
    while (i < d.n && strcmp(d.line[i], ".Ss Options") != 0)
        i++;
    for (i += 2; i < d.n && strncmp(d.line[i], ".It Li ", 7) == 0;) {
        const char *name = d.line[i] + 7;
        ck_assert_msg(row < n, "rl_config_set(3): %s is not in the table",
                      name);
        ck_assert_str_eq(name, t[row].name);
        item_text(&d, i, text, sizeof text, &i);
        item_says(&t[row], text);
        row++;
    }
    ck_assert_msg(row == n, "rl_config_set(3) lists %zu options of %zu",
                  row, n);
    /* ERRORS: "the value of .Li a , .Li b ... is not a number". */
    while (i < d.n && !strstr(d.line[i], "the value of"))
        i++;
    row = 0;
    for (i++; i < d.n && !strstr(d.line[i], "is not a number"); i++) {
        if (strncmp(d.line[i], ".Li ", 4) != 0)
            continue;
        while (row < n && !is_number(&t[row]))
            row++;
        ck_assert_msg(row < n, "ERRORS: %s is no number option", d.line[i]);
        ck_assert_int_eq(strncmp(d.line[i] + 4, t[row].name,
                                 strlen(t[row].name)), 0);
        row++;
    }
    while (row < n && !is_number(&t[row]))
        row++;
    ck_assert_msg(row == n, "ERRORS leaves out %s", row < n ? t[row].name : "");
    free(d.text);
}
END_TEST

/* docs/OPERATING.md, "Configuration options": no copy of the options'
 * defaults and bounds (a table row "| `name` |"), a link to
 * rl_config_set(3), and every `name` it gives an option (`tls_*` names a
 * group). */
START_TEST(docs_operating_md)
{
    size_t i = 0, named = 0;
    int linked = 0;
    doc d;

    doc_read(&d, "docs/OPERATING.md");
    while (i < d.n && strncmp(d.line[i], "## Configuration options", 24) != 0)
        i++;
    ck_assert_msg(i < d.n, "docs/OPERATING.md: no Configuration options");
    for (i++; i < d.n && strncmp(d.line[i], "## ", 3) != 0; i++) {
        const char *l = d.line[i];
        ck_assert_msg(strncmp(l, "| `", 3) != 0,
                      "docs/OPERATING.md repeats rl_config_set(3): %s", l);
        linked |= strstr(l, "(../man/man3/rl_config_set.3)") != NULL;
        for (l = strchr(l, '`'); l && strchr(l + 1, '`');
             l = strchr(strchr(l + 1, '`') + 1, '`')) {
            char name[64];
            size_t len = strcspn(l + 1, "`");
            snprintf(name, sizeof name, "%.*s", (int)len, l + 1);
            if (strchr(name, '*') || strspn(name, "abcdefghijklmnopqrstuvwxyz_") != len)
                continue;
            ck_assert_msg(options_find(name) != NULL,
                          "docs/OPERATING.md: `%s` is no option", name);
            named++;
        }
    }
    ck_assert_msg(linked, "docs/OPERATING.md: no link to rl_config_set(3)");
    ck_assert_msg(named > 0, "docs/OPERATING.md names no option");
    free(d.text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("options");
    TCase *tc = tcase_create("options");

    tcase_add_test(tc, numbers_bounds_and_messages);
    tcase_add_test(tc, strings_length_bounds);
    tcase_add_test(tc, defaults_parse);
    tcase_add_test(tc, docs_ratelimit_3);
    tcase_add_test(tc, docs_rl_config_set_3);
    tcase_add_test(tc, docs_operating_md);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
