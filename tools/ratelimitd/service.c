/*
 * service.c -- a change to the rules, start to finish (see ratelimitd.h).
 *
 * Under one mutex (changes are serialized; SQLite has one writer anyway):
 * BEGIN IMMEDIATE, check If-Match / If-None-Match against the version
 * stored, take the next set version, write the rule (validated by the
 * library before it got here) and its history row, make the next snapshot
 * from the current one and the change, COMMIT, and only then install the
 * snapshot and hand it to the publisher.  Anything that fails before
 * COMMIT rolls back: the database, the snapshot and Redis stay as they
 * were, and the version is not used.  Since every change goes through
 * here, the snapshot is always the committed set; at start it is made
 * from the stored set, which the library parses whole (ruleset_parse(),
 * the call every limiter makes on what is published).
 *
 * Each start gives the sets it publishes a generation of its own, the
 * database's id and a random start id (ratelimitd(8), GENERATIONS): a
 * limiter takes a set of a new generation whatever its version, so a
 * database restored from a backup, whose versions went back, reaches the
 * fleet; a change is numbered above the version the publisher saw in
 * Redis as well as above the database's, so it also replaces another
 * database's set there.
 */
#include "ratelimitd.h"
#include "request.h"
#include "rule_json.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define IF_HEADER_SHOWN 64 /* bytes of a client's header quoted back */

struct service {
    db *db;
    publisher *pub;
    pthread_mutex_t wmu;  /* one change at a time                       */
    pthread_mutex_t smu;  /* guards cur against readers; only a thread
                             holding wmu changes it, so it reads cur
                             without smu                                */
    snapshot *cur;
    char gen[GEN_LEN + 1]; /* "<database id>.<start id>"                */
};

static void now_rfc3339(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The stored set, parsed by the library: the first snapshot, or NULL
 * with the reason in msg. */
static snapshot *load_set(service *s, char *msg, size_t len)
{
    int64_t version;
    char *text;
    size_t n;
    rl_ruleset *rs;
    snapshot *snap;

    if (db_set_version(s->db, &version) ||
        db_load_rules(s->db, version, &text, &n)) {
        snprintf(msg, len, "%s", db_error(s->db));
        return NULL;
    }
    if (ruleset_parse(text, n, version, &rs, msg, len) != RL_OK) {
        free(text);
        return NULL;
    }
    free(text);
    if (!(snap = snapshot_of_set(rs, s->gen)))
        snprintf(msg, len, "cannot index them (out of memory?)");
    ruleset_free(rs);
    return snap;
}

static void install(service *s, snapshot *snap)
{
    snapshot *old;

    pthread_mutex_lock(&s->smu);
    old = s->cur;
    s->cur = snap;
    pthread_mutex_unlock(&s->smu);
    snapshot_unref(old);
    if (s->pub)
        publisher_offer(s->pub, snap);
}

/* What only the whole set can say about a change: a rule's "replaces"
 * names a rule of the set, and no chain of them comes back (the library
 * refuses such a set whole, so the fleet would never take it).  A set
 * whose text holds no "replaces" cannot fail those checks, so it costs
 * a search of its text, not a parse of every rule. */
static int set_check(const snapshot *snap, change_res *res)
{
    char err[sizeof res->msg - 32];
    rl_ruleset *rs = NULL;

    if (!memmem(snap->json, snap->len, "\"replaces\"", 10))
        return SVC_OK;
    if (ruleset_parse(snap->json, snap->len, snap->version, &rs, err,
                      sizeof err) != RL_OK) {
        snprintf(res->msg, sizeof res->msg, "the set would be refused: %s",
                 err);
        return SVC_INVALID;
    }
    ruleset_free(rs);
    return SVC_OK;
}

/* The change is written: the next snapshot, COMMIT, install.  json is
 * the rule written, NULL for a delete. */
static int commit(service *s, int64_t version, const char *id,
                  int64_t rule_version, const char *json, change_res *res)
{
    snapshot *snap;

    if (json && !snapshot_find(s->cur, id) && s->cur->n >= RL_RULES_MAX) {
        snprintf(res->msg, sizeof res->msg, "rules: more than %d",
                 RL_RULES_MAX);
        return SVC_INVALID;
    }
    if (!(snap = snapshot_with(s->cur, version, id, rule_version, json))) {
        snprintf(res->msg, sizeof res->msg, "out of memory");
        return SVC_ERROR;
    }
    if (set_check(snap, res) != SVC_OK) {
        snapshot_unref(snap);
        return SVC_INVALID;
    }
    if (db_commit(s->db)) {
        snprintf(res->msg, sizeof res->msg, "%s", db_error(s->db));
        snapshot_unref(snap);
        return SVC_ERROR;
    }
    res->version = version;
    install(s, snap);
    return SVC_OK;
}

/* If-Match / If-None-Match against the stored rule (found, at version).
 * If-Match absent is unconditional, so a create needs no tag; "*" asks
 * for a current rule (RFC 9110 13.1.1): any rule there, none fails, as
 * any other If-Match on a rule that does not exist. */
static int preconditions(const change_req *req, const char *id, int found,
                         int64_t version, change_res *res)
{
    if (req->if_match && !etag_matches(req->if_match, version, found, 0)) {
        if (found)
            snprintf(res->msg, sizeof res->msg,
                     "rule %s is at version %lld, If-Match asked for %.*s",
                     id, (long long)version, IF_HEADER_SHOWN, req->if_match);
        else
            snprintf(res->msg, sizeof res->msg,
                     "rule %s does not exist, If-Match asked for %.*s", id,
                     IF_HEADER_SHOWN, req->if_match);
        return SVC_PRECONDITION;
    }
    if (req->if_none_match &&
        etag_matches(req->if_none_match, version, found, 1)) {
        snprintf(res->msg, sizeof res->msg,
                 "rule %s is at version %lld, If-None-Match refused %.*s", id,
                 (long long)version, IF_HEADER_SHOWN, req->if_none_match);
        return SVC_PRECONDITION;
    }
    return SVC_OK;
}

/* BEGIN, read the rule's version, check the preconditions: SVC_OK with the
 * transaction open, or the refusal with it rolled back. */
static int start(service *s, const char *id, const change_req *req,
                 int must_exist, change_res *res, int64_t *next)
{
    int64_t current, set;
    int found, rc;

    if (db_begin(s->db) || (found = db_rule_version(s->db, id, &current)) < 0 ||
        db_set_version(s->db, &set)) {
        snprintf(res->msg, sizeof res->msg, "%s", db_error(s->db));
        db_rollback(s->db);
        return SVC_ERROR;
    }
    if (must_exist && !found) {
        snprintf(res->msg, sizeof res->msg, "no rule %s", id);
        db_rollback(s->db);
        return SVC_NOT_FOUND;
    }
    if ((rc = preconditions(req, id, found, current, res)) != SVC_OK) {
        db_rollback(s->db);
        return rc;
    }
    /* Above what the key was seen holding too: a change made here
     * replaces another database's set, and a limiter of this generation
     * takes it as newer (ratelimitd(8), GENERATIONS). */
    if (s->pub && publisher_seen(s->pub) > set)
        set = publisher_seen(s->pub);
    *next = set + 1;
    return SVC_OK;
}

/* The rest of a PUT, inside the transaction. */
static int write_rule(service *s, rl_rule *r, const change_req *req,
                      int64_t version, change_res *res)
{
    json_t *j;
    db_event e = {.version = version, .rule_id = r->id, .op = "put",
                  .by = req->by};

    r->version = version;
    now_rfc3339(r->updated_at, sizeof r->updated_at);
    j = rule_to_json(r);
    res->json = j ? json_dumps(j, RULE_JSON_DUMP_FLAGS) : NULL;
    json_decref(j);
    if (!res->json) {
        snprintf(res->msg, sizeof res->msg, "out of memory");
        return SVC_ERROR;
    }
    e.at = r->updated_at;
    e.rule = res->json;
    if (db_put_rule(s->db, r, res->json) || db_history_add(s->db, &e) ||
        db_bump_version(s->db, version)) {
        snprintf(res->msg, sizeof res->msg, "%s", db_error(s->db));
        return SVC_ERROR;
    }
    return commit(s, version, r->id, version, res->json, res);
}

int service_put(service *s, rl_rule *r, const change_req *req,
                change_res *res)
{
    int64_t version;
    int rc;

    memset(res, 0, sizeof *res);
    pthread_mutex_lock(&s->wmu);
    rc = start(s, r->id, req, 0, res, &version);
    if (rc == SVC_OK && (rc = write_rule(s, r, req, version, res)) != SVC_OK)
        db_rollback(s->db);
    pthread_mutex_unlock(&s->wmu);
    if (rc != SVC_OK) {
        free(res->json);
        res->json = NULL;
    }
    return rc;
}

int service_delete(service *s, const char *id, const change_req *req,
                   change_res *res)
{
    char at[40];
    int64_t version;
    int rc;
    db_event e = {.rule_id = id, .op = "delete", .at = at, .by = req->by};

    memset(res, 0, sizeof *res);
    now_rfc3339(at, sizeof at);
    pthread_mutex_lock(&s->wmu);
    rc = start(s, id, req, 1, res, &version);
    if (rc == SVC_OK) {
        e.version = version;
        if (db_delete_rule(s->db, id) || db_history_add(s->db, &e) ||
            db_bump_version(s->db, version)) {
            snprintf(res->msg, sizeof res->msg, "%s", db_error(s->db));
            rc = SVC_ERROR;
        } else {
            rc = commit(s, version, id, 0, NULL, res);
        }
        if (rc != SVC_OK)
            db_rollback(s->db);
    }
    pthread_mutex_unlock(&s->wmu);
    return rc;
}

snapshot *service_snapshot(service *s)
{
    snapshot *snap;

    pthread_mutex_lock(&s->smu);
    snap = snapshot_ref(s->cur);
    pthread_mutex_unlock(&s->smu);
    return snap;
}

int service_history(service *s, const char *id, json_t **out, char *err,
                    size_t errlen)
{
    if (db_history(s->db, id, out, err, errlen))
        return SVC_ERROR;
    if (json_array_size(*out) == 0) {
        json_decref(*out);
        *out = NULL;
        snprintf(err, errlen, "no rule %s, ever", id);
        return SVC_NOT_FOUND;
    }
    return SVC_OK;
}

/* This start's generation: the database's id and a random start id. */
static int generation(service *s, char *err, size_t errlen)
{
    uint64_t start;

    if (getrandom(&start, sizeof start, 0) != (ssize_t)sizeof start)
        return snprintf(err, errlen, "getrandom: %s", strerror(errno)), -1;
    snprintf(s->gen, sizeof s->gen, "%016" PRIx64 ".%016" PRIx64,
             (uint64_t)db_id(s->db), start);
    return 0;
}

int service_open(service **out, const char *db_path, publisher *pub,
                 char *err, size_t errlen)
{
    service *s = calloc(1, sizeof *s);
    char msg[DB_ERR_MAX];

    *out = NULL;
    if (!s)
        return snprintf(err, errlen, "out of memory"), -1;
    pthread_mutex_init(&s->wmu, NULL);
    pthread_mutex_init(&s->smu, NULL);
    if (db_open(db_path, &s->db, err, errlen)) {
        service_close(s);
        return -1;
    }
    if (generation(s, err, errlen)) {
        service_close(s);
        return -1;
    }
    if (!(s->cur = load_set(s, msg, sizeof msg))) {
        snprintf(err, errlen, "%s: the stored rules: %s", db_path, msg);
        service_close(s);
        return -1;
    }
    s->pub = pub;
    if (pub)
        publisher_offer(pub, s->cur);
    *out = s;
    return 0;
}

void service_close(service *s)
{
    if (!s)
        return;
    snapshot_unref(s->cur);
    db_close(s->db);
    pthread_mutex_destroy(&s->wmu);
    pthread_mutex_destroy(&s->smu);
    free(s);
}
