/*
 * db.c -- the durable rule store: one SQLite file (see ratelimitd.h).
 *
 * WAL mode with synchronous=FULL: a COMMIT returns only once the change is
 * in the log on disk, and ratelimitd answers 200 only after COMMIT, so a
 * kill -9 or a power cut loses no acknowledged change; a change that was not
 * committed is rolled back whole by SQLite's recovery.  Each change is one
 * transaction (BEGIN IMMEDIATE: the write lock is taken first, so the
 * version read inside is the one written).
 *
 * Tables (schema version PRAGMA user_version = DB_SCHEMA):
 *   meta     name -> value; "set_version": the version of the last change,
 *            monotonic, never reused (a delete takes a version too);
 *            "database_id": a random number made when the file is first
 *            opened by a ratelimitd that knows it, kept for its life (a
 *            backup restored keeps it: the same database, gone back)
 *   rules    one row per rule: the design note's columns (for people with
 *            the sqlite3 shell) and "json", the canonical rule served and
 *            published, written together from the same rl_rule
 *   history  one row per change, keyed by its set version: rule id, put or
 *            delete, when, by which token name, the rule written (NULL for
 *            a delete)
 *
 * Two connections: the writer (its caller serializes changes) and a reader
 * for the history under its own mutex, so a history read never waits for a
 * commit's fsync.  The file is flock()ed for the life of the process: a
 * second ratelimitd on the same database refuses to start instead of
 * forking the version sequence.
 */
#include "ratelimitd.h"
#include "rule_json.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#define DB_SCHEMA 1
#define DB_BUSY_MS 5000

static const char schema[] =
    "CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL,"
    " value INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO meta VALUES ('set_version', 0);"
    "CREATE TABLE rules (rule_id TEXT PRIMARY KEY NOT NULL,"
    " dimension TEXT NOT NULL, match TEXT, \"limit\" INTEGER NOT NULL,"
    " window_seconds INTEGER NOT NULL, burst INTEGER,"
    " algorithm TEXT NOT NULL, mode TEXT NOT NULL,"
    " failure_mode TEXT NOT NULL, version INTEGER NOT NULL,"
    " updated_at TEXT NOT NULL, json TEXT NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE history (version INTEGER PRIMARY KEY,"
    " rule_id TEXT NOT NULL, op TEXT NOT NULL CHECK (op IN ('put','delete')),"
    " at TEXT NOT NULL, by TEXT NOT NULL, rule TEXT);"
    "CREATE INDEX history_by_rule ON history (rule_id, version);";

/* The writer's statements, prepared once. */
enum {
    Q_BEGIN, Q_COMMIT, Q_ROLLBACK, Q_SET_VERSION, Q_BUMP, Q_RULE_VERSION,
    Q_PUT, Q_DELETE, Q_HISTORY_ADD, Q_ALL_RULES, Q_COUNT
};

static const char *const sql[Q_COUNT] = {
    [Q_BEGIN] = "BEGIN IMMEDIATE",
    [Q_COMMIT] = "COMMIT",
    [Q_ROLLBACK] = "ROLLBACK",
    [Q_SET_VERSION] = "SELECT value FROM meta WHERE name = 'set_version'",
    [Q_BUMP] = "UPDATE meta SET value = ?1 WHERE name = 'set_version'"
               " AND value < ?1",
    [Q_RULE_VERSION] = "SELECT version FROM rules WHERE rule_id = ?1",
    [Q_PUT] = "INSERT OR REPLACE INTO rules (rule_id, dimension, match,"
              " \"limit\", window_seconds, burst, algorithm, mode,"
              " failure_mode, version, updated_at, json)"
              " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [Q_DELETE] = "DELETE FROM rules WHERE rule_id = ?1",
    [Q_HISTORY_ADD] = "INSERT INTO history (version, rule_id, op, at, by,"
                      " rule) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [Q_ALL_RULES] = "SELECT json FROM rules ORDER BY rule_id",
};

#define Q_HISTORY "SELECT version, op, at, by, rule FROM history" \
                  " WHERE rule_id = ?1 ORDER BY version"

struct db {
    sqlite3 *w;                 /* the writer                          */
    sqlite3_stmt *q[Q_COUNT];
    char err[DB_ERR_MAX];
    pthread_mutex_t rmu;        /* guards r and rq                     */
    sqlite3 *r;                 /* the reader (history)                */
    sqlite3_stmt *rq;
    int lock_fd;
    int64_t id;                 /* meta's database_id                  */
};

const char *db_error(const db *d)
{
    return d->err;
}

static int fail(db *d, sqlite3 *conn, const char *what)
{
    snprintf(d->err, sizeof d->err, "%s: %s", what, sqlite3_errmsg(conn));
    return -1;
}

/* Run a statement that returns no row, then reset it. */
static int step_done(db *d, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);

    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc == SQLITE_DONE ? 0 : fail(d, d->w, what);
}

static int pragmas(db *d, sqlite3 *conn, int writer)
{
    sqlite3_stmt *s;
    int ok;

    sqlite3_busy_timeout(conn, DB_BUSY_MS);
    if (!writer)
        return sqlite3_exec(conn, "PRAGMA query_only = 1", 0, 0, 0)
                   ? fail(d, conn, "query_only") : 0;
    if (sqlite3_prepare_v2(conn, "PRAGMA journal_mode = WAL", -1, &s, 0))
        return fail(d, conn, "journal_mode");
    ok = sqlite3_step(s) == SQLITE_ROW &&
         strcmp((const char *)sqlite3_column_text(s, 0), "wal") == 0;
    sqlite3_finalize(s);
    if (!ok)
        return snprintf(d->err, sizeof d->err,
                        "cannot switch the database to WAL mode"), -1;
    if (sqlite3_exec(conn, "PRAGMA synchronous = FULL", 0, 0, 0))
        return fail(d, conn, "synchronous");
    return 0;
}

static int int_query(db *d, const char *q, int64_t *out)
{
    sqlite3_stmt *s;
    int rc;

    if (sqlite3_prepare_v2(d->w, q, -1, &s, 0))
        return fail(d, d->w, q);
    rc = sqlite3_step(s);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(d, d->w, q);
}

/* Create the schema in a new file; check the version of an old one. */
static int schema_check(db *d)
{
    int64_t version, tables, set, newest;

    if (int_query(d, "PRAGMA user_version", &version) ||
        int_query(d, "SELECT count(*) FROM sqlite_master", &tables))
        return -1;
    if (version == 0 && tables == 0) {
        if (sqlite3_exec(d->w, "BEGIN", 0, 0, 0) ||
            sqlite3_exec(d->w, schema, 0, 0, 0) ||
            sqlite3_exec(d->w, "PRAGMA user_version = 1", 0, 0, 0) ||
            sqlite3_exec(d->w, "COMMIT", 0, 0, 0)) {
            fail(d, d->w, "creating the schema");
            sqlite3_exec(d->w, "ROLLBACK", 0, 0, 0);
            return -1;
        }
        return 0;
    }
    if (version != DB_SCHEMA)
        return snprintf(d->err, sizeof d->err,
                        "schema version %lld, this ratelimitd knows %d%s",
                        (long long)version, DB_SCHEMA,
                        version ? "" : " (not a ratelimitd database?)"), -1;
    if (int_query(d, sql[Q_SET_VERSION], &set) ||
        int_query(d, "SELECT coalesce(max(version), 0) FROM history",
                  &newest))
        return -1;
    if (set < newest)
        return snprintf(d->err, sizeof d->err,
                        "set version %lld is below the newest history entry "
                        "%lld: the database was changed by hand?",
                        (long long)set, (long long)newest), -1;
    return 0;
}

static int lock_file(db *d, const char *path)
{
    d->lock_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (d->lock_fd < 0)
        return snprintf(d->err, sizeof d->err, "%s: %s", path,
                        strerror(errno)), -1;
    if (flock(d->lock_fd, LOCK_EX | LOCK_NB) != 0)
        return snprintf(d->err, sizeof d->err,
                        "%s: %s", path, errno == EWOULDBLOCK
                            ? "in use by another ratelimitd"
                            : strerror(errno)), -1;
    return 0;
}

/* The database's id: made (random, > 0) the first time, read after. */
static int database_id(db *d)
{
    sqlite3_stmt *s;
    int64_t id = 0;
    int rc;

    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        return snprintf(d->err, sizeof d->err, "getrandom: %s",
                        strerror(errno)), -1;
    id = (int64_t)((uint64_t)id >> 1) | 1;
    if (sqlite3_prepare_v2(d->w, "INSERT OR IGNORE INTO meta VALUES"
                           " ('database_id', ?1)", -1, &s, 0))
        return fail(d, d->w, "database_id");
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return fail(d, d->w, "database_id");
    return int_query(d, "SELECT value FROM meta WHERE name = 'database_id'",
                     &d->id);
}

int64_t db_id(const db *d)
{
    return d->id;
}

static int open_all(db *d, const char *path)
{
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                SQLITE_OPEN_NOMUTEX;

    if (sqlite3_open_v2(path, &d->w, flags, NULL))
        return fail(d, d->w, path);
    if (lock_file(d, path) || pragmas(d, d->w, 1) || schema_check(d) ||
        database_id(d))
        return -1;
    for (int i = 0; i < Q_COUNT; i++)
        if (sqlite3_prepare_v3(d->w, sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &d->q[i], NULL))
            return fail(d, d->w, sql[i]);
    if (sqlite3_open_v2(path, &d->r, SQLITE_OPEN_READONLY |
                        SQLITE_OPEN_NOMUTEX, NULL))
        return fail(d, d->r, path);
    if (pragmas(d, d->r, 0) ||
        sqlite3_prepare_v3(d->r, Q_HISTORY, -1, SQLITE_PREPARE_PERSISTENT,
                           &d->rq, NULL))
        return d->err[0] ? -1 : fail(d, d->r, "history");
    return 0;
}

int db_open(const char *path, db **out, char *err, size_t errlen)
{
    db *d = calloc(1, sizeof *d);

    *out = NULL;
    if (!d)
        return snprintf(err, errlen, "out of memory"), -1;
    d->lock_fd = -1;
    pthread_mutex_init(&d->rmu, NULL);
    if (open_all(d, path)) {
        snprintf(err, errlen, "%s", d->err);
        db_close(d);
        return -1;
    }
    *out = d;
    return 0;
}

void db_close(db *d)
{
    if (!d)
        return;
    for (int i = 0; i < Q_COUNT; i++)
        sqlite3_finalize(d->q[i]);
    sqlite3_finalize(d->rq);
    sqlite3_close(d->r);
    sqlite3_close(d->w);
    if (d->lock_fd >= 0)
        close(d->lock_fd); /* after SQLite's own descriptors are closed */
    pthread_mutex_destroy(&d->rmu);
    free(d);
}

/* ---- the writer: one change at a time, serialized by the caller ------------ */

int db_begin(db *d)
{
    return step_done(d, d->q[Q_BEGIN], "BEGIN");
}

int db_commit(db *d)
{
    return step_done(d, d->q[Q_COMMIT], "COMMIT");
}

void db_rollback(db *d)
{
    if (!sqlite3_get_autocommit(d->w))
        sqlite3_step(d->q[Q_ROLLBACK]);
    sqlite3_reset(d->q[Q_ROLLBACK]);
}

int db_set_version(db *d, int64_t *v)
{
    sqlite3_stmt *s = d->q[Q_SET_VERSION];
    int rc = sqlite3_step(s);

    *v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : fail(d, d->w, "set version");
}

int db_bump_version(db *d, int64_t v)
{
    sqlite3_stmt *s = d->q[Q_BUMP];

    sqlite3_bind_int64(s, 1, v);
    if (step_done(d, s, "set version"))
        return -1;
    if (sqlite3_changes(d->w) != 1)
        return snprintf(d->err, sizeof d->err,
                        "set version: %lld is not newer", (long long)v), -1;
    return 0;
}

int db_rule_version(db *d, const char *id, int64_t *v)
{
    sqlite3_stmt *s = d->q[Q_RULE_VERSION];
    int rc;

    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    *v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc == SQLITE_ROW)
        return 1;
    return rc == SQLITE_DONE ? 0 : fail(d, d->w, "rule version");
}

/* The match column: {"endpoint":...,"tier":...}, or NULL (SQL) for any. */
static char *match_text(const rl_rule *r)
{
    json_t *m;
    char *s;

    if (!r->endpoint && !r->tier && !r->values)
        return NULL;
    m = json_object();
    if (m && r->endpoint)
        json_object_set_new(m, "endpoint", json_string(r->endpoint));
    if (m && r->tier)
        json_object_set_new(m, "tier", json_string(r->tier));
    if (m && r->values) { /* the patterns, always as an array here */
        json_t *a = json_array();
        const char *v = r->values;
        for (uint32_t i = 0; a && i < r->nvalues; i++, v += strlen(v) + 1)
            json_array_append_new(a, json_string(v));
        json_object_set_new(m, "value", a);
    }
    s = m ? json_dumps(m, RULE_JSON_DUMP_FLAGS) : NULL;
    json_decref(m);
    return s;
}

int db_put_rule(db *d, const rl_rule *r, const char *json)
{
    sqlite3_stmt *s = d->q[Q_PUT];
    char *match = match_text(r);
    int rc, bucket = r->ap.burst > 0;

    if ((r->endpoint || r->tier || r->values) && !match)
        return snprintf(d->err, sizeof d->err, "out of memory"), -1;
    sqlite3_bind_text(s, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, r->dimension, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, match, -1, SQLITE_STATIC); /* NULL: SQL NULL */
    sqlite3_bind_int64(s, 4, r->ap.limit);
    sqlite3_bind_int64(s, 5, r->window_s);
    if (bucket)
        sqlite3_bind_int64(s, 6, r->ap.burst);
    sqlite3_bind_text(s, 7, algo_name(r->ap.algo), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 8, rule_mode_name(r->mode), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 9, rule_failure_name(r->failure), -1,
                      SQLITE_STATIC);
    sqlite3_bind_int64(s, 10, r->version);
    sqlite3_bind_text(s, 11, r->updated_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 12, json, -1, SQLITE_STATIC);
    rc = step_done(d, s, "storing the rule");
    free(match);
    return rc;
}

int db_delete_rule(db *d, const char *id)
{
    sqlite3_stmt *s = d->q[Q_DELETE];

    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    return step_done(d, s, "deleting the rule");
}

int db_history_add(db *d, const db_event *e)
{
    sqlite3_stmt *s = d->q[Q_HISTORY_ADD];

    sqlite3_bind_int64(s, 1, e->version);
    sqlite3_bind_text(s, 2, e->rule_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, e->op, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, e->at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, e->by, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, e->rule, -1, SQLITE_STATIC);
    return step_done(d, s, "recording the change");
}

/* Append bytes to a growing buffer. */
static int append(char **buf, size_t *len, size_t *cap, const char *s,
                  size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        char *b;
        while (c < *len + n + 1)
            c *= 2;
        if (!(b = realloc(*buf, c)))
            return -1;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

int db_load_rules(db *d, int64_t version, char **out, size_t *outlen)
{
    sqlite3_stmt *s = d->q[Q_ALL_RULES];
    char head[64], *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = SQLITE_DONE, n = 0, bad;

    snprintf(head, sizeof head, "{\"version\":%lld,\"rules\":[",
             (long long)version);
    bad = append(&buf, &len, &cap, head, strlen(head));
    while (!bad && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *j = (const char *)sqlite3_column_text(s, 0);
        bad = (n++ && append(&buf, &len, &cap, ",", 1)) ||
              append(&buf, &len, &cap, j ? j : "null",
                     j ? (size_t)sqlite3_column_bytes(s, 0) : 4);
    }
    sqlite3_reset(s);
    if (!bad && rc != SQLITE_DONE) {
        free(buf);
        return fail(d, d->w, "reading the rules");
    }
    if (bad || append(&buf, &len, &cap, "]}", 2)) {
        free(buf);
        return snprintf(d->err, sizeof d->err, "out of memory"), -1;
    }
    *out = buf;
    *outlen = len;
    return 0;
}

/* ---- the reader -------------------------------------------------------------------- */

static json_t *history_row(sqlite3_stmt *s)
{
    const char *rule = (const char *)sqlite3_column_text(s, 4);
    json_t *r = rule ? json_loads(rule, 0, NULL) : json_null();

    return json_pack("{s:I, s:s, s:s, s:s, s:o}",
                     "version", (json_int_t)sqlite3_column_int64(s, 0),
                     "op", (const char *)sqlite3_column_text(s, 1),
                     "at", (const char *)sqlite3_column_text(s, 2),
                     "by", (const char *)sqlite3_column_text(s, 3),
                     "rule", r ? r : json_null());
}

int db_history(db *d, const char *id, json_t **out, char *err, size_t errlen)
{
    json_t *arr = json_array();
    int rc = SQLITE_DONE, bad = !arr;

    pthread_mutex_lock(&d->rmu);
    sqlite3_bind_text(d->rq, 1, id, -1, SQLITE_STATIC);
    while (!bad && (rc = sqlite3_step(d->rq)) == SQLITE_ROW)
        bad = json_array_append_new(arr, history_row(d->rq));
    if (!bad && rc != SQLITE_DONE)
        snprintf(err, errlen, "reading the history: %s",
                 sqlite3_errmsg(d->r));
    else if (bad)
        snprintf(err, errlen, "out of memory");
    sqlite3_reset(d->rq);
    sqlite3_clear_bindings(d->rq);
    pthread_mutex_unlock(&d->rmu);
    if (bad || rc != SQLITE_DONE) {
        json_decref(arr);
        return -1;
    }
    *out = arr;
    return 0;
}
