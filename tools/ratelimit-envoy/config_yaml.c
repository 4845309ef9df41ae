/*
 * config_yaml.c -- envoyproxy/ratelimit's YAML configuration read into the
 * tree of envoy_rls.h, with libyaml's document loader (so every error
 * names its file and line).  A directory is read whole (its *.yaml and
 * *.yml files, one domain each, in name order) or not at all: a file with
 * an error refuses the set, and the caller keeps the one it has.  The
 * keys are upstream's (README "Configuration"), strictly: an unknown key
 * is an error, as it is upstream; `algorithm` and `failure_mode` in a
 * rate_limit are ours.  Aliases are followed, a walk bounded by
 * WALK_NODES_MAX so no file expands without end.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "envoy_rls.h"

#define FILE_MAX (4 << 20)       /* bytes of one configuration file  */
#define FILES_MAX 4096           /* files in a directory             */
#define WALK_NODES_MAX 1000000   /* nodes visited in one file        */
#define DEPTH_MAX 32             /* nested descriptors               */

typedef struct walk {
    yaml_document_t *doc;
    const char *file;
    char *err;
    size_t errlen;
    long visited;
} walk;

static int fail(walk *w, const yaml_node_t *n, const char *fmt, ...)
{
    char what[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(w->err, w->errlen, "%s:%lu: %s", w->file,
             n ? (unsigned long)n->start_mark.line + 1 : 0UL, what);
    return -1;
}

static yaml_node_t *node(walk *w, int id)
{
    w->visited++;
    return yaml_document_get_node(w->doc, id);
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value
                                            : NULL;
}

static int get_str(walk *w, yaml_node_t *n, const char *what, char **out)
{
    const char *s = scalar(n);

    if (!s)
        return fail(w, n, "%s: a string expected", what);
    if (strlen(s) != n->data.scalar.length)
        return fail(w, n, "%s: holds a NUL byte", what);
    if (!(*out = strdup(s)))
        return fail(w, n, "out of memory");
    return 0;
}

static int get_bool(walk *w, yaml_node_t *n, const char *what, int *out)
{
    const char *s = scalar(n);

    if (s && (!strcasecmp(s, "true") || !strcasecmp(s, "yes")))
        return *out = 1, 0;
    if (s && (!strcasecmp(s, "false") || !strcasecmp(s, "no")))
        return *out = 0, 0;
    return fail(w, n, "%s: true or false expected", what);
}

static const char *const unit_names[RLS_UNIT_COUNT] = {
    [RLS_UNIT_SECOND] = "second", [RLS_UNIT_MINUTE] = "minute",
    [RLS_UNIT_HOUR] = "hour",     [RLS_UNIT_DAY] = "day",
    [RLS_UNIT_WEEK] = "week",     [RLS_UNIT_MONTH] = "month",
    [RLS_UNIT_YEAR] = "year"};

static int get_unit(walk *w, yaml_node_t *n, int *out)
{
    const char *s = scalar(n);

    for (int u = 1; s && u < RLS_UNIT_COUNT; u++)
        if (!strcasecmp(s, unit_names[u])) {
            if (!rls_unit_seconds(u))
                return fail(w, n, "unit: %s is longer than the library's "
                            "longest window (31 days)", s);
            return *out = u, 0;
        }
    return fail(w, n, "unit: second, minute, hour, day, week or month "
                "expected");
}

static int get_choice(walk *w, yaml_node_t *n, const char *what,
                      const char *const *names, const char **out)
{
    const char *s = scalar(n);

    for (size_t i = 0; s && names[i]; i++)
        if (!strcmp(s, names[i]))
            return *out = names[i], 0;
    return fail(w, n, "%s: unknown value", what);
}

static const char *const algorithms[] = {"sliding_window", "fixed_window",
                                         "token_bucket", "gcra",
                                         "sliding_log", NULL};
static const char *const failures[] = {"fallback", "open", "closed", NULL};

static int get_replaces(walk *w, yaml_node_t *n, ecfg_limit *l)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(w, n, "replaces: a list expected");
    size_t cnt = (size_t)(n->data.sequence.items.top -
                          n->data.sequence.items.start);
    if (!(l->replaces = calloc(cnt ? cnt : 1, sizeof *l->replaces)))
        return fail(w, n, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *it = node(w, n->data.sequence.items.start[i]);
        yaml_node_t *name = NULL;
        if (!it || it->type != YAML_MAPPING_NODE)
            return fail(w, it ? it : n, "replaces: {name: ...} expected");
        for (yaml_node_pair_t *p = it->data.mapping.pairs.start;
             p < it->data.mapping.pairs.top; p++) {
            const char *k = scalar(node(w, p->key));
            if (!k || strcmp(k, "name"))
                return fail(w, node(w, p->key), "replaces: unknown key");
            name = node(w, p->value);
        }
        if (!name || get_str(w, name, "replaces: name", &l->replaces[i]))
            return name ? -1 : fail(w, it, "replaces: name required");
        l->nreplaces++;
    }
    return 0;
}

static int rate_limit_key(walk *w, ecfg_limit *l, const char *k,
                          yaml_node_t *v, int *has_unit, int *has_rpu)
{
    if (!strcmp(k, "unit"))
        return *has_unit = 1, get_unit(w, v, &l->unit);
    if (!strcmp(k, "requests_per_unit")) {
        const char *s = scalar(v);
        char *end;
        unsigned long long x;
        errno = 0;
        x = s ? strtoull(s, &end, 10) : 0;
        if (!s || !*s || *end || *s == '-' || errno || x > RLS_RPU_MAX)
            return fail(w, v, "requests_per_unit: 0..%u expected (the "
                        "library's largest limit)", RLS_RPU_MAX);
        l->rpu = (uint32_t)x;
        return *has_rpu = 1, 0;
    }
    if (!strcmp(k, "unlimited"))
        return get_bool(w, v, k, &l->unlimited);
    if (!strcmp(k, "name"))
        return free(l->name), l->name = NULL, get_str(w, v, k, &l->name);
    if (!strcmp(k, "replaces"))
        return get_replaces(w, v, l);
    if (!strcmp(k, "algorithm"))
        return get_choice(w, v, k, algorithms, &l->algorithm);
    if (!strcmp(k, "failure_mode"))
        return get_choice(w, v, k, failures, &l->failure);
    return fail(w, v, "rate_limit: unknown key \"%.40s\"", k);
}

static int get_rate_limit(walk *w, yaml_node_t *n, ecfg_limit **out)
{
    int has_unit = 0, has_rpu = 0;
    ecfg_limit *l;

    if (n->type != YAML_MAPPING_NODE)
        return fail(w, n, "rate_limit: a mapping expected");
    if (!(l = *out = calloc(1, sizeof *l)) || !(l->name = strdup("")))
        return fail(w, n, "out of memory");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
         p < n->data.mapping.pairs.top; p++) {
        const char *k = scalar(node(w, p->key));
        if (!k)
            return fail(w, n, "rate_limit: a key must be a string");
        if (rate_limit_key(w, l, k, node(w, p->value), &has_unit, &has_rpu))
            return -1;
    }
    if (l->unlimited && (has_unit || has_rpu))
        return fail(w, n, "rate_limit: should not specify rate limit unit "
                    "or requests_per_unit when unlimited");
    if (!l->unlimited && !has_unit)
        return fail(w, n, "rate_limit: unit required");
    return 0;
}

static int get_descriptors(walk *w, yaml_node_t *n, ecfg_node *parent,
                           int depth);

static int same_entry(const ecfg_node *a, const ecfg_node *b)
{
    return !strcmp(a->key, b->key) &&
           (a->value && b->value ? !strcmp(a->value, b->value)
                                 : a->value == b->value);
}

static int descriptor_key(walk *w, ecfg_node *d, const char *k,
                          yaml_node_t *v, int depth, int *shadow,
                          int *detailed)
{
    if (!strcmp(k, "key"))
        return free(d->key), d->key = NULL, get_str(w, v, k, &d->key);
    if (!strcmp(k, "value"))
        return free(d->value), d->value = NULL, get_str(w, v, k, &d->value);
    if (!strcmp(k, "rate_limit"))
        return d->limit ? fail(w, v, "rate_limit: given twice")
                        : get_rate_limit(w, v, &d->limit);
    if (!strcmp(k, "descriptors"))
        return get_descriptors(w, v, d, depth + 1);
    if (!strcmp(k, "shadow_mode"))
        return get_bool(w, v, k, shadow);
    if (!strcmp(k, "detailed_metric"))
        return get_bool(w, v, k, detailed);
    if (!strcmp(k, "value_to_metric")) {
        int ignored;
        return get_bool(w, v, k, &ignored);
    }
    return fail(w, v, "descriptor: %s\"%.40s\"",
                strcmp(k, "quota_mode") && strcmp(k, "share_threshold")
                    ? "unknown key " : "not supported: ", k);
}

static int get_descriptor(walk *w, yaml_node_t *n, ecfg_node *d, int depth)
{
    int shadow = 0, detailed = 0;

    if (n->type != YAML_MAPPING_NODE)
        return fail(w, n, "descriptors: each a mapping");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
         p < n->data.mapping.pairs.top; p++) {
        const char *k = scalar(node(w, p->key));
        if (!k)
            return fail(w, n, "descriptor: a key must be a string");
        if (w->visited > WALK_NODES_MAX)
            return fail(w, n, "more than %d nodes (aliases?)",
                        WALK_NODES_MAX);
        if (descriptor_key(w, d, k, node(w, p->value), depth, &shadow,
                           &detailed))
            return -1;
    }
    if (!d->key || !*d->key)
        return fail(w, n, "descriptor: key required (non-empty)");
    if (d->value && !*d->value) /* value: "" is the bare key upstream too */
        free(d->value), d->value = NULL;
    d->wildcard = d->value && strchr(d->value, '*');
    if (d->limit) /* without a rate_limit they have nothing to act on */
        d->limit->shadow = shadow, d->limit->detailed = detailed;
    return 0;
}

static int get_descriptors(walk *w, yaml_node_t *n, ecfg_node *parent,
                           int depth)
{
    size_t cnt;

    if (depth > DEPTH_MAX)
        return fail(w, n, "descriptors nested deeper than %d", DEPTH_MAX);
    if (n->type != YAML_SEQUENCE_NODE)
        return fail(w, n, "descriptors: a list expected");
    if (parent->kids)
        return fail(w, n, "descriptors: given twice");
    cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (!(parent->kids = calloc(cnt ? cnt : 1, sizeof *parent->kids)))
        return fail(w, n, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *it = node(w, n->data.sequence.items.start[i]);
        ecfg_node *d = &parent->kids[parent->nkids++];
        if (!it || get_descriptor(w, it, d, depth))
            return it ? -1 : fail(w, n, "descriptors: bad item");
        for (size_t j = 0; j < i; j++)
            if (same_entry(&parent->kids[j], d))
                return fail(w, it, "duplicate descriptor %s%s%s", d->key,
                            d->value ? "_" : "", d->value ? d->value : "");
    }
    return 0;
}

static int get_domain(walk *w, yaml_node_t *root, ecfg_domain *dom)
{
    if (!root || root->type != YAML_MAPPING_NODE)
        return fail(w, root, "a mapping with domain and descriptors "
                    "expected");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
         p < root->data.mapping.pairs.top; p++) {
        const char *k = scalar(node(w, p->key));
        yaml_node_t *v = node(w, p->value);
        int rc;
        if (k && !strcmp(k, "domain"))
            rc = (free(dom->name), dom->name = NULL,
                  get_str(w, v, "domain", &dom->name));
        else if (k && !strcmp(k, "descriptors"))
            rc = get_descriptors(w, v, &dom->root, 0);
        else
            rc = fail(w, v, "unknown key \"%.40s\"", k ? k : "?");
        if (rc)
            return -1;
    }
    if (!dom->name || !*dom->name)
        return fail(w, root, "domain required (non-empty)");
    return 0;
}

/* The whole file read first (bounded), then parsed from memory. */
static int load_file(const char *file, ecfg_domain *dom, char *err,
                     size_t errlen)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    walk w = {.doc = &doc, .file = file, .err = err, .errlen = errlen};
    struct stat st;
    FILE *f = fopen(file, "rb");
    char *text = NULL;
    size_t len;
    int rc = -1;

    if (!f || fstat(fileno(f), &st) || !S_ISREG(st.st_mode) ||
        st.st_size > FILE_MAX || !(text = malloc((size_t)st.st_size + 1))) {
        snprintf(err, errlen, "%s: cannot read%s", file,
                 f && st.st_size > FILE_MAX ? " (over 4 MiB)" : "");
        goto out;
    }
    len = fread(text, 1, (size_t)st.st_size, f);
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, errlen, "%s:%lu: %s", file,
                 (unsigned long)parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "YAML error");
    } else {
        rc = get_domain(&w, yaml_document_get_root_node(&doc), dom);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
out:
    free(text);
    if (f)
        fclose(f);
    return rc;
}

static int yaml_name(const char *n)
{
    size_t l = strlen(n);
    return n[0] != '.' &&
           ((l > 5 && !strcmp(n + l - 5, ".yaml")) ||
            (l > 4 && !strcmp(n + l - 4, ".yml")));
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The configuration files of `path`, sorted; a file names itself. */
static char **list_files(const char *path, size_t *n)
{
    struct stat st;
    struct dirent *e;
    char **v = calloc(FILES_MAX, sizeof *v);
    DIR *d;

    *n = 0;
    if (!v || stat(path, &st))
        return v;
    if (!S_ISDIR(st.st_mode)) {
        if ((v[0] = strdup(path)))
            *n = 1;
        return v;
    }
    if (!(d = opendir(path)))
        return v;
    while ((e = readdir(d)) && *n < FILES_MAX) {
        if (!yaml_name(e->d_name))
            continue;
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        if (!(v[*n] = malloc(len)))
            break;
        snprintf(v[(*n)++], len, "%s/%s", path, e->d_name);
    }
    closedir(d);
    qsort(v, *n, sizeof *v, by_name);
    return v;
}

static void free_files(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int by_domain(const void *a, const void *b)
{
    return strcmp(((const ecfg_domain *)a)->name,
                  ((const ecfg_domain *)b)->name);
}

int ecfg_load(const char *path, ecfg **out, char *err, size_t errlen)
{
    size_t n;
    char **files = list_files(path, &n);
    ecfg *c = calloc(1, sizeof *c);
    int rc = -1;

    *out = NULL;
    if (!files || !c || !(c->domains = calloc(n ? n : 1, sizeof *c->domains)))
        snprintf(err, errlen, "out of memory");
    else if (!n)
        snprintf(err, errlen, "%s: no *.yaml or *.yml file", path);
    else
        rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        c->ndomains++;
        rc = load_file(files[i], &c->domains[i], err, errlen);
        for (size_t j = 0; !rc && j < i; j++)
            if (!strcmp(c->domains[j].name, c->domains[i].name)) {
                snprintf(err, errlen, "%s: domain \"%.60s\" is also %s's",
                         files[i], c->domains[i].name, files[j]);
                rc = -1;
            }
    }
    free_files(files, n);
    if (rc) {
        ecfg_free(c);
        return -1;
    }
    qsort(c->domains, c->ndomains, sizeof *c->domains, by_domain);
    ecfg_name_rules(c);
    *out = c;
    return 0;
}

uint64_t ecfg_signature(const char *path)
{
    size_t n;
    char **files = list_files(path, &n);
    uint64_t h = 1469598103934665603ULL;
    struct stat st;

    for (size_t i = 0; files && i < n; i++) {
        uint64_t v[4] = {0};
        if (!stat(files[i], &st))
            v[0] = (uint64_t)st.st_size, v[1] = (uint64_t)st.st_mtim.tv_sec,
            v[2] = (uint64_t)st.st_mtim.tv_nsec, v[3] = (uint64_t)st.st_ino;
        for (const char *p = files[i]; *p; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ULL;
        for (int k = 0; k < 4; k++)
            h = (h ^ v[k]) * 1099511628211ULL;
    }
    if (files)
        free_files(files, n);
    return h ^ n;
}
