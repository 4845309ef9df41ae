/*
 * clusterbench_bytes.c -- groups 1 and 2 of clusterbench, on one
 * redis-server: bytes_per_key, Redis memory per (client, rule) in the plain
 * and the compact layout (with the encodings Redis chose for a sample of the
 * keys, as the compact layout depends on small hashes staying listpacks),
 * and usec_per_call, the server time of one check in each layout: what the
 * compact layout saves and what it costs.
 */
#include "clusterbench.h"
/* ---- groups 1 and 2: bytes_per_key and usec_per_call ------------------ */

typedef struct enc_sample {
    double sampled, listpack, hashes, fields;
    char example_key[128], example_enc[32];
} enc_sample;

/* One key's TYPE, OBJECT ENCODING and (a hash) HLEN into the sample:
 * 0, 1 once ENC_SAMPLE keys are in, or -1. */
static int sample_key(redisContext *c, const redisReply *k, void *arg,
                      char *err)
{
    enc_sample *es = arg;
    redisReply *t, *e;
    int hash;

    if (k->type != REDIS_REPLY_STRING)
        return 0;
    if ((t = bcmd(c, err, "TYPE %b", k->str, k->len)) == NULL)
        return -1;
    hash = t->type == REDIS_REPLY_STATUS && strcmp(t->str, "hash") == 0;
    freeReplyObject(t);
    if ((e = bcmd(c, err, "OBJECT ENCODING %b", k->str, k->len)) == NULL)
        return -1;
    if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) {
        if (strcmp(e->str, "listpack") == 0)
            es->listpack++;
        if (es->sampled == 0) {
            snprintf(es->example_key, sizeof es->example_key, "%s", k->str);
            snprintf(es->example_enc, sizeof es->example_enc, "%s", e->str);
        }
    }
    freeReplyObject(e);
    if (hash) {
        redisReply *h = bcmd(c, err, "HLEN %b", k->str, k->len);
        if (h == NULL)
            return -1;
        es->hashes++;
        es->fields += (double)h->integer;
        freeReplyObject(h);
    }
    return ++es->sampled >= ENC_SAMPLE;
}

/* TYPE, OBJECT ENCODING and (hashes) HLEN of up to ENC_SAMPLE keys from
 * a SCAN. */
static int sample_encodings(redisContext *c, enc_sample *es, char *err)
{
    memset(es, 0, sizeof *es);
    return scan_keys(c, 200, sample_key, es, err);
}

/* What one (layout, algorithm) run measured: used_memory around the fill
 * of o->mem_keys clients, the keys Redis holds, the three jobs (fill,
 * warm-up, measured checks), the commands the measured checks ran and a
 * sample of the encodings. */
typedef struct bytes_run {
    double before, after, dbsize, expires;
    job_result fill, warm, meas;
    cmdstats cs;
    enc_sample es;
} bytes_run;

/* A limiter of layout l with `rules`, running `total` checks on THREADS
 * (keys < nkeys, or each once when nkeys is 0), freed after. */
static int bytes_job(const char *uri, int l, const char *rules,
                     unsigned long long total, unsigned long long nkeys,
                     job_result *jr, char *err)
{
    rl_limiter *lim = NULL;
    job j;
    int rc;

    if (make_limiter(uri, layouts[l], rules, &lim, err))
        return -1;
    j = (job){.lim = lim, .rule_id = "b", .total = total, .nkeys = nkeys,
              .stop = &g_stop};
    rc = run_job(&j, THREADS, jr, "clusterbench", err);
    rl_limiter_free(lim);
    return rc;
}

/* bytes_per_key: used_memory grown while n clients (user:0 .. user:n-1)
 * are checked once each, measured with the same clients connected as
 * before (ours); with active expiry off until the run ends. */
static int bytes_fill(const options *o, redisContext *c, const char *uri,
                      int l, const char *rules, bytes_run *r, char *err)
{
    char ks[128];
    redisReply *rep;

    if (flushall_wait(c, err) ||
        bcmd_ok(c, err, "DEBUG SET-ACTIVE-EXPIRE 0") ||
        clients_wait(c, 1, err) || used_memory_settled(c, &r->before, err))
        return -1;
    if (bytes_job(uri, l, rules, o->mem_keys, 0, &r->fill, err))
        return -1;
    if (clients_wait(c, 1, err) || used_memory_settled(c, &r->after, err))
        return -1;
    if ((rep = bcmd(c, err, "DBSIZE")) == NULL)
        return -1;
    r->dbsize = (double)rep->integer;
    freeReplyObject(rep);
    if (info_str(c, "keyspace", "db0", ks, sizeof ks, err))
        return -1;
    r->expires = kv_num(ks, "expires");
    return 0;
}

/* usec_per_call: existing state of the first nu clients, each checked
 * once, then round-robin: every nu / rate seconds.  The encodings are
 * sampled right after, when the states the run just checked are alive:
 * SCAN (and every other way to list keys) leaves out expired keys, and
 * deletes those it meets. */
static int bytes_usec(const options *o, redisContext *c, const char *uri,
                      int l, const char *rules, bytes_run *r, char *err)
{
    rl_limiter *lim = NULL;
    job j;

    if (make_limiter(uri, layouts[l], rules, &lim, err))
        return -1;
    j = (job){.lim = lim, .rule_id = "b", .total = o->usec_clients,
              .stop = &g_stop};
    if (run_job(&j, THREADS, &r->warm, "clusterbench", err) ||
        bcmd_ok(c, err, "CONFIG RESETSTAT")) {
        rl_limiter_free(lim);
        return -1;
    }
    j.total = o->usec_checks;
    j.nkeys = o->usec_clients;
    if (run_job(&j, THREADS, &r->meas, "clusterbench", err)) {
        rl_limiter_free(lim);
        return -1;
    }
    rl_limiter_free(lim);
    if (cmdstats_add(c, &r->cs, err) || sample_encodings(c, &r->es, err))
        return -1;
    return 0;
}

/* bytes_per_key_<layout>_<algorithm>: beside the peer's, and (compact)
 * the plain layout's, kept in plain_bytes. */
static void bytes_emit(const options *o, int l, int a, const bytes_run *r,
                       double *plain_bytes)
{
    const enc_sample *es = &r->es;
    double n = (double)o->mem_keys;
    char name[64];
    figure f = {0};

    snprintf(name, sizeof name, "bytes_per_key_%s_%s", layouts[l],
             algo_names[a]);
    f = (figure){.name = name, .value = (r->after - r->before) / n,
                  .unit = "B", .nrefs = 1, .ref = {PEER_BYTES_PER_KEY},
                  .ref_name = {"peer_gcra_string"}};
    if (l == 1) {
        int ok = es->sampled > 0 && es->listpack == es->sampled &&
                 es->hashes == es->sampled;
        f.nrefs = 2;
        f.ref[1] = plain_bytes[a];
        f.ref_name[1] = "plain";
        xnum(&f, "target", COMPACT_TARGET);
        xnum(&f, "layout_ok", ok);
        if (!ok)
            fprintf(stderr, "clusterbench: warning: compact %s: the keys are "
                    "not listpack hashes (%.0f of %.0f sampled are hashes): "
                    "the figure is not the compact layout's\n",
                    algo_names[a], es->hashes, es->sampled);
        xnum(&f, "hashes", r->dbsize);
        xnum(&f, "clients_per_hash", r->dbsize > 0 ? n / r->dbsize : NAN);
    } else {
        plain_bytes[a] = f.value;
        xnum(&f, "dbsize", r->dbsize);
    }
    xstr(&f, "layout", layouts[l]);
    xstr(&f, "algorithm", algo_names[a]);
    xnum(&f, "clients", n);
    xnum(&f, "expires", r->expires);
    xnum(&f, "sampled", es->sampled);
    xnum(&f, "listpack_share",
         es->sampled > 0 ? es->listpack / es->sampled : NAN);
    xnum(&f, "hash_share", es->sampled > 0 ? es->hashes / es->sampled : NAN);
    xnum(&f, "sample_fields_per_hash",
         es->hashes > 0 ? es->fields / es->hashes : NAN);
    xstr(&f, "key_example", es->example_key);
    xstr(&f, "encoding_example", es->example_enc);
    xnum(&f, "used_memory_before", r->before);
    xnum(&f, "used_memory_after", r->after);
    xnum(&f, "fill_checks_per_s", n / r->fill.seconds);
    xnum(&f, "fallback", (double)r->fill.fallback);
    xnum(&f, "degraded", (double)r->fill.degraded);
    xnum(&f, "denied", (double)r->fill.denied);
    emit(o, &f);
}

/* usec_per_call_<layout>_<algorithm>: (compact) beside the plain
 * layout's, kept in plain_usec; with every other command the checks ran,
 * per check.  -1 with err when no script call was counted. */
static int usec_emit(const options *o, int l, int a, const bytes_run *r,
                     double *plain_usec, char *err)
{
    const cmdstats *cs = &r->cs;
    double checks = (double)o->usec_checks, calls = cs_script_calls(cs);
    int ev = cmdstats_find(cs, "evalsha"), fc = cmdstats_find(cs, "fcall");
    char name[64], per_check[MAX_CMDS][48];
    figure f = {0};

    if (calls < 1) {
        snprintf(err, ERRLEN, "usec_per_call %s %s: no script call",
                 layouts[l], algo_names[a]);
        return -1;
    }
    snprintf(name, sizeof name, "usec_per_call_%s_%s", layouts[l],
             algo_names[a]);
    f = (figure){.name = name, .value = cs_script_usec(cs) / checks,
                  .unit = "us"};
    if (l == 1) {
        f.nrefs = 1;
        f.ref[0] = plain_usec[a];
        f.ref_name[0] = "plain";
    } else {
        plain_usec[a] = f.value;
    }
    xstr(&f, "layout", layouts[l]);
    xstr(&f, "algorithm", algo_names[a]);
    xnum(&f, "checks", checks);
    xnum(&f, "evalsha_calls", calls);
    xnum(&f, "evalsha_usec_per_call", cs_script_usec(cs) / calls);
    xnum(&f, "evalsha_failed", (ev >= 0 ? cs->failed[ev] : 0) +
                                   (fc >= 0 ? cs->failed[fc] : 0));
    xnum(&f, "checks_per_call", checks / calls);
    xnum(&f, "clients", (double)o->usec_clients);
    xnum(&f, "threads", THREADS);
    xnum(&f, "existing_share", cs_calls(cs, "pexpiretime") / checks);
    for (int i = 0; i < cs->n; i++) {
        if (strcmp(cs->name[i], "evalsha") == 0 ||
            strcmp(cs->name[i], "fcall") == 0 ||
            strncmp(cs->name[i], "config|", 7) == 0 ||
            strcmp(cs->name[i], "info") == 0)
            continue;
        snprintf(per_check[i], sizeof per_check[i], "%s_per_check",
                 cs->name[i]);
        xnum(&f, per_check[i], cs->calls[i] / checks);
    }
    xnum(&f, "checks_per_s", checks / r->meas.seconds);
    xnum(&f, "fallback", (double)(r->warm.fallback + r->meas.fallback));
    xnum(&f, "degraded", (double)(r->warm.degraded + r->meas.degraded));
    xnum(&f, "denied", (double)r->meas.denied);
    emit(o, &f);
    return 0;
}

int group_bytes(const options *o, redisContext *c, const char *uri,
                char *err)
{
    double plain_bytes[4] = {NAN, NAN, NAN, NAN};
    double plain_usec[4] = {NAN, NAN, NAN, NAN};

    for (int l = 0; l < 2; l++) {
        for (int a = 0; a < 4; a++) {
            int bucket = a == 1 || a == 3;
            char rules[512];
            bytes_run r = {.cs = {0}};

            one_rule(rules, sizeof rules, "b", a, MEM_LIMIT, MEM_WINDOW_S,
                     bucket ? MEM_BURST : 0);
            if (bytes_fill(o, c, uri, l, rules, &r, err) ||
                bytes_usec(o, c, uri, l, rules, &r, err))
                return -1;
            if (l == 0 && r.dbsize != (double)o->mem_keys)
                fprintf(stderr, "clusterbench: warning: plain %s: %.0f keys "
                        "in Redis for %llu clients\n", algo_names[a],
                        r.dbsize, o->mem_keys);
            bytes_emit(o, l, a, &r, plain_bytes);
            if (usec_emit(o, l, a, &r, plain_usec, err))
                return -1;
            if (flushall_wait(c, err) ||
                bcmd_ok(c, err, "DEBUG SET-ACTIVE-EXPIRE 1") ||
                interrupted(err))
                return -1;
        }
    }
    return 0;
}
