/*
 * rules_source.c -- the option rules_source: one background thread per
 * limiter that keeps the limiter's rules in step with a rule set kept
 * elsewhere, off the request path.
 *
 * Redis (redis://, rediss:// with the tls_* options, unix://, or "store":
 * the store's own server): the key
 * rules_key holds the whole set as JSON with its version; whoever changes
 * it PUBLISHes on the channel of the same name (contracts.md section 2).
 * The thread keeps two connections of its own: one SUBSCRIBEd (a message
 * only says "look"), one for reading the key, which it does on every
 * message, every rules_refresh_s (the backstop for a missed push) and
 * after every reconnect.  Every ~5 s (TICK_MS) it PINGs the subscribed
 * connection, so a connection that died silently is replaced within
 * seconds, not at the next pull.  Reconnects back off from 100 ms to 5 s.
 *
 * file:PATH: the file's directory is watched (rules_watch.c) and the file
 * stat()ed every rules_refresh_s as the backstop.
 *
 * Either way a text is taken only when it differs from the last one taken
 * (a 64-bit hash), so the timed pull of an unchanged snapshot costs a
 * read and nothing else; a text refused once is not counted or logged
 * again until the source holds something else.  A new set goes through
 * rules_take_json() with the source's rules: its version must be
 * greater than the one in force.  A snapshot from Redis must carry a
 * version; a file without one is numbered current + 1 when its text
 * changed.  With rules_file_save, every text taken is also written to
 * rules_file (atomically), the last good copy a limiter starts from when
 * the source cannot be read.
 *
 * Every tick also publishes the dry-run reports of the rules in mode
 * log (dryrun_report.c, contracts.md section 4) on the reading connection.
 *
 * Stopping: every wait of the thread is a poll() that includes an eventfd
 * rl_limiter_free() writes to; no wait is a blocking hiredis call
 * (rules_redis.c) but the dry-run report's pipeline on a plain server,
 * bounded by the socket timeout (io_ms, at most 1 s), so the thread ends
 * within milliseconds whatever the server does, or within io_ms while a
 * report is out.  The thread blocks every signal: SIGPIPE from a closed
 * socket becomes EPIPE, and the program's signals go to its own threads.
 *
 * Locks: none of the request path.  A swap takes the limiter's load lock
 * (shared with rl_rules_load_*) and waits for the old set's readers to
 * leave (rcu.h); the status takes its own short lock.
 */
#include "rules_source.h"
#include "limiter.h"
#include "options.h"
#include "dryrun_report.h"
#include "rules_file.h"
#include "rules_load.h"
#include "rules_redis.h"
#include "rules_watch.h"
#include "clock.h"
#include "error.h"
#include "hash.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define TICK_MS 5000           /* the periodic tick: PING, dry-run reports */
#define BACKOFF_MIN_MS 100     /* first wait before reconnecting           */
#define BACKOFF_MAX_MS 5000    /* longest wait between reconnects          */
#define IO_TIMEOUT_MAX_MS 1000 /* socket timeout of the contexts, at most  */
#define TEXT_SEED 0x72756c6573ULL /* hash seed for the texts seen          */
#define MSG_MAX RL_RULES_REFUSAL_MAX

enum { SRC_REDIS, SRC_FILE };
enum { HEALTH_UNKNOWN = -1, HEALTH_DOWN = 0, HEALTH_UP = 1 };

typedef struct rules_source {
    rl_limiter *lim;
    int kind;                      /* SRC_*                               */
    redis_uri uri;                 /* SRC_REDIS                           */
    SSL_CTX *tls;                  /* rediss://: from the tls_* options   */
    char key[RULES_KEY_MAX + 1];   /* snapshot key and channel            */
    char path[PATH_MAX];           /* SRC_FILE                            */
    char *save;                    /* rules_file to keep up to date, or NULL */
    char what[RULES_KEY_MAX + 320]; /* the source in messages: no secrets */
    int push;                      /* SUBSCRIBE (rules_push)              */
    int64_t refresh_ms, connect_ms, io_ms;
    int stop_fd;                   /* eventfd: rl_limiter_free() wakes us */
    _Atomic int stopping;
    pthread_t th;
    int started;

    pthread_mutex_t mu;            /* the start handshake                 */
    pthread_cond_t cv;
    int first_done, first_ok, go;
    char first_err[MSG_MAX];

    /* the thread's own from here on */
    uint64_t taken, refused;       /* hashes of the last texts taken / refused */
    int have_taken, have_refused;
    int health, empty;             /* HEALTH_*; the key held nothing       */
    int running;                   /* past the start handshake             */
    rr_conn *cmd, *sub;
    char id[DRYRUN_LIMITER_ID_MAX + 1]; /* this limiter in dry-run reports */
    int64_t backoff_ms, next_try_ms, next_pull_ms, next_tick_ms, ping_due_ms;
    rwatch watch;
} rules_source;

static int stopping(rules_source *s)
{
    return atomic_load(&s->stopping);
}

/* ---- health, takes and refusals -------------------------------------- */

static void went_up(rules_source *s)
{
    rules_source_seen(s->lim, 1, clock_wall_ms());
    if (s->health == HEALTH_DOWN)
        log_emit(s->lim->log_fn, s->lim->log_arg, RL_LOG_INFO,
                 "rules source %s answers again", s->what);
    s->health = HEALTH_UP;
}

/* The first failure before the limiter runs is reported by
 * rules_source_start(), in one message with what it starts from. */
static void went_down(rules_source *s, const char *why)
{
    rules_source_seen(s->lim, 0, 0);
    if (s->health == HEALTH_UP)
        log_emit(s->lim->log_fn, s->lim->log_arg, RL_LOG_WARN,
                 "rules source %s cannot be read (%s); version %lld stays "
                 "in force", s->what, why,
                 (long long)rl_rules_version(s->lim));
    s->health = HEALTH_DOWN;
}

static void keep_copy(rules_source *s, const char *buf, size_t len)
{
    char err[MSG_MAX];

    if (s->save && rules_file_save(s->save, buf, len, err, sizeof err) != 0)
        log_emit(s->lim->log_fn, s->lim->log_arg, RL_LOG_ERROR,
                 "cannot keep the last good copy of the rules: %s", err);
}

/* Take a text from the source.  RL_OK when the set in force is now the
 * text's (taken now or before), else an error with the reason in err. */
static int take(rules_source *s, const char *buf, size_t len, char *err,
                size_t errlen)
{
    swap_how how = {.origin = RL_RULES_FROM_SOURCE, .newer_only = 1,
                    .need_version = s->kind == SRC_REDIS, .log = 1,
                    .what = s->what};
    uint64_t h = hash_bytes(buf, len, TEXT_SEED);
    int rc;

    if (s->have_taken && h == s->taken) {
        /* unchanged; a set from the last good file is the source's too */
        rules_origin_confirm(s->lim, RL_RULES_FROM_LAST_GOOD,
                             RL_RULES_FROM_SOURCE);
        return RL_OK;
    }
    if (s->have_refused && h == s->refused)
        return snprintf(err, errlen, "refused before"), RL_ERULE;
    if ((rc = rules_take_json(s->lim, buf, len, &how, err, errlen)) != RL_OK) {
        s->refused = h;
        s->have_refused = 1;
        return rc;
    }
    s->taken = h;
    s->have_taken = 1;
    s->have_refused = 0;
    keep_copy(s, buf, len);
    return RL_OK;
}

/* A text refused by its size alone, named by `id` (it was not read). */
static void refuse_big(rules_source *s, size_t len, uint64_t id, char *err,
                       size_t errlen)
{
    swap_how how = {.origin = RL_RULES_FROM_SOURCE, .log = 1,
                    .what = s->what};

    snprintf(err, errlen, "%zu bytes, more than the %d MiB a rule set may "
             "have", len, RL_RULES_TEXT_MAX >> 20);
    if (s->have_refused && s->refused == id)
        return;
    s->refused = id;
    s->have_refused = 1;
    rules_refused(s->lim, &how, 0, err);
}

/* ---- Redis ------------------------------------------------------------ */

static int redis_connected(const rules_source *s)
{
    return s->cmd && (!s->push || s->sub);
}

/* Read the snapshot and take it.  0: the source answered (*held: the set
 * in force is now its set); -1: it could not be read (err). */
static int redis_read(rules_source *s, int64_t deadline, int *held,
                      char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = rr_read(s->cmd, s->key, s->stop_fd, deadline, &buf, &len, err,
                     errlen);

    *held = 0;
    if (rc == RR_ERROR || rc == RR_STOPPED)
        return -1;
    went_up(s);
    if (rc == RR_MISSING) {
        snprintf(err, errlen, "key %s holds no rule set", s->key);
        if (!s->empty && s->running)
            log_emit(s->lim->log_fn, s->lim->log_arg, RL_LOG_WARN,
                     "rules source %s: the key holds no rule set; version "
                     "%lld stays in force", s->what,
                     (long long)rl_rules_version(s->lim));
        s->empty = 1;
        return 0;
    }
    s->empty = 0;
    if (rc == RR_TOO_BIG)
        refuse_big(s, len, hash_mix(len, TEXT_SEED), err, errlen);
    else
        *held = take(s, buf, len, err, errlen) == RL_OK;
    free(buf);
    return 0;
}

static void redis_lost(rules_source *s, const char *why)
{
    rr_close(s->cmd);
    rr_close(s->sub);
    s->cmd = s->sub = NULL;
    s->ping_due_ms = 0;
    went_down(s, why);
    s->next_try_ms = clock_mono_ms() + s->backoff_ms;
    s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                       : s->backoff_ms * 2;
}

static void redis_pull(rules_source *s)
{
    char err[MSG_MAX];
    int64_t now = clock_mono_ms();
    int held;

    s->next_pull_ms = now + s->refresh_ms;
    if (redis_read(s, now + s->connect_ms, &held, err, sizeof err) != 0 &&
        !stopping(s))
        redis_lost(s, err);
}

/* Open what is missing (the reading connection; the subscribed one),
 * then look at the key at once: pushes were missed while away. */
static void redis_connect(rules_source *s)
{
    char err[MSG_MAX];
    int64_t deadline = clock_mono_ms() + s->connect_ms;
    int rc = RR_OK;

    if (!s->cmd)
        s->cmd = rr_connect(&s->uri, s->tls, s->stop_fd, deadline, s->io_ms, &rc,
                            err, sizeof err);
    if (s->cmd && s->push && !s->sub) {
        s->sub = rr_connect(&s->uri, s->tls, s->stop_fd, deadline, s->io_ms, &rc,
                            err, sizeof err);
        if (s->sub && (rc = rr_subscribe(s->sub, s->key, s->stop_fd,
                                         deadline, err, sizeof err)) != RR_OK) {
            rr_close(s->sub);
            s->sub = NULL;
        }
    }
    if (rc == RR_STOPPED)
        return;
    if (!redis_connected(s)) {
        redis_lost(s, err);
        return;
    }
    s->backoff_ms = BACKOFF_MIN_MS;
    redis_pull(s);
}

/* dryrun_publish_via()'s replies over TLS. */
static int report_replies(void *arg, int cmds, char *why, size_t len)
{
    rules_source *s = arg;

    return rr_replies(s->cmd, cmds, s->stop_fd, clock_mono_ms() + s->io_ms,
                      why, len) == RR_OK ? RL_OK : RL_ESTORE;
}

static void redis_tick(rules_source *s)
{
    char err[MSG_MAX];
    int64_t now = clock_mono_ms();

    s->next_tick_ms = now + TICK_MS;
    if (s->sub && !s->ping_due_ms) {
        if (rr_ping(s->sub, s->stop_fd, now + s->io_ms, err, sizeof err) !=
            RR_OK)
            redis_lost(s, err);
        else
            s->ping_due_ms = now + s->connect_ms;
    }
    /* The dry-run reports of the rules in mode log, on the reading
     * connection (plain: a blocking pipeline under its socket timeout,
     * io_ms, the one wait of this thread that the stop eventfd cannot
     * cut; TLS: rr_replies(), which it can). */
    if (s->cmd && (s->cmd->ssl ? dryrun_publish_via(s->lim, s->cmd->c, s->id,
                                                    report_replies, s)
                               : dryrun_publish(s->lim, s->cmd->c, s->id)) ==
                      RL_ESTORE)
        redis_lost(s, "dry-run report: the connection failed");
}

/* Sleep until the next thing to do, a push, or stop. */
static void redis_wait(rules_source *s)
{
    struct pollfd p[2] = {{.fd = s->stop_fd, .events = POLLIN},
                          {.fd = s->sub ? rr_fd(s->sub) : -1,
                           .events = POLLIN}};
    int64_t until = s->next_tick_ms, now = clock_mono_ms();
    char err[MSG_MAX];
    int messages = 0, pongs = 0;

    if (redis_connected(s) && s->next_pull_ms < until)
        until = s->next_pull_ms;
    if (!redis_connected(s) && s->next_try_ms < until)
        until = s->next_try_ms;
    if (s->ping_due_ms && s->ping_due_ms < until)
        until = s->ping_due_ms;
    if (poll(p, 2, until > now ? (int)(until - now) : 0) <= 0 ||
        p[0].revents || !p[1].revents)
        return;
    if (rr_drain(s->sub, &messages, &pongs, err, sizeof err) != RR_OK) {
        redis_lost(s, err);
        return;
    }
    if (pongs)
        s->ping_due_ms = 0;
    if (messages)
        redis_pull(s);
}

static void redis_loop(rules_source *s)
{
    int64_t now = clock_mono_ms();

    s->next_tick_ms = now + TICK_MS;
    s->next_pull_ms = now + s->refresh_ms;
    s->next_try_ms = now;
    s->backoff_ms = BACKOFF_MIN_MS;
    while (!stopping(s)) {
        now = clock_mono_ms();
        if (!redis_connected(s) && now >= s->next_try_ms)
            redis_connect(s);
        else if (redis_connected(s) && now >= s->next_pull_ms)
            redis_pull(s);
        if (s->ping_due_ms && clock_mono_ms() >= s->ping_due_ms)
            redis_lost(s, "subscription: no answer to PING in time");
        if (clock_mono_ms() >= s->next_tick_ms)
            redis_tick(s);
        if (!stopping(s))
            redis_wait(s);
    }
}

/* The read rules_source_start() waits for: 1 if the limiter now runs the
 * source's set, else 0 with the reason in err. */
static int redis_first(rules_source *s, char *err, size_t errlen)
{
    int64_t deadline = clock_mono_ms() + s->connect_ms;
    int rc, held = 0;

    s->cmd = rr_connect(&s->uri, s->tls, s->stop_fd, deadline, s->io_ms, &rc, err,
                        errlen);
    if (s->cmd && redis_read(s, deadline, &held, err, errlen) != 0) {
        rr_close(s->cmd);
        s->cmd = NULL;
    }
    if (!s->cmd)
        went_down(s, err);
    return held;
}

/* ---- file: ------------------------------------------------------------ */

/* Look at the file; read it when `force` or when it changed.  1 if the
 * set in force is the file's, else 0 with the reason in err. */
static int file_check(rules_source *s, int force, char *err, size_t errlen)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    int too_big, held;

    if (stat(s->path, &st) != 0) {
        snprintf(err, errlen, "%.200s: %s", s->path, strerror(errno));
        went_down(s, err);
        return 0;
    }
    if (!rwatch_changed(&s->watch, &st) && !force && s->health == HEALTH_UP) {
        went_up(s);
        return 1;
    }
    if (rules_file_read(s->path, &buf, &len, &st, &too_big, err, errlen)) {
        if (!too_big) {
            went_down(s, err);
            return 0;
        }
        went_up(s);
        refuse_big(s, (size_t)st.st_size,
                   hash_mix((uint64_t)st.st_size,
                            (uint64_t)st.st_mtim.tv_nsec), err, errlen);
        return 0;
    }
    rwatch_changed(&s->watch, &st);
    went_up(s);
    held = take(s, buf, len, err, errlen) == RL_OK;
    free(buf);
    return held;
}

static void file_loop(rules_source *s)
{
    char err[MSG_MAX];

    s->next_pull_ms = clock_mono_ms() + s->refresh_ms;
    while (!stopping(s)) {
        struct pollfd p[2] = {{.fd = s->stop_fd, .events = POLLIN},
                              {.fd = s->watch.fd, .events = POLLIN}};
        int64_t now = clock_mono_ms();

        if (now >= s->next_pull_ms) {
            s->next_pull_ms = now + s->refresh_ms;
            file_check(s, 0, err, sizeof err);
            continue;
        }
        if (poll(p, 2, (int)(s->next_pull_ms - now)) > 0 && !p[0].revents &&
            p[1].revents && rwatch_events(&s->watch))
            file_check(s, 1, err, sizeof err);
    }
}

/* ---- the thread ------------------------------------------------------- */

static void *source_main(void *arg)
{
    rules_source *s = arg;
    char err[MSG_MAX] = "";
    int ok = s->kind == SRC_REDIS ? redis_first(s, err, sizeof err)
                                  : file_check(s, 1, err, sizeof err);

    pthread_mutex_lock(&s->mu);
    s->first_done = 1;
    s->first_ok = ok;
    memcpy(s->first_err, err, sizeof s->first_err);
    pthread_cond_broadcast(&s->cv);
    while (!s->go && !stopping(s))
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    s->running = 1;
    if (s->kind == SRC_REDIS)
        redis_loop(s);
    else
        file_loop(s);
    rr_close(s->cmd);
    rr_close(s->sub);
    s->cmd = s->sub = NULL;
    return NULL;
}

/* Every signal blocked in the thread (it inherits the mask it is
 * created with). */
static int spawn(rules_source *s)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&s->th, NULL, source_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    s->started = rc == 0;
    return rc;
}

/* ---- start and stop --------------------------------------------------- */

/* rediss://: the client context of the tls_* options, as the store's
 * (verification on unless tls_verify=0).  RL_OK or RL_EOPTION. */
static int tls_context(rules_source *s, const struct rl_config *cfg)
{
    rtls_opts o = {.ca_file = cfg->tls_ca_file, .ca_dir = cfg->tls_ca_dir,
                   .cert_file = cfg->tls_cert_file,
                   .key_file = cfg->tls_key_file,
                   .verify = (int)cfg->tls_verify};
    char why[256];

    if (!(s->tls = rtls_ctx_new(&o, why, sizeof why)))
        return rl_fail(NULL, RL_EOPTION, "rules_source: %s", why);
    return RL_OK;
}

/* What cfg->rules_source names, into s.  RL_OK or RL_EOPTION. */
static int resolve(rules_source *s, const struct rl_config *cfg)
{
    const char *src = cfg->rules_source, *uri = src;
    char why[200], name[300];

    if (strncmp(src, "file:", 5) == 0) {
        s->kind = SRC_FILE;
        if (strlen(src + 5) >= sizeof s->path)
            return rl_fail(NULL, RL_EOPTION, "rules_source: path too long");
        snprintf(s->path, sizeof s->path, "%s", src + 5);
        snprintf(s->what, sizeof s->what, "file %.300s", s->path);
        return RL_OK;
    }
    if (strcmp(src, "store") == 0) {
        uri = cfg->store ? cfg->store : "memory://";
        if (strncmp(uri, "redis://", 8) && strncmp(uri, "rediss://", 9) &&
            strncmp(uri, "unix://", 7)) {
            char shown[128];
            redis_uri_redact(uri, shown, sizeof shown);
            return rl_fail(NULL, RL_EOPTION, "rules_source: \"store\" needs "
                           "a redis://, rediss:// or unix:// store, not "
                           "\"%s\"", shown);
        }
    }
    if (redis_uri_parse(uri, &s->uri, why, sizeof why) != 0)
        return rl_fail(NULL, RL_EOPTION, "rules_source: %s", why);
    if (s->uri.tls && tls_context(s, cfg) != RL_OK)
        return RL_EOPTION;
    s->kind = SRC_REDIS;
    snprintf(s->key, sizeof s->key, "%s",
             cfg->rules_key ? cfg->rules_key : RULES_KEY_DEFAULT);
    rr_name(&s->uri, name, sizeof name);
    snprintf(s->what, sizeof s->what, "redis %s key %s", name, s->key);
    return RL_OK;
}

static rules_source *source_new(rl_limiter *lim, const struct rl_config *cfg)
{
    rules_source *s = calloc(1, sizeof *s);

    if (!s)
        return NULL;
    s->lim = lim;
    s->stop_fd = -1;
    s->watch.fd = -1;
    s->health = HEALTH_UNKNOWN;
    s->push = (int)cfg->rules_push;
    s->refresh_ms = cfg->rules_refresh_s * 1000;
    s->connect_ms = cfg->connect_timeout_ms;
    s->io_ms = s->connect_ms < IO_TIMEOUT_MAX_MS ? s->connect_ms
                                                 : IO_TIMEOUT_MAX_MS;
    dryrun_limiter_id(s->id, sizeof s->id);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if ((cfg->rules_file_save && cfg->rules_file &&
         !(s->save = strdup(cfg->rules_file))) ||
        (s->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
        free(s->save);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return NULL;
    }
    return s;
}

/* The source could not be read at start: the last good file, or (with
 * degraded_start) no rules, or fail.  The thread waits meanwhile. */
static int start_without(rl_limiter *lim, rules_source *s,
                         const struct rl_config *cfg)
{
    swap_how how = {.origin = RL_RULES_FROM_LAST_GOOD, .log = 1,
                    .what = cfg->rules_file};
    char err[MSG_MAX] = "", *buf = NULL;
    size_t len = 0;
    int rc = RL_EIO;

    if (cfg->rules_file &&
        (rc = rules_file_read(cfg->rules_file, &buf, &len, NULL, NULL, err,
                              sizeof err)) == RL_OK &&
        (rc = rules_take_json(lim, buf, len, &how, err, sizeof err)) ==
            RL_OK) {
        s->taken = hash_bytes(buf, len, TEXT_SEED);
        s->have_taken = 1;
        log_emit(lim->log_fn, lim->log_arg, RL_LOG_WARN,
                 "rules source %s cannot be read (%s): starting from the "
                 "last good copy %s, version %lld", s->what, s->first_err,
                 cfg->rules_file, (long long)rl_rules_version(lim));
    }
    free(buf);
    if (rc == RL_OK)
        return RL_OK;
    if (cfg->degraded_start) {
        log_emit(lim->log_fn, lim->log_arg, RL_LOG_WARN,
                 "rules source %s cannot be read (%s)%s%s: starting with no "
                 "rules (degraded_start) until it answers", s->what,
                 s->first_err, cfg->rules_file ? "; rules_file: " : "", err);
        return RL_OK;
    }
    return rl_fail(NULL, RL_ESTORE, "rules_source %.120s: %.120s; %s%.120s",
                   s->what, s->first_err,
                   cfg->rules_file ? "rules_file: "
                                   : "no rules_file to start from (or set "
                                     "degraded_start=1)",
                   cfg->rules_file ? err : "");
}

int rules_source_start(rl_limiter *lim, const struct rl_config *cfg)
{
    rules_source *s;
    char err[MSG_MAX];
    int rc;

    if (cfg->rules)
        return rl_fail(NULL, RL_EOPTION, "rules and rules_source: choose "
                       "one (rules_file gives a source a starting copy)");
    if (!(s = source_new(lim, cfg)))
        return rl_fail(NULL, RL_ENOMEM, "starting the rules source");
    lim->source = s;
    if ((rc = resolve(s, cfg)) != RL_OK)
        return rc;
    if (s->kind == SRC_FILE && rwatch_open(&s->watch, s->path, err,
                                           sizeof err) != 0)
        log_emit(lim->log_fn, lim->log_arg, RL_LOG_WARN,
                 "rules source %s: %s; changes are seen by a stat() every "
                 "%lld s only", s->what, err, (long long)cfg->rules_refresh_s);
    if (spawn(s) != 0)
        return rl_fail(NULL, RL_ENOMEM, "starting the rules source: no "
                       "thread");
    pthread_mutex_lock(&s->mu);
    while (!s->first_done)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    rc = s->first_ok ? RL_OK : start_without(lim, s, cfg);
    pthread_mutex_lock(&s->mu);
    s->go = rc == RL_OK;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void rules_source_stop(rl_limiter *lim)
{
    rules_source *s = lim->source;
    uint64_t one = 1;

    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stopping, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->stop_fd >= 0 && write(s->stop_fd, &one, sizeof one) < 0) {
        /* cannot fail on an eventfd below its maximum */
    }
    if (s->started)
        pthread_join(s->th, NULL);
    rwatch_close(&s->watch);
    if (s->stop_fd >= 0)
        close(s->stop_fd);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    SSL_CTX_free(s->tls);
    free(s->save);
    free(s);
    lim->source = NULL;
}
