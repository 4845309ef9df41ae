/*
 * redisbench_bytes.c -- group 4 of redisbench: bytes_per_key per algorithm
 * beside the leanest peer layout, and the sliding log's cost per admitted
 * request; and the group compact: the compact layout's bytes and Redis CPU
 * per check beside the plain layout's.  Method: docs/BENCHMARKS.md, "How
 * each bench measures".
 */
#include "redisbench.h"
/* ---- bytes_per_key (group 4) ------------------------------------------------- */

#define LOG_LIMIT 10 /* bytes_per_key_*_10: each client spends this */
#define ENC_SAMPLE 1000

/* What a SCAN of up to ENC_SAMPLE keys found: listpack-encoded keys,
 * hashes and their fields (the compact layout needs small listpacks). */
typedef struct enc_sample {
    double sampled, listpack, hashes, fields;
} enc_sample;

static int sample_key(redisContext *c, const redisReply *k, void *arg,
                      char *err)
{
    enc_sample *es = arg;
    redisReply *e = bcmd(c, err, "OBJECT ENCODING %b", k->str, k->len),
               *h = e ? redisCommand(c, "HLEN %b", k->str, k->len) : NULL;

    if (h == NULL) {
        if (e)
            freeReplyObject(e);
        return e ? snprintf(err, ERRLEN, "HLEN: %s", c->errstr), -1 : -1;
    }
    es->listpack += e->type == REDIS_REPLY_STRING &&
                    strcmp(e->str, "listpack") == 0;
    es->hashes += h->type == REDIS_REPLY_INTEGER; /* a string: an error */
    es->fields += h->type == REDIS_REPLY_INTEGER ? (double)h->integer : 0;
    freeReplyObject(e);
    freeReplyObject(h);
    return ++es->sampled >= ENC_SAMPLE;
}

/* n new clients of algorithm a (limit `limit`), each checked `passes`
 * times; the figure `name`, beside `ref` (named ref_name). */
int bytes_one(const options *o, int a, long long limit, int passes,
                     const char *name, double ref, const char *ref_name,
                     double *value, char *err)
{
    unsigned long long n = o->mem_keys;
    char rule[400], rules[512], ks[128];
    rl_limiter *lim = NULL;
    job j;
    job_result jr = {0};
    double before, after, dbsize = 0, expires = 0, name_bytes = 0;
    char example[128];
    redisReply *r;
    figure f = {0};
    uint64_t t0;
    int compact = o->layout && strcmp(o->layout, "compact") == 0;
    enc_sample es = {0};

    one_rule(rule, sizeof rule, "b", a, limit, SLOW_WINDOW_S, 0);
    snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
    if (flushall_wait(ctl, err) || clients_wait(ctl, 1, err) ||
        used_memory_settled(ctl, &before, err))
        return -1;
    if (make_limiter(o, rules, &lim, err) != RL_OK)
        return -1;
    t0 = now_ns();
    for (int p = 0; p < passes; p++) { /* each pass: every client once */
        j = (job){.lim = lim, .rule_id = "b", .total = n};
        if (run_job(&j, FILL_THREADS, &jr, "redisbench", err)) {
            rl_limiter_free(lim);
            return -1;
        }
    }
    t0 = now_ns() - t0;
    /* Measure with the same clients connected as before: ours only. */
    rl_limiter_free(lim);
    if (clients_wait(ctl, 1, err) || used_memory_settled(ctl, &after, err))
        return -1;
    if ((r = ctl_cmd(err, "DBSIZE")) == NULL)
        return -1;
    dbsize = (double)r->integer;
    freeReplyObject(r);
    if (info_str(ctl, "keyspace", "db0", ks, sizeof ks, err))
        return -1;
    expires = kv_num(ks, "expires");
    if (key_lengths(&name_bytes, example, sizeof example, err))
        return -1;
    if (compact && scan_keys(ctl, 200, sample_key, &es, err))
        return -1;
    if ((!compact && dbsize != (double)n) || jr.fallback != 0 ||
        jr.denied != 0) {
        snprintf(err, ERRLEN, "%s: %.0f keys in Redis, expected %llu "
                 "(%llu fallback results, %llu denied)", name, dbsize, n,
                 jr.fallback, jr.denied);
        return -1;
    }
    f = (figure){.name = name, .value = *value = (after - before) / (double)n,
                  .unit = "B", .nrefs = 1, .ref = {ref},
                  .ref_name = {ref_name}};
    xnum(&f, "keys", (double)n);
    xnum(&f, "checks_per_key", passes);
    xnum(&f, "key_name_bytes_mean", name_bytes);
    xstr(&f, "key_example", example);
    xnum(&f, "peer_key_name_bytes", 35);
    xnum(&f, "used_memory_before", before);
    xnum(&f, "used_memory_after", after);
    xnum(&f, "expires", expires);
    xnum(&f, "target_max", compact ? COMPACT_TARGET : PEER_BYTES_PER_KEY);
    if (compact) {
        xnum(&f, "clients_per_hash", (double)n / dbsize);
        xnum(&f, "listpack_share", es.listpack / es.sampled);
        xnum(&f, "hash_share", es.hashes / es.sampled);
        xnum(&f, "sample_fields_per_hash", es.fields / es.hashes);
    }
    xnum(&f, "fill_checks_per_s",
         (double)n * passes / ((double)t0 / 1e9));
    emit(o, &f);
    return 0;
}

int group_bytes(const options *o, char *err)
{
    char name[48];
    double v, sw10;

    for (int a = 0; a < ALGOS_ALL; a++) {
        snprintf(name, sizeof name, "bytes_per_key_%s", algo_names[a]);
        if (bytes_one(o, a, SLOW_LIMIT, 1, name, PEER_BYTES_PER_KEY,
                      "peer_gcra_string_35B_names", &v, err))
            return -1;
    }
    if (bytes_one(o, 0, LOG_LIMIT, LOG_LIMIT, "bytes_per_key_sliding_window_10",
                  PEER_BYTES_PER_KEY, "peer_gcra_string_35B_names", &sw10,
                  err))
        return -1;
    return bytes_one(o, 4, LOG_LIMIT, LOG_LIMIT,
                     "bytes_per_key_sliding_log_10", sw10,
                     "sliding_window_10", &v, err);
}

/* Redis CPU per check (the script's server time) of o->usec_checks checks
 * of the o->mem_keys clients bytes_one() left, drawn at random. */
static int layout_usec(const options *o, int a, double *us, char *err)
{
    rl_limiter *lim = NULL;
    job_result jr = {0};
    cmdstat cs = {0};
    job j;
    int rc;

    if (limiter_one_rule(o, "b", a, SLOW_LIMIT, SLOW_WINDOW_S, &lim, err))
        return -1;
    j = (job){.lim = lim, .rule_id = "b", .total = o->usec_checks,
              .nkeys = o->mem_keys, .random = 1};
    rc = ctl_ok(err, "CONFIG RESETSTAT") ||
         run_job(&j, USEC_THREADS, &jr, "redisbench", err) ||
         cmdstat_script(&cs, err) ? -1 : 0;
    rl_limiter_free(lim);
    if (rc == 0 && (cs.calls < 1 || jr.fallback > 0)) {
        snprintf(err, ERRLEN, "compact %s: %.0f script calls, %llu fallback "
                 "results", algo_names[a], cs.calls, jr.fallback);
        rc = -1;
    }
    *us = cs.calls * cs.usec_per_call / (double)o->usec_checks;
    return rc;
}

/* Group compact: per algorithm, bytes_per_key_compact_<algorithm> beside
 * bytes_per_key_<algorithm> (plain) of the same clients, and
 * usec_per_check_compact_<algorithm> beside the plain layout's. */
int group_compact(const options *o, char *err)
{
    options c = *o;
    char name[64];
    double bytes[2], us[2];

    c.layout = "compact";
    for (int a = 0; a < 4; a++) {
        for (int l = 0; l < 2; l++) {
            snprintf(name, sizeof name, "bytes_per_key_%s%s",
                     l ? "compact_" : "", algo_names[a]);
            if (bytes_one(l ? &c : o, a, SLOW_LIMIT, 1, name,
                          l ? bytes[0] : PEER_BYTES_PER_KEY,
                          l ? "plain" : "peer_gcra_string_35B_names",
                          &bytes[l], err) ||
                layout_usec(l ? &c : o, a, &us[l], err))
                return -1;
        }
        snprintf(name, sizeof name, "usec_per_check_compact_%s",
                 algo_names[a]);
        emit(o, &(figure){.name = name, .value = us[1], .unit = "us",
                          .nrefs = 1, .ref = {us[0]}, .ref_name = {"plain"}});
    }
    return 0;
}
