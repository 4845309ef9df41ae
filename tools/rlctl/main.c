/*
 * main.c -- rlctl, the operator's command line for libratelimit: the rules
 * service's API (put, get, delete, list, history, mode, watch), a check of
 * a key against a store and the fleet's dry-run report, with exit codes a
 * script can test (rlctl.h).
 * This file reads the global options and hands the rest of the command
 * line to the command; see rlctl(1).
 */
#include "rlctl.h"
#include "redis_uri.h"

#include <curl/curl.h>
#include "ratelimit.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: rlctl [--server URL] [--token-file PATH] [--timeout MS] [--json]\n"
    "             COMMAND [ARGS]\n"
    "       rlctl --version | --help\n"
    "commands:\n"
    "  list                          the rule set, one line a rule\n"
    "  get ID                        one rule\n"
    "  put ID (--file F | FLAGS)     create or replace a rule (rlctl put -h)\n"
    "  delete ID [--if-match V]      remove a rule\n"
    "  history ID                    every version of a rule\n"
    "  mode ID log|enforce           dry-run a rule, or enforce it\n"
    "  watch [--interval MS] [--count N]  follow the set's versions\n"
    "  check KEY RULE --store URI [--cost N] [--rules FILE]\n"
    "                                charge KEY under RULE in a store\n"
    "  dryrun RULE --redis URI       what a rule in mode log would have\n"
    "                                rejected, fleet-wide\n"
    "  events --redis URI [--stream S] [--count N] [--follow]\n"
    "                                the rejection events, newest N\n"
    "environment: RLCTL_SERVER, RLCTL_TOKEN_FILE\n"
    "exit: 0 done, 1 refused, 2 usage, 3 unreachable\n";

typedef struct command {
    const char *name;
    int (*run)(const rlctl_opts *o, int argc, char **argv);
} command;

static const command commands[] = {
    {"list", rlctl_cmd_list},       {"get", rlctl_cmd_get},
    {"put", rlctl_cmd_put},         {"delete", rlctl_cmd_delete},
    {"history", rlctl_cmd_history}, {"mode", rlctl_cmd_mode},
    {"watch", rlctl_cmd_watch},     {"check", rlctl_cmd_check},
    {"dryrun", rlctl_cmd_dryrun},   {"events", rlctl_cmd_events},
};

/* A server URL: http:// or https://, without a trailing slash. */
static int set_server(rlctl_opts *o, char *url)
{
    size_t n = strlen(url);
    char shown[128];

    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        redis_uri_redact(url, shown, sizeof shown); /* user:password@ */
        fprintf(stderr, "rlctl: --server: an http:// or https:// URL, not "
                "\"%s\"\n", shown);
        return -1;
    }
    while (n > 8 && url[n - 1] == '/')
        url[--n] = 0;
    o->server = url;
    return 0;
}

static int global_options(rlctl_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},
        {"token-file", required_argument, NULL, 't'},
        {"timeout", required_argument, NULL, 'T'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    const char *token_file = getenv("RLCTL_TOKEN_FILE");
    char *end;
    int c;

    if (getenv("RLCTL_SERVER") && set_server(o, getenv("RLCTL_SERVER")))
        return -1;
    while ((c = getopt_long(argc, argv, "+s:t:T:jh", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (set_server(o, optarg))
                return -1;
            break;
        case 't': token_file = optarg; break;
        case 'T':
            o->timeout_ms = strtol(optarg, &end, 10);
            if (*end || o->timeout_ms < 1 || o->timeout_ms > 600000) {
                fprintf(stderr, "rlctl: --timeout: 1..600000 ms\n");
                return -1;
            }
            break;
        case 'j': o->json = 1; break;
        case 'h': fputs(usage, stdout); exit(RLCTL_DONE);
        case 'V':
            printf("rlctl (libratelimit) %s\n", rl_version_string());
            exit(RLCTL_DONE);
        default: return -1;
        }
    }
    if (token_file && *token_file &&
        rlctl_read_token(token_file, o->token, sizeof o->token))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    rlctl_opts o = {.server = RLCTL_DEFAULT_SERVER, .timeout_ms = 5000};
    int rc = -1;

    if (global_options(&o, argc, argv))
        return fputs(usage, stderr), RLCTL_USAGE;
    if (optind >= argc)
        return fputs(usage, stderr), RLCTL_USAGE;
    argc -= optind;
    argv += optind;
    optind = 0; /* glibc: start afresh; the command's flags follow argv[0] */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "rlctl: cannot start libcurl\n");
        return RLCTL_UNREACHABLE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[0], commands[i].name) == 0)
            rc = commands[i].run(&o, argc, argv);
    if (rc < 0) {
        fprintf(stderr, "rlctl: unknown command \"%.40s\"\n%s", argv[0],
                usage);
        rc = RLCTL_USAGE;
    }
    curl_global_cleanup();
    return rc;
}
