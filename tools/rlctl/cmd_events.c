/*
 * cmd_events.c -- `rlctl events --redis URI [--stream NAME] [--count N]
 * [--follow]`: the rejection events limiters write to a Redis Stream
 * (option events_redis; ratelimit(3), "Rejection events").  Prints the
 * newest N entries, oldest first, one line each ("<id> rule=... key=..."),
 * then, with --follow, every new one as it comes (XREAD BLOCK) until
 * interrupted.  A field's value is outside input (a client key): bytes
 * that are not printable ASCII, a backslash and a space are printed as
 * \xHH, so one entry is always one line.  --json prints one JSON object a
 * line instead.
 */
#include "rlctl.h"
#include "redis_uri.h"
#include "rules_redis.h"

#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_MS 1000   /* one XREAD's wait, --follow */
#define COUNT_MAX 10000

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 0x7f || c == '\\')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

/* One entry: [id, [field, value, ...]]. */
static void print_entry(const redisReply *e, int json)
{
    const redisReply *id = e->element[0], *kv = e->element[1];
    json_t *o = json ? json_object() : NULL;

    if (!json)
        put_escaped(id->str, id->len);
    else
        json_object_set_new(o, "id", json_stringn(id->str, id->len));
    for (size_t i = 0; i + 1 < kv->elements; i += 2) {
        const redisReply *f = kv->element[i], *v = kv->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        if (json) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)f->len, f->str);
            json_object_set_new(o, name, json_stringn(v->str, v->len));
            continue;
        }
        putchar(' ');
        put_escaped(f->str, f->len);
        putchar('=');
        put_escaped(v->str, v->len);
    }
    if (json) {
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fputs(text ? text : "{}", stdout);
        free(text);
        json_decref(o);
    }
    putchar('\n');
}

/* Is r a list of stream entries? */
static int entries_ok(const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_STRING ||
            e->element[1]->type != REDIS_REPLY_ARRAY)
            return 0;
    }
    return 1;
}

/* The newest `count`, oldest first; the newest id into last ("0-0" for
 * an empty stream: whatever comes later is new). */
static int print_tail(redisContext *c, const char *stream, long count,
                      int json, char *last, size_t len, char *err,
                      size_t errlen)
{
    redisReply *r = redisCommand(c, "XREVRANGE %s + - COUNT %ld", stream,
                                 count);

    if (!entries_ok(r)) {
        snprintf(err, errlen, "XREVRANGE %s: %s", stream,
                 r && r->type == REDIS_REPLY_ERROR ? r->str
                 : r ? "unexpected reply" : c->errstr);
        freeReplyObject(r);
        return -1;
    }
    for (size_t i = r->elements; i-- > 0;)
        print_entry(r->element[i], json);
    snprintf(last, len, "%s", r->elements ? r->element[0]->element[0]->str
                                          : "0-0");
    freeReplyObject(r);
    fflush(stdout);
    return 0;
}

/* XREAD BLOCK from last until a signal; 0, or -1 with err set. */
static int follow(redisContext *c, const char *stream, int json, char *last,
                  size_t len, char *err, size_t errlen)
{
    while (!stop) {
        redisReply *r = redisCommand(c, "XREAD BLOCK %d STREAMS %s %s",
                                     BLOCK_MS, stream, last);
        const redisReply *got;

        if (stop) {
            freeReplyObject(r);
            break;
        }
        if (r && r->type == REDIS_REPLY_NIL) { /* nothing new */
            freeReplyObject(r);
            continue;
        }
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 1 ||
            r->element[0]->elements != 2 ||
            !entries_ok(got = r->element[0]->element[1])) {
            snprintf(err, errlen, "XREAD %s: %s", stream,
                     r && r->type == REDIS_REPLY_ERROR ? r->str
                     : r ? "unexpected reply" : c->errstr);
            freeReplyObject(r);
            return -1;
        }
        for (size_t i = 0; i < got->elements; i++)
            print_entry(got->element[i], json);
        if (got->elements)
            snprintf(last, len, "%s",
                     got->element[got->elements - 1]->element[0]->str);
        fflush(stdout);
        freeReplyObject(r);
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: rlctl events --redis URI [--stream NAME] "
            "[--count N] [--follow]\n");
    return RLCTL_USAGE;
}

int rlctl_cmd_events(const rlctl_opts *o, int argc, char **argv)
{
    static const struct option opts[] = {
        {"redis", required_argument, NULL, 'r'},
        {"stream", required_argument, NULL, 's'},
        {"count", required_argument, NULL, 'n'},
        {"follow", no_argument, NULL, 'f'},
        {NULL, 0, NULL, 0}};
    const char *uri = NULL, *stream = "rl:events";
    long count = 10;
    int fol = 0, c_, rc;
    char err[512], name[300], last[64], *end;
    redis_uri u;
    rr_conn *c;
    struct timeval tv;

    while ((c_ = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c_) {
        case 'r': uri = optarg; break;
        case 's': stream = optarg; break;
        case 'f': fol = 1; break;
        case 'n':
            count = strtol(optarg, &end, 10);
            if (*end || end == optarg || count < 1 || count > COUNT_MAX)
                return fprintf(stderr, "rlctl events: --count: 1..%d\n",
                               COUNT_MAX), RLCTL_USAGE;
            break;
        default: return usage();
        }
    }
    if (optind != argc || !uri || !stream[0] || strlen(stream) > 256)
        return usage();
    if (redis_uri_parse(uri, &u, err, sizeof err))
        return fprintf(stderr, "rlctl events: --redis: %s\n", err),
               RLCTL_USAGE;
    if (u.tls) /* the reads below use the blocking hiredis context */
        return fprintf(stderr, "rlctl events: --redis: rediss:// (TLS) is "
                       "not supported; use redis:// or unix://\n"),
               RLCTL_USAGE;
    c = rr_connect(&u, NULL, -1, mono_ms() + o->timeout_ms, o->timeout_ms, &rc,
                   err, sizeof err);
    rr_name(&u, name, sizeof name); /* by address, never by its URI */
    if (!c)
        return fprintf(stderr, "rlctl events: redis %s: %s\n", name, err),
               RLCTL_UNREACHABLE;
    tv = (struct timeval){(o->timeout_ms + BLOCK_MS) / 1000,
                          ((o->timeout_ms + BLOCK_MS) % 1000) * 1000};
    redisSetTimeout(c->c, tv); /* an XREAD waits BLOCK_MS by itself */
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    rc = print_tail(c->c, stream, count, o->json, last, sizeof last, err,
                    sizeof err);
    if (rc == 0 && fol)
        rc = follow(c->c, stream, o->json, last, sizeof last, err,
                    sizeof err);
    rr_close(c);
    if (rc != 0)
        return fprintf(stderr, "rlctl events: redis %s: %s\n", name, err),
               RLCTL_UNREACHABLE;
    return RLCTL_DONE;
}
