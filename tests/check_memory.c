/*
 * check_memory.c -- the in-process store through its vtable: state kept per
 * (rule, key), all-or-nothing charges, expired entries reclaimed without a
 * cleanup job, the memory cap and its eviction policy, bytes per key,
 * keys crafted to collide under the unkeyed hash the store used before
 * issue 11 or under a fixed SipHash key, and SipHash-1-3 itself.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"
#include "siphash.h"
#include "rule.h"
#include "store_memory.h"
#include "testutil.h"

static rl_rule make_rule(const char *json)
{
    json_error_t jerr;
    json_t *obj = json_loads(json, 0, &jerr);
    rl_rule r;
    char err[200];

    ck_assert_ptr_nonnull(obj);
    ck_assert_msg(rule_from_json(obj, &r, err, sizeof err) == 0, "%s", err);
    json_decref(obj);
    return r;
}

static rl_store *open_memory(int64_t max_bytes)
{
    store_options opt = {.memory_max_bytes = max_bytes, .timeout_ms = 5};
    rl_store *s;
    char err[200];

    ck_assert_int_eq(store_memory_new(&opt, &s, err, sizeof err), RL_OK);
    clock_set(T0);
    store_memory_set_clock(s, test_clock, NULL);
    return s;
}

static int charge(rl_store *s, const rl_rule *r, const char *key,
                  int64_t cost, algo_decision *d)
{
    store_op op = {.rule = r, .key = key, .key_len = strlen(key),
                   .cost = cost};
    int64_t now;

    ck_assert_int_eq(s->vt->check(s, &op, 1, d, &now), RL_OK);
    ck_assert_int_eq(now, atomic_load(&test_now));
    return d->allowed;
}

static const char *fw3 = "{\"rule_id\":\"fw3\",\"dimension\":\"user\","
                         "\"limit\":3,\"window_seconds\":60,"
                         "\"algorithm\":\"fixed_window\"}";

START_TEST(state_is_per_rule_and_key)
{
    rl_store *s = open_memory(1 << 24);
    rl_rule a = make_rule(fw3);
    rl_rule b = make_rule("{\"rule_id\":\"other\",\"dimension\":\"user\","
                          "\"limit\":3,\"window_seconds\":60,"
                          "\"algorithm\":\"fixed_window\"}");
    algo_decision d;

    for (int i = 0; i < 3; i++)
        ck_assert(charge(s, &a, "user:1", 1, &d));
    ck_assert(!charge(s, &a, "user:1", 1, &d));
    ck_assert(charge(s, &a, "user:2", 1, &d));  /* another key        */
    ck_assert(charge(s, &b, "user:1", 1, &d));  /* another rule       */
    ck_assert_int_eq(d.remaining, 2);
    clock_add(60000);                           /* next window        */
    ck_assert(charge(s, &a, "user:1", 3, &d));
    store_free(s);
    rule_clear(&a);
    rule_clear(&b);
}
END_TEST

START_TEST(denied_charges_change_nothing)
{
    rl_store *s = open_memory(1 << 24);
    rl_rule big = make_rule("{\"rule_id\":\"big\",\"dimension\":\"user\","
                            "\"limit\":10,\"window_seconds\":60}");
    rl_rule small = make_rule("{\"rule_id\":\"small\",\"dimension\":\"ip\","
                              "\"limit\":2,\"window_seconds\":60}");
    store_op ops[2] = {{.rule = &big, .key = "user:1", .key_len = 6,
                        .cost = 1},
                       {.rule = &small, .key = "ip:9", .key_len = 4,
                        .cost = 1}};
    algo_decision d[2];
    int64_t now;
    int passed = 0;

    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(s->vt->check(s, ops, 2, d, &now), RL_OK);
        passed += d[0].allowed && d[1].allowed;
    }
    ck_assert_int_eq(passed, 2);
    /* The big rule was charged only for the two requests that passed. */
    ck_assert(charge(s, &big, "user:1", 0, &d[0]));
    ck_assert_int_eq(d[0].remaining, 8);
    /* A soft op's denial vetoes nothing. */
    ops[1].soft = 1;
    ck_assert_int_eq(s->vt->check(s, ops, 2, d, &now), RL_OK);
    ck_assert(d[0].allowed && !d[1].allowed);
    ck_assert(charge(s, &big, "user:1", 0, &d[0]));
    ck_assert_int_eq(d[0].remaining, 7);
    store_free(s);
    rule_clear(&big);
    rule_clear(&small);
}
END_TEST

START_TEST(expired_entries_are_reused)
{
    rl_store *s = open_memory(1 << 28);
    rl_rule r = make_rule(fw3);
    store_memory_stats st1, st2;
    algo_decision d;
    char key[32];

    for (int i = 0; i < 50000; i++) {
        snprintf(key, sizeof key, "user:a%d", i);
        charge(s, &r, key, 1, &d);
    }
    store_memory_stats_get(s, &st1);
    ck_assert_int_eq(st1.slots, 50000);
    clock_add(3600 * 1000); /* every entry has expired */
    for (int i = 0; i < 50000; i++) {
        snprintf(key, sizeof key, "user:b%d", i);
        charge(s, &r, key, 1, &d);
    }
    store_memory_stats_get(s, &st2);
    /* The new keys took the dead keys' slots: no more slots in use, and
     * at most one growth step for segments that were nearly full.  (A
     * segment that happens to get few new keys never needs to rebuild:
     * its dead slots linger, a few hundred at most, until it does.) */
    ck_assert_int_le(st2.slots, 50000 + 50000 / 100);
    ck_assert_int_le(st2.capacity, st1.capacity * 5 / 4);
    ck_assert_int_eq(st2.evictions, 0);
    store_free(s);
    rule_clear(&r);
}
END_TEST

START_TEST(memory_cap_evicts_and_holds)
{
    int64_t cap = 1 << 20; /* 1 MiB: room for ~27k entries */
    rl_store *s = open_memory(cap);
    rl_rule r = make_rule(fw3);
    store_memory_stats st;
    algo_decision d;
    char key[32];

    for (int i = 0; i < 200000; i++) {
        snprintf(key, sizeof key, "user:%d", i);
        charge(s, &r, key, 1, &d);
        ck_assert(d.allowed); /* every new key starts fresh */
    }
    store_memory_stats_get(s, &st);
    ck_assert_int_le(st.bytes - (int64_t)sizeof(rl_store), cap + 4096 * 64);
    ck_assert_int_gt(st.evictions, 100000);
    ck_assert_int_le(st.slots, st.capacity * 85 / 100 + 256);
    /* A key charged just now is still tracked. */
    ck_assert(charge(s, &r, "user:199999", 2, &d));
    ck_assert(!charge(s, &r, "user:199999", 1, &d));
    store_free(s);
    rule_clear(&r);
}
END_TEST

START_TEST(bytes_per_key_stay_under_48)
{
    rl_store *s = open_memory(1LL << 32);
    rl_rule r = make_rule(fw3);
    store_memory_stats st;
    algo_decision d;
    char key[32];

    for (int n = 0, checkpoint = 25000; n < 400000; n++) {
        snprintf(key, sizeof key, "ip:%d", n);
        charge(s, &r, key, 1, &d);
        if (n + 1 == checkpoint) {
            store_memory_stats_get(s, &st);
            ck_assert_int_eq(st.slots, n + 1);
            ck_assert_msg(st.bytes <= 48 * st.slots,
                          "%lld bytes for %lld keys", (long long)st.bytes,
                          (long long)st.slots);
            checkpoint = checkpoint * 3 / 2;
        }
    }
    store_free(s);
    rule_clear(&r);
}
END_TEST

START_TEST(rule_change_of_algorithm_starts_fresh)
{
    rl_store *s = open_memory(1 << 24);
    rl_rule a = make_rule(fw3);
    rl_rule b = make_rule("{\"rule_id\":\"fw3\",\"dimension\":\"user\","
                          "\"limit\":3,\"window_seconds\":60,"
                          "\"algorithm\":\"token_bucket\"}");
    rl_rule c = make_rule("{\"rule_id\":\"fw3\",\"dimension\":\"user\","
                          "\"limit\":5,\"window_seconds\":60,"
                          "\"algorithm\":\"fixed_window\"}");
    algo_decision d;

    ck_assert(charge(s, &a, "user:1", 3, &d));
    ck_assert(charge(s, &b, "user:1", 3, &d)); /* new algorithm: fresh */
    ck_assert(charge(s, &c, "user:1", 2, &d)); /* new limit: counts kept */
    ck_assert(!charge(s, &c, "user:1", 1, &d));
    store_free(s);
    rule_clear(&a);
    rule_clear(&b);
    rule_clear(&c);
}
END_TEST

START_TEST(cap_below_floor_is_refused)
{
    store_options opt = {.memory_max_bytes = 1000, .timeout_ms = 5};
    rl_store *s = NULL;
    char err[200];

    ck_assert_int_eq(store_memory_new(&opt, &s, err, sizeof err), RL_EOPTION);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(err, "memory_max_bytes"));
}
END_TEST

/* ---- the keyed hash ------------------------------------------------------- */

#define RROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void ref_round(uint64_t v[4])
{
    v[0] += v[1], v[1] = RROTL(v[1], 13), v[1] ^= v[0], v[0] = RROTL(v[0], 32);
    v[2] += v[3], v[3] = RROTL(v[3], 16), v[3] ^= v[2];
    v[0] += v[3], v[3] = RROTL(v[3], 21), v[3] ^= v[0];
    v[2] += v[1], v[1] = RROTL(v[1], 17), v[1] ^= v[2], v[2] = RROTL(v[2], 32);
}

/* SipHash-1-3 as the paper writes it: every byte read one at a time. */
static uint64_t ref_siphash13(const unsigned char *p, size_t len,
                              const uint64_t k[2])
{
    uint64_t v[4] = {k[0] ^ 0x736f6d6570736575ULL, k[1] ^ 0x646f72616e646f6dULL,
                     k[0] ^ 0x6c7967656e657261ULL, k[1] ^ 0x7465646279746573ULL};
    uint64_t m = 0;
    size_t i;

    for (i = 0; i < len; i++) {
        m |= (uint64_t)p[i] << (8 * (i % 8));
        if (i % 8 == 7) {
            v[3] ^= m, ref_round(v), v[0] ^= m;
            m = 0;
        }
    }
    m |= (uint64_t)len << 56;
    v[3] ^= m, ref_round(v), v[0] ^= m;
    v[2] ^= 0xff;
    ref_round(v), ref_round(v), ref_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* The word-at-a-time hash (tails read by overlapping loads) gives what the
 * byte-at-a-time one does, for every length, at every offset (the loads
 * must not read outside the message: ASan builds check that), and the
 * published SipHash-1-3 value of the empty message under key 00..0f. */
START_TEST(siphash13_matches_the_reference)
{
    unsigned char buf[80];
    uint64_t k[2] = {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

    ck_assert_uint_eq(siphash13("", 0, k), 0xabac0158050fc4dcULL);
    for (int round = 0; round < 50; round++) {
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = (unsigned char)hash_mix((uint64_t)round, i);
        k[0] = hash_mix(k[0], 1), k[1] = hash_mix(k[1], 2);
        for (size_t off = 0; off < 8; off++)
            for (size_t len = 0; off + len <= 64; len++) {
                unsigned char *msg = malloc(len ? len : 1);
                memcpy(msg, buf + off, len);
                ck_assert_uint_eq(siphash13(msg, len, k),
                                  ref_siphash13(msg, len, k));
                free(msg);
            }
    }
}
END_TEST

/* ---- hostile keys --------------------------------------------------------- */

#define HOSTILE 20000
#define KEYLEN 24

/* The segment the store gave a key before issue 11: the top 8 bits of the
 * unkeyed hash_bytes(key, len, 0).  Anyone could compute it. */
static unsigned old_segment(const char *key)
{
    return (unsigned)(hash_bytes(key, strlen(key), 0) >> 56);
}

/* n keys into keys[n][KEYLEN]: all in old segment 42 if crafted, else
 * plain. */
static void make_keys(char (*keys)[KEYLEN], size_t n, int crafted)
{
    unsigned long c = 0;

    for (size_t i = 0; i < n; i++) {
        do
            snprintf(keys[i], KEYLEN, "user:%s%lu", crafted ? "x" : "",
                     c++);
        while (crafted && old_segment(keys[i]) != 42);
    }
}

static store_memory_stats insert_all(char (*keys)[KEYLEN], size_t n)
{
    rl_store *s = open_memory(1 << 30);
    rl_rule r = make_rule(fw3);
    store_memory_stats st;
    algo_decision d;

    for (size_t i = 0; i < n; i++)
        ck_assert(charge(s, &r, keys[i], 1, &d));
    store_memory_stats_get(s, &st);
    ck_assert_int_eq(st.slots, (int64_t)n);
    rule_clear(&r);
    s->vt->free(s);
    return st;
}

START_TEST(crafted_colliding_keys_spread_across_segments)
{
    char (*bad)[KEYLEN] = malloc(HOSTILE * sizeof *bad);
    char (*plain)[KEYLEN] = malloc(HOSTILE * sizeof *plain);
    store_memory_stats hb, hp;
    double mean = (double)HOSTILE / STORE_MEMORY_SEGMENTS;

    make_keys(bad, HOSTILE, 1);
    make_keys(plain, HOSTILE, 0);
    for (size_t i = 0; i < HOSTILE; i++) /* the old hash: one segment */
        ck_assert_uint_eq(old_segment(bad[i]), 42);
    hb = insert_all(bad, HOSTILE);
    hp = insert_all(plain, HOSTILE);
    /* Spread as random keys spread: the fullest segment near the mean
     * (78; Poisson gives about 105), where the old hash put all 20000 in
     * one. */
    ck_assert_msg(hb.seg_max <= 2 * mean, "fullest segment %lld, mean %.0f",
                  (long long)hb.seg_max, mean);
    ck_assert_msg(hp.seg_max <= 2 * mean, "fullest segment %lld, mean %.0f",
                  (long long)hp.seg_max, mean);
    /* And cost as much to find: probes past other entries, within a few
     * times those of plain keys. */
    ck_assert_msg(hb.displacement <= 3 * hp.displacement + HOSTILE / 10,
                  "crafted keys: %lld slots passed over, plain keys %lld",
                  (long long)hb.displacement, (long long)hp.displacement);
    free(bad);
    free(plain);
}
END_TEST

/* The segment a key would get if the store's SipHash key were the fixed
 * k: the top 8 bits of its hash (256 segments). */
static unsigned fixed_key_segment(const char *key, const uint64_t k[2])
{
    return (unsigned)(siphash13(key, strlen(key), k) >> 56);
}

/* Keys crafted to pile into one segment under a SipHash key anyone could
 * know (all zeros; the published test key 00..0f) spread like plain keys
 * in the store, whose key is drawn at start: a store that used either
 * fixed key would put all 20000 in one segment and fail here. */
START_TEST(keys_crafted_for_a_fixed_hash_key_spread)
{
    static const uint64_t fixed[2][2] = {
        {0, 0}, {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL}};
    char (*bad)[KEYLEN] = malloc(HOSTILE * sizeof *bad);
    double mean = (double)HOSTILE / STORE_MEMORY_SEGMENTS;

    for (int f = 0; f < 2; f++) {
        unsigned long c = 0;
        store_memory_stats st;
        for (size_t i = 0; i < HOSTILE; i++)
            do
                snprintf(bad[i], KEYLEN, "user:k%lu", c++);
            while (fixed_key_segment(bad[i], fixed[f]) != 7);
        st = insert_all(bad, HOSTILE);
        ck_assert_msg(st.seg_max <= 2 * mean, "fixed key %d: fullest segment "
                      "%lld, mean %.0f", f, (long long)st.seg_max, mean);
    }
    free(bad);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("memory");
    /* What a table of hundreds of thousands of keys measures (bytes per
     * key, the spread of crafted keys): a case of its own, which
     * tests/valgrind.sh leaves out (CK_RUN_CASE=memory) for its time, the
     * insert, growth and eviction paths being the memory case's too. */
    TCase *spread = tcase_create("spread");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, state_is_per_rule_and_key);
    tcase_add_test(tc, denied_charges_change_nothing);
    tcase_add_test(tc, expired_entries_are_reused);
    tcase_add_test(tc, memory_cap_evicts_and_holds);
    tcase_add_test(tc, rule_change_of_algorithm_starts_fresh);
    tcase_add_test(tc, cap_below_floor_is_refused);
    tcase_add_test(tc, siphash13_matches_the_reference);
    suite_add_tcase(s, tc);
    tcase_set_timeout(spread, 120);
    tcase_add_test(spread, bytes_per_key_stay_under_48);
    tcase_add_test(spread, crafted_colliding_keys_spread_across_segments);
    tcase_add_test(spread, keys_crafted_for_a_fixed_hash_key_spread);
    suite_add_tcase(s, spread);
    return run_suite(s);
}
