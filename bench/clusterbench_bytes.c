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

/* TYPE, OBJECT ENCODING and (hashes) HLEN of up to ENC_SAMPLE keys from
 * a SCAN. */
static int sample_encodings(redisContext *c, enc_sample *es, char *err)
{
    char cursor[32] = "0";

    memset(es, 0, sizeof *es);
    do {
        redisReply *r = bcmd(c, err, "SCAN %s COUNT 200", cursor);
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            return snprintf(err, ERRLEN, "SCAN: unexpected reply"), -1;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements &&
                           es->sampled < ENC_SAMPLE; i++) {
            const redisReply *k = r->element[1]->element[i];
            redisReply *t, *e;
            int hash;

            if (k->type != REDIS_REPLY_STRING)
                continue;
            if ((t = bcmd(c, err, "TYPE %b", k->str, k->len)) == NULL) {
                freeReplyObject(r);
                return -1;
            }
            hash = t->type == REDIS_REPLY_STATUS && strcmp(t->str, "hash") == 0;
            freeReplyObject(t);
            if ((e = bcmd(c, err, "OBJECT ENCODING %b", k->str, k->len)) ==
                NULL) {
                freeReplyObject(r);
                return -1;
            }
            if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) {
                if (strcmp(e->str, "listpack") == 0)
                    es->listpack++;
                if (es->sampled == 0) {
                    snprintf(es->example_key, sizeof es->example_key, "%s",
                             k->str);
                    snprintf(es->example_enc, sizeof es->example_enc, "%s",
                             e->str);
                }
            }
            freeReplyObject(e);
            if (hash) {
                redisReply *h = bcmd(c, err, "HLEN %b", k->str, k->len);
                if (h == NULL) {
                    freeReplyObject(r);
                    return -1;
                }
                es->hashes++;
                es->fields += (double)h->integer;
                freeReplyObject(h);
            }
            es->sampled++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && es->sampled < ENC_SAMPLE);
    return 0;
}

int group_bytes(const options *o, redisContext *c, const char *uri,
                       char *err)
{
    double plain_bytes[4] = {NAN, NAN, NAN, NAN};
    double plain_usec[4] = {NAN, NAN, NAN, NAN};
    unsigned long long n = o->mem_keys, nu = o->usec_clients;

    for (int l = 0; l < 2; l++) {
        for (int a = 0; a < 4; a++) {
            int bucket = a == 1 || a == 3;
            char rules[512], name[64], ks[128];
            rl_limiter *lim = NULL;
            job j;
            job_result fill = {0}, warm = {0}, meas = {0};
            double before, after, dbsize, expires;
            enc_sample es;
            cmdstats cs = {0};
            char per_check[MAX_CMDS][48];
            redisReply *r;

            one_rule(rules, sizeof rules, "b", a, MEM_LIMIT, MEM_WINDOW_S,
                     bucket ? MEM_BURST : 0);
            if (flush_wait(c, err) ||
                bcmd_ok(c, err, "DEBUG SET-ACTIVE-EXPIRE 0") ||
                clients_wait(c, 1, err) ||
                used_memory_settled(c, &before, err))
                return -1;
            if (make_limiter(uri, layouts[l], rules, &lim, err))
                return -1;
            memset(&j, 0, sizeof j);
            j.lim = lim;
            j.rule_id = "b";
            j.total = n; /* user:0 .. user:n-1, each once */
            if (run_job(&j, THREADS, &fill, err)) {
                rl_limiter_free(lim);
                return -1;
            }
            /* Measure with the same clients connected as before: ours. */
            rl_limiter_free(lim);
            lim = NULL;
            if (clients_wait(c, 1, err) ||
                used_memory_settled(c, &after, err))
                return -1;
            if ((r = bcmd(c, err, "DBSIZE")) == NULL)
                return -1;
            dbsize = (double)r->integer;
            freeReplyObject(r);
            if (info_str(c, "keyspace", "db0", ks, sizeof ks, err))
                return -1;
            expires = kv_num(ks, "expires");
            /* usec_per_call: existing state of the first nu clients, each
             * checked once, then round-robin: every nu / rate seconds. */
            if (make_limiter(uri, layouts[l], rules, &lim, err))
                return -1;
            memset(&j, 0, sizeof j);
            j.lim = lim;
            j.rule_id = "b";
            j.total = nu;
            if (run_job(&j, THREADS, &warm, err) ||
                bcmd_ok(c, err, "CONFIG RESETSTAT")) {
                rl_limiter_free(lim);
                return -1;
            }
            j.total = o->usec_checks;
            j.nkeys = nu;
            if (run_job(&j, THREADS, &meas, err)) {
                rl_limiter_free(lim);
                return -1;
            }
            rl_limiter_free(lim);
            if (cmdstats_add(c, &cs, err))
                return -1;
            /* The encodings now, when the states the usec run just
             * checked are alive: SCAN (and every other way to list keys)
             * leaves out expired keys, and deletes those it meets. */
            if (sample_encodings(c, &es, err))
                return -1;
            if (l == 0 && dbsize != (double)n)
                fprintf(stderr, "clusterbench: warning: plain %s: %.0f keys "
                        "in Redis for %llu clients\n", algo_names[a], dbsize,
                        n);
            {
                figure f = {0};
                snprintf(name, sizeof name, "bytes_per_key_%s_%s", layouts[l],
                         algo_names[a]);
                f.name = name;
                f.value = (after - before) / (double)n;
                f.unit = "B";
                f.nrefs = 1;
                f.ref[0] = PEER_BYTES_PER_KEY;
                f.ref_name[0] = "peer_gcra_string";
                if (l == 1) {
                    f.nrefs = 2;
                    f.ref[1] = plain_bytes[a];
                    f.ref_name[1] = "plain";
                    int ok = es.sampled > 0 && es.listpack == es.sampled &&
                             es.hashes == es.sampled;
                    xnum(&f, "target", COMPACT_TARGET);
                    xnum(&f, "layout_ok", ok);
                    if (!ok)
                        fprintf(stderr, "clusterbench: warning: compact %s: "
                                "the keys are not listpack hashes "
                                "(%.0f of %.0f sampled "
                                "are hashes): the figure is not the compact "
                                "layout's\n", algo_names[a], es.hashes,
                                es.sampled);
                    xnum(&f, "hashes", dbsize);
                    xnum(&f, "clients_per_hash",
                         dbsize > 0 ? (double)n / dbsize : NAN);
                } else {
                    plain_bytes[a] = f.value;
                    xnum(&f, "dbsize", dbsize);
                }
                xstr(&f, "layout", layouts[l]);
                xstr(&f, "algorithm", algo_names[a]);
                xnum(&f, "clients", (double)n);
                xnum(&f, "expires", expires);
                xnum(&f, "sampled", es.sampled);
                xnum(&f, "listpack_share",
                     es.sampled > 0 ? es.listpack / es.sampled : NAN);
                xnum(&f, "hash_share",
                     es.sampled > 0 ? es.hashes / es.sampled : NAN);
                xnum(&f, "sample_fields_per_hash",
                     es.hashes > 0 ? es.fields / es.hashes : NAN);
                xstr(&f, "key_example", es.example_key);
                xstr(&f, "encoding_example", es.example_enc);
                xnum(&f, "used_memory_before", before);
                xnum(&f, "used_memory_after", after);
                xnum(&f, "fill_checks_per_s", (double)n / fill.seconds);
                xnum(&f, "fallback", (double)fill.fallback);
                xnum(&f, "degraded", (double)fill.degraded);
                xnum(&f, "denied", (double)fill.denied);
                emit(o, &f);
            }

            {
                figure f = {0};
                double checks = (double)o->usec_checks;
                double calls = cs_calls(&cs, "evalsha");
                int ev = cmdstats_find(&cs, "evalsha");
                if (calls < 1) {
                    snprintf(err, ERRLEN, "usec_per_call %s %s: no EVALSHA "
                             "call", layouts[l], algo_names[a]);
                    return -1;
                }
                snprintf(name, sizeof name, "usec_per_call_%s_%s", layouts[l],
                         algo_names[a]);
                f.name = name;
                f.value = cs_usec(&cs, "evalsha") / checks;
                f.unit = "us";
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
                xnum(&f, "evalsha_usec_per_call",
                     cs_usec(&cs, "evalsha") / calls);
                xnum(&f, "evalsha_failed", ev >= 0 ? cs.failed[ev] : 0);
                xnum(&f, "checks_per_call", checks / calls);
                xnum(&f, "clients", (double)nu);
                xnum(&f, "threads", THREADS);
                xnum(&f, "existing_share", cs_calls(&cs, "pexpiretime") / checks);
                for (int i = 0; i < cs.n; i++) {
                    if (strcmp(cs.name[i], "evalsha") == 0 ||
                        strncmp(cs.name[i], "config|", 7) == 0 ||
                        strcmp(cs.name[i], "info") == 0)
                        continue;
                    snprintf(per_check[i], sizeof per_check[i],
                             "%s_per_check", cs.name[i]);
                    xnum(&f, per_check[i], cs.calls[i] / checks);
                }
                xnum(&f, "checks_per_s", checks / meas.seconds);
                xnum(&f, "fallback", (double)(warm.fallback + meas.fallback));
                xnum(&f, "degraded", (double)(warm.degraded + meas.degraded));
                xnum(&f, "denied", (double)meas.denied);
                emit(o, &f);
            }
            if (flush_wait(c, err) ||
                bcmd_ok(c, err, "DEBUG SET-ACTIVE-EXPIRE 1") ||
                interrupted(err))
                return -1;
        }
    }
    return 0;
}
