/*
 * cmd_check.c -- `rlctl check KEY RULE --store URI`: what a server would
 * decide for one client now.  It opens a limiter on the store (the
 * library's public API, as any embedding does), loads the rule set the
 * rules service holds (or a file), charges the key under the rule and
 * prints the decision with the headers a client would get.  It charges
 * for real (the fleet sees it); --cost 0 only looks.  A rediss:// store
 * takes the --tls-* flags (the library's tls_* options).  An shm://
 * region is only ever opened, never made: a name that is not there is
 * said so, rather than a new 16 MiB region nobody else uses.
 */
#include "rlctl.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ratelimit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SHM_SCHEME "shm://"

/* The flags that become limiter options as they are. */
typedef struct check_flags {
    const char *store, *rules;
    const char *opt[4][2]; /* tls_ca_file, tls_ca_dir, tls_cert_file,
                              tls_key_file: name, value or NULL */
} check_flags;

/* shm://NAME: 0 if the region exists, else RLCTL_UNREACHABLE said. */
static int shm_exists(const char *store)
{
    char path[300];
    int fd;

    if (strncmp(store, SHM_SCHEME, strlen(SHM_SCHEME)) != 0)
        return 0;
    snprintf(path, sizeof path, "/%s", store + strlen(SHM_SCHEME));
    if ((fd = shm_open(path, O_RDONLY | O_CLOEXEC, 0)) >= 0) {
        close(fd);
        return 0;
    }
    if (errno == ENOENT)
        fprintf(stderr, "rlctl check: %.200s: no such region on this host "
                "(a limiter makes it; rlctl check never does)\n", store);
    else
        fprintf(stderr, "rlctl check: %.200s: %s\n", store,
                strerror(errno));
    return RLCTL_UNREACHABLE;
}

/* The rule set from the service, loaded into lim. */
static int load_from_service(const rlctl_opts *o, rl_limiter *lim)
{
    rlctl_reply r;
    int rc = rlctl_request(o, "GET", "/v1/rules", NULL, NULL, NULL, "rules",
                           &r);

    if (rc == RLCTL_DONE &&
        rl_rules_load_string(lim, r.body) != RL_OK) {
        fprintf(stderr, "rlctl check: the service's rule set does not load: "
                "%s\n", rl_errmsg(lim));
        rc = RLCTL_UNREACHABLE;
    }
    rlctl_reply_free(&r);
    return rc;
}

static void print_result(const char *key, const rl_result *res)
{
    char hdrs[RL_HEADERS_FORMAT_MAX];

    printf("%s: %s by rule %s (limit %lld per %lld s, %lld remaining)%s%s\n",
           key, res->allowed ? "allowed" : "denied", res->rule_id,
           (long long)res->limit, (long long)res->window,
           (long long)res->remaining,
           res->flags & RL_FLAG_SOFT ? ", would deny (mode log)" : "",
           res->flags & (RL_FLAG_FAIL_OPEN | RL_FLAG_FALLBACK |
                         RL_FLAG_FAIL_CLOSED)
               ? ", the store failed: decided by the failure mode" : "");
    if (rl_headers_format(res, RL_HEADERS_IETF, hdrs, sizeof hdrs) >= 0)
        fputs(hdrs, stdout);
}

/* Open the limiter: the store from flags, the rules from a file or the
 * service. */
static int open_limiter(const rlctl_opts *o, const check_flags *f,
                        rl_limiter **lim)
{
    const char *store = f->store, *rules = f->rules;
    rl_config *cfg;
    int rc;

    if ((rc = shm_exists(store)) != 0)
        return rc;
    if (!(cfg = rl_config_new()))
        return fprintf(stderr, "rlctl check: out of memory\n"),
               RLCTL_UNREACHABLE;
    rc = rl_config_set(cfg, "store", store);
    if (rc == RL_OK) { /* one operator's check waits as --timeout says,
                        * not the request path's 5 ms default */
        char ms[24];
        snprintf(ms, sizeof ms, "%ld",
                 o->timeout_ms > 60000 ? 60000L : (long)o->timeout_ms);
        rc = rl_config_set(cfg, "timeout_ms", ms);
    }
    if (rc == RL_OK && rules)
        rc = rl_config_set(cfg, "rules_file", rules);
    for (int i = 0; rc == RL_OK && i < 4; i++)
        if (f->opt[i][1])
            rc = rl_config_set(cfg, f->opt[i][0], f->opt[i][1]);
    if (rc != RL_OK) {
        fprintf(stderr, "rlctl check: %s\n", rl_errmsg(NULL));
        rl_config_free(cfg);
        return RLCTL_USAGE;
    }
    rc = rl_limiter_new(lim, cfg);
    rl_config_free(cfg);
    if (rc != RL_OK) {
        fprintf(stderr, "rlctl check: %s\n", rl_errmsg(NULL));
        return rc == RL_ESTORE ? RLCTL_UNREACHABLE : RLCTL_USAGE;
    }
    return rules ? RLCTL_DONE : load_from_service(o, *lim);
}

int rlctl_cmd_check(const rlctl_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"store", required_argument, NULL, 's'},
        {"cost", required_argument, NULL, 'c'},
        {"rules", required_argument, NULL, 'r'},
        {"tls-ca-file", required_argument, NULL, 0},
        {"tls-ca-dir", required_argument, NULL, 1},
        {"tls-cert-file", required_argument, NULL, 2},
        {"tls-key-file", required_argument, NULL, 3},
        {NULL, 0, NULL, 0}};
    check_flags f = {.opt = {{"tls_ca_file", NULL}, {"tls_ca_dir", NULL},
                             {"tls_cert_file", NULL},
                             {"tls_key_file", NULL}}};
    long long cost = 1;
    rl_limiter *lim = NULL;
    rl_result res = RL_RESULT_INIT;
    char *end;
    int c, rc;

    while ((c = getopt_long(argc, argv, "s:c:r:", opts, NULL)) != -1) {
        if (c == 's')
            f.store = optarg;
        else if (c == 'r')
            f.rules = optarg;
        else if (c >= 0 && c < 4)
            f.opt[c][1] = optarg;
        else if (c != 'c' || (cost = strtoll(optarg, &end, 10), *end) ||
                 !*optarg)
            return fprintf(stderr, "rlctl check: --cost: a whole number\n"),
                   RLCTL_USAGE;
    }
    if (optind != argc - 2 || !f.store)
        return fprintf(stderr, "usage: rlctl check KEY RULE --store URI "
                       "[--cost N] [--rules FILE]\n"
                       "         [--tls-ca-file F] [--tls-ca-dir D] "
                       "[--tls-cert-file F --tls-key-file F]\n"),
               RLCTL_USAGE;
    if ((rc = open_limiter(o, &f, &lim)) == RLCTL_DONE) {
        int got = rl_allow(lim, argv[optind], argv[optind + 1], cost, &res);
        if (got != RL_OK) {
            fprintf(stderr, "rlctl check: %s\n", rl_errmsg(lim));
            rc = got == RL_ENORULE ? RLCTL_REFUSED : RLCTL_USAGE;
        } else {
            print_result(argv[optind], &res);
            rc = res.allowed ? RLCTL_DONE : RLCTL_REFUSED;
        }
    }
    rl_limiter_free(lim);
    return rc;
}
