/*
 * metrics_dump.c -- known traffic, then the metrics: for tests/metrics_prom.py
 * (run by tests/metrics_prom.sh), which parses the text with
 * prometheus_client and compares every sample with what this program did.
 *
 * A memory-store limiter with three rules (enforce per user, log per ip,
 * enforce global) takes a deterministic stream of checks; what each
 * rl_check() answered is tallied per rule from its result, as the metrics
 * define them (allowed, denied, would-deny, near-limit: a pass with less
 * than near_limit_pct % of the limit left).  Writes the metrics text to
 * argv[1] and the tallies to argv[2] as JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"

#define NEAR_PCT 25

static const char rules[] =
    "{\"version\":7,\"rules\":["
    "{\"rule_id\":\"per-user\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
    "\"/u\"},\"limit\":8,\"window_seconds\":3600},"
    "{\"rule_id\":\"ip.log\",\"dimension\":\"ip\",\"match\":{\"endpoint\":"
    "\"/i\"},\"limit\":4,\"window_seconds\":600,\"mode\":\"log\"},"
    "{\"rule_id\":\"all:global\",\"dimension\":\"global\",\"match\":"
    "{\"endpoint\":\"/g\"},\"limit\":20,\"window_seconds\":60,"
    "\"algorithm\":\"token_bucket\"}]}";

enum { ALLOWED, DENIED, WOULD, NEAR, NCOUNT };
static const char *const rule_ids[] = {"per-user", "ip.log", "all:global"};
static const char *const endpoints[] = {"/u", "/i", "/g"};
static const long limits[] = {8, 4, 20}, windows[] = {3600, 600, 60};
static long tally[3][NCOUNT];

static int one(rl_limiter *lim, int r, const char *who)
{
    rl_request req = {.size = sizeof req, .endpoint = endpoints[r],
                      .user = who, .ip = who, .cost = 1};
    rl_result res = RL_RESULT_INIT;

    if (rl_check(lim, &req, &res) != RL_OK) {
        fprintf(stderr, "metrics_dump: %s\n", rl_errmsg(lim));
        return -1;
    }
    if (res.flags & RL_FLAG_SOFT)
        tally[r][WOULD]++;
    else if (!res.allowed)
        tally[r][DENIED]++;
    else {
        tally[r][ALLOWED]++;
        if (res.remaining * 100 < limits[r] * NEAR_PCT)
            tally[r][NEAR]++;
    }
    return 0;
}

static int drive(rl_limiter *lim)
{
    char who[16];

    for (int i = 0; i < 300; i++) {
        int r = (i * 7) % 3;
        snprintf(who, sizeof who, "c%d", (i * 13) % 11);
        if (one(lim, r, who) != 0)
            return -1;
    }
    return 0;
}

static int write_tallies(const char *path)
{
    FILE *f = fopen(path, "w");

    if (!f)
        return -1;
    fprintf(f, "{\"checks\": 300, \"version\": 7, \"rules\": {");
    for (int r = 0; r < 3; r++)
        fprintf(f, "%s\"%s\": {\"allowed\": %ld, \"denied\": %ld, "
                   "\"would_deny\": %ld, \"near_limit\": %ld, \"limit\": %ld, "
                   "\"window_seconds\": %ld}",
                r ? ", " : "", rule_ids[r], tally[r][ALLOWED],
                tally[r][DENIED], tally[r][WOULD], tally[r][NEAR], limits[r],
                windows[r]);
    fprintf(f, "}}\n");
    return fclose(f);
}

static int write_text(FILE *f, const char *p, size_t n)
{
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static int to_file(void *arg, const char *p, size_t n)
{
    return write_text(arg, p, n);
}

int main(int argc, char **argv)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    FILE *out;
    int rc;

    if (argc != 3 || !cfg) {
        fprintf(stderr, "usage: metrics_dump METRICS_OUT TALLY_JSON_OUT\n");
        return 2;
    }
    if (rl_config_set(cfg, "rules", rules) != RL_OK ||
        rl_config_set(cfg, "near_limit_pct", "25") != RL_OK ||
        rl_limiter_new(&lim, cfg) != RL_OK) {
        fprintf(stderr, "metrics_dump: %s\n", rl_errmsg(NULL));
        return 1;
    }
    rl_config_free(cfg);
    if (drive(lim) != 0 || write_tallies(argv[2]) != 0 ||
        !(out = fopen(argv[1], "w")))
        return 1;
    rc = rl_metrics_write_cb(lim, to_file, out);
    if (fclose(out) != 0 || rc != RL_OK)
        return 1;
    rl_limiter_free(lim);
    return 0;
}
