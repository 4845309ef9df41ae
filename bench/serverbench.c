/*
 * serverbench.c -- one program for the benches that run against a private
 * redis-server of their own (the test harness starts and stops it):
 *
 *   serverbench deny   [options]   the deny cache and leases (denybench.c)
 *   serverbench events [options]   rejection events' cost and delivery
 *   serverbench outage [options]   admissions through a short, long outage
 *   serverbench tls    [options]   a check over TLS beside TCP
 *   serverbench timeout [--json]   store denials of a fail-closed rule
 *
 * A mode's options follow its name (--json in every mode, --quick in all
 * but outage and timeout; `serverbench MODE --help` lists the rest).  The table below
 * is the whole driver: a mode that needs a plain server gets it started
 * here (tls starts its own, with a TLS port) and every mode ends with the
 * "done" row.
 */
#include "serverbench.h"

typedef struct sb_mode {
    const char *name;
    int (*run)(int argc, char **argv, sb_env *env);
    int server; /* 1: start a plain redis-server for it */
    const char *about;
} sb_mode;

static const sb_mode modes[] = {
    {.name = "deny", .run = deny_main, .server = 1,
     .about = "Redis calls per check, deny cache and leases on beside off"},
    {.name = "events", .run = events_main, .server = 1,
     .about = "rejection events: cost on the request path, delivery"},
    {.name = "outage", .run = outage_main, .server = 1,
     .about = "admissions through a 100 ms and a 3 s outage, 4 processes"},
    {.name = "tls", .run = tls_main, .server = 0,
     .about = "checks/s, p50 and p99 over TLS beside TCP"},
    {.name = "timeout", .run = timeout_main, .server = 1,
     .about = "fail-closed denials by timeout_ms and host load"},
};

#define NMODES (sizeof modes / sizeof modes[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: serverbench MODE [--json] [--quick] [options]\n");
    for (size_t i = 0; i < NMODES; i++)
        fprintf(f, "  %-8s %s\n", modes[i].name, modes[i].about);
}

int main(int argc, char **argv)
{
    static sb_env env;
    const sb_mode *m = NULL;
    uint64_t t_start = now_ns();
    int rc, json = 0, help = 0;

    for (size_t i = 0; argc > 1 && i < NMODES; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            m = &modes[i];
    if (m == NULL)
        return usage(argc > 1 && strcmp(argv[1], "--help") == 0 ? stdout
                                                                 : stderr),
               argc > 1 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
    for (int i = 2; i < argc; i++) {
        json |= strcmp(argv[i], "--json") == 0;
        help |= strcmp(argv[i], "--help") == 0;
    }
    if (help)
        return m->run(argc - 1, argv + 1, &env);
    if (m->server && (!rh_available() || rh_start(&env.srv, NULL) != 0)) {
        fprintf(stderr, "serverbench %s: cannot start redis-server\n",
                m->name);
        return 1;
    }
    if (m->server)
        rh_uri(&env.srv, env.uri, sizeof env.uri);
    rc = m->run(argc - 1, argv + 1, &env);
    if (m->server)
        rh_stop(&env.srv);
    if (rc == 0)
        print_done(m->name, json, t_start);
    return rc;
}
