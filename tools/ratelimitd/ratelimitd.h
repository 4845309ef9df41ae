/*
 * ratelimitd.h -- the parts of ratelimitd, the rules service, and how they
 * meet.  One file each:
 *
 *   main.c      flags, start-up and shutdown, signals
 *   http.c      libmicrohttpd: reading requests, auth, status codes, replies
 *   api.c       the endpoints: what each method on each path does
 *   service.c   one change start to finish: check, store, commit, publish
 *   snapshot.c  the rule set as last committed, shared by readers
 *   db.c        SQLite: the durable rules, versions and history
 *   publish.c   the Redis publisher thread (snapshot key + PUBLISH)
 *   auth.c      bearer tokens from a file, compared in constant time
 *   log.c       one line per change or error on stderr
 *   route.c, body.c, etag.c   pure request parsing (request.h), fuzzed
 *
 * Threads: libmicrohttpd's pool of workers runs the handlers; service.c
 * serializes changes with one mutex (SQLite has one writer anyway); reads
 * of rules come from the in-memory snapshot without touching SQLite; one
 * publisher thread talks to Redis, so no handler ever waits on Redis.
 */
#ifndef RLD_RATELIMITD_H
#define RLD_RATELIMITD_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "request.h"
#include "rule.h"
#include "ruleset.h"

/* ---- log.c ------------------------------------------------------------------ */

/* "ratelimitd: <message>\n" on stderr in one write; bytes outside printable
 * ASCII become '?', so no request can forge a log line. */
void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- auth.c ------------------------------------------------------------------ */

#define AUTH_NAME_MAX 64
#define AUTH_TOKEN_MIN 16
#define AUTH_TOKEN_MAX 1024

enum { AUTH_OK, AUTH_MISSING, AUTH_WRONG };

typedef struct auth auth;

/* Read "name:token" lines ('#' comments and blank lines skipped).  Refuses
 * a file that others may read or write, warns when its group may.  0, or -1
 * with the reason (never a token) in err. */
int auth_load(const char *path, auth **out, char *err, size_t errlen);
void auth_free(auth *a);

/* An Authorization header value: AUTH_OK with the token's name in *name,
 * AUTH_MISSING (no header, not "Bearer", empty) or AUTH_WRONG.  Time does
 * not depend on the token's bytes.  Any thread. */
int auth_check(const auth *a, const char *header, const char **name);

/* ---- snapshot.c ------------------------------------------------------------------ */

/* The rule set as of one committed version, immutable, reference counted:
 * what GET answers from and what the publisher sends.  Its text is the
 * canonical set; each rule's text is a slice of it. */
typedef struct snap_rule {
    char id[RL_RULE_ID_MAX + 1];
    int64_t version;
    const char *json;     /* inside snapshot.json, not NUL-terminated */
    size_t len;
} snap_rule;

/* "<database id>.<start id>", 16 hex digits each (service.c). */
#define GEN_LEN 33

typedef struct snapshot {
    atomic_int refs;
    int64_t version;
    char gen[GEN_LEN + 1];
    size_t n;
    snap_rule *rules;     /* sorted by id                              */
    char *json;           /* {"version":N,"generation":G,"rules":[...]},
                             NUL-ended                                  */
    size_t len;
} snapshot;

/* The first snapshot: a set the library parsed, its rules in id order
 * (NULL if they are not, or out of memory), of generation gen.  One
 * reference. */
snapshot *snapshot_of_set(const rl_ruleset *rs, const char *gen);
/* The next one: `old` with rule `id` replaced by (or added as) the
 * canonical text `json` at rule_version, or removed when json is NULL, as
 * set version `version` of old's generation.  NULL when out of memory. */
snapshot *snapshot_with(const snapshot *old, int64_t version, const char *id,
                        int64_t rule_version, const char *json);
/* A rule by id, or NULL.  Any thread holding a reference. */
const snap_rule *snapshot_find(const snapshot *s, const char *id);
snapshot *snapshot_ref(snapshot *s);
void snapshot_unref(snapshot *s);

/* ---- db.c ------------------------------------------------------------------------ */

#define DB_ERR_MAX 512

typedef struct db db;

typedef struct db_event {
    int64_t version;
    const char *rule_id, *op, *at, *by;
    const char *rule;     /* canonical rule JSON, NULL for a delete */
} db_event;

/* Open or create the database (WAL, synchronous=FULL, busy timeout), lock
 * it against a second ratelimitd.  0, or -1 with the reason in err. */
int db_open(const char *path, db **out, char *err, size_t errlen);
void db_close(db *d);

/* The writer's calls: one thread at a time (service.c holds its mutex).
 * 0 (db_rule_version: 1 found, 0 not), or -1 with db_error() set. */
int db_begin(db *d);
int db_commit(db *d);
void db_rollback(db *d);
int db_set_version(db *d, int64_t *v);
int db_bump_version(db *d, int64_t v);
int db_rule_version(db *d, const char *id, int64_t *v);
int db_put_rule(db *d, const rl_rule *r, const char *json);
int db_delete_rule(db *d, const char *id);
int db_history_add(db *d, const db_event *e);
/* {"version":version,"rules":[the stored rules by id]} as text (malloc). */
int db_load_rules(db *d, int64_t version, char **out, size_t *len);
const char *db_error(const db *d);
/* The database's id (meta "database_id"): random, made when a ratelimitd
 * first opened the file, kept by its backups. */
int64_t db_id(const db *d);

/* The history of one rule, oldest first, as a new JSON array (empty when
 * the id never existed).  Any thread. */
int db_history(db *d, const char *id, json_t **out, char *err,
               size_t errlen);

/* ---- publish.c -------------------------------------------------------------------- */

typedef struct publisher publisher;

typedef struct publisher_opts {
    const char *uri;      /* redis://[user:pass@]host:port/db or unix://  */
    const char *key;      /* snapshot key, also the channel's name       */
    int timeout_ms;       /* connect and command timeout                 */
    int64_t grace_ms;     /* away longer: publisher_health() fails       */
    /* rediss://: trusted CAs (file or directory; neither: the system's),
     * an optional client certificate and key (mutual TLS). */
    const char *tls_ca_file, *tls_ca_dir, *tls_cert_file, *tls_key_file;
} publisher_opts;

/* Check the URI and start the thread (Redis may be away: it keeps
 * trying).  0, or -1 with the reason in err. */
int publisher_start(publisher **out, const publisher_opts *o, char *err,
                    size_t errlen);
/* Hand over the newest snapshot (a reference is taken); never blocks on
 * Redis.  Older than what it has: ignored. */
void publisher_offer(publisher *p, snapshot *s);
/* The highest set version seen in the key (any generation), -1 none:
 * a change is numbered above it.  Any thread. */
int64_t publisher_seen(publisher *p);
/* 0 when what this service holds is what the fleet can run; -1 with the
 * reason when Redis refuses the service (auth, ACL, TLS), is away for
 * longer than grace_ms, or its key holds a set that is not this
 * database's.  NULL publisher: 0.  Any thread. */
int publisher_health(publisher *p, char *why, size_t len);
/* Sets written to the key, and publish rounds that failed (a connect, a
 * command), since start; the version the key was last seen holding (-1
 * not known).  Any thread. */
void publisher_counts(publisher *p, uint64_t *published, uint64_t *failed,
                      int64_t *key_version);
/* "up" (the last call to Redis worked), "down"; "off" for NULL. */
const char *publisher_state(publisher *p);
void publisher_stop(publisher *p);

/* ---- service.c --------------------------------------------------------------------- */

enum {
    SVC_OK,
    SVC_NOT_FOUND,     /* 404 */
    SVC_PRECONDITION,  /* 412 */
    SVC_INVALID,       /* 400: the set as a whole fails the library */
    SVC_ERROR          /* 500: the database failed; nothing changed */
};

typedef struct service service;

/* What a change needs from the request: the conditional headers (NULL
 * when absent) and the token name that makes it. */
typedef struct change_req {
    const char *if_match, *if_none_match;
    const char *by;
} change_req;

typedef struct change_res {
    int64_t version;      /* the set version the change got   */
    char *json;           /* PUT: the rule as stored (malloc) */
    char msg[DB_ERR_MAX]; /* why, when not SVC_OK             */
} change_res;

/* Open the database, load and validate the stored set, offer it to the
 * publisher (NULL: none).  0, or -1 with the reason in err. */
int service_open(service **out, const char *db_path, publisher *pub,
                 char *err, size_t errlen);
void service_close(service *s);

/* Store *r (validated by body_parse()) as the next version.  r->version and
 * r->updated_at are set here. */
int service_put(service *s, rl_rule *r, const change_req *req,
                change_res *res);
int service_delete(service *s, const char *id, const change_req *req,
                   change_res *res);
/* The current snapshot, with a reference for the caller. */
snapshot *service_snapshot(service *s);
/* The history of one rule; SVC_NOT_FOUND if it never existed. */
int service_history(service *s, const char *id, json_t **out, char *err,
                    size_t errlen);

/* ---- api.c / http.c ---------------------------------------------------------------- */

#define API_MSG_MAX 600

typedef struct http_opts {
    int listen_fd;        /* bound and listening                          */
    unsigned threads;     /* libmicrohttpd worker threads                 */
    size_t max_body;      /* 413 above                                    */
    int read_auth;        /* GETs need a token too (not /healthz)         */
    const auth *tokens;
    service *svc;
    publisher *pub;       /* NULL: "redis":"off"                          */
} http_opts;

/* One request, as http.c hands it to api.c: routed, authenticated, body
 * read (PUT) and within the cap. */
typedef struct api_call {
    const char *method;
    const route *rt;
    const char *body;
    size_t len;
    const char *if_match, *if_none_match;   /* NULL when absent */
    const char *by;                         /* token name, or NULL */
} api_call;

/* The answer: status, JSON body (malloc, or NULL for none), ETag ("" for
 * none); for errors the code and message the log shows. */
typedef struct api_reply {
    int status;
    char *body;
    size_t len;
    char etag[ETAG_MAX];
    const char *allow;      /* 405: the Allow header */
    const char *type;       /* Content-Type; NULL: JSON */
    const char *error;
    char msg[API_MSG_MAX];
} api_reply;

/* The methods a route takes ("GET, HEAD", ...) for 405's Allow header;
 * 1 if `method` is one of them. */
int api_method_allowed(int kind, const char *method, const char **allow);
/* 1 if the call needs a bearer token: every write; reads with read_auth;
 * never /healthz. */
int api_needs_token(const http_opts *o, int kind, const char *method);
/* Fill an error reply: {"error": code, "message": msg, "field": field?}. */
void api_error(api_reply *r, int status, const char *code, const char *msg,
               const char *field);
/* Serve one call.  Any worker thread. */
void api_serve(const http_opts *o, const api_call *c, api_reply *r);

typedef struct http http;

/* ---- metrics.c ---------------------------------------------------------------------- */

#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One request answered: its route (ROUTE_*) and status.  Any thread; an
 * atomic add. */
void metrics_count(int kind, int status);
/* The Prometheus text (malloc): requests by route and status, publishes,
 * publish failures, the set's version and the one published, Redis up,
 * healthy.  0, or -1 out of memory. */
int metrics_text(const http_opts *o, char **out, size_t *len);

int http_start(http **out, const http_opts *o, char *err, size_t errlen);
/* Serve with these tokens from now on (SIGHUP); returns the ones replaced,
 * which no request uses any more: the caller frees them. */
const auth *http_swap_tokens(http *h, const auth *tokens);
void http_stop(http *h);

#endif
