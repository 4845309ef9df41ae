/*
 * rlctl.h -- what the files of rlctl, the operator's command line, share:
 * the exit codes scripts test, the global options, and the one HTTP call
 * every command makes to ratelimitd (http.c).
 *
 * Exit codes: 0 done, 1 refused (the service said no, or a checked key
 * was denied), 2 usage (bad flags or a bad local file), 3 unreachable (no
 * answer, a timeout, or the service failed: 5xx).
 */
#ifndef RLCTL_H
#define RLCTL_H

#include <stdio.h>

#include <stddef.h>

enum { RLCTL_DONE = 0, RLCTL_REFUSED = 1, RLCTL_USAGE = 2,
       RLCTL_UNREACHABLE = 3 };

#define RLCTL_DEFAULT_SERVER "http://127.0.0.1:8089"
#define RLCTL_TOKEN_MAX 512

/* The options every command shares. */
typedef struct rlctl_opts {
    const char *server;     /* base URL of ratelimitd                     */
    char token[RLCTL_TOKEN_MAX]; /* bearer token, "" for none             */
    long timeout_ms;        /* whole request, connect included            */
    int json;               /* print what the service answered, as is     */
} rlctl_opts;

/* One answer of the service. */
typedef struct rlctl_reply {
    long status;            /* HTTP status; 0 when nothing came back      */
    char etag[64];          /* the ETag header, quotes included, or ""    */
    char *body;             /* NUL-terminated, malloc'd; free it          */
    size_t len;
    char error[256];        /* why status is 0                            */
} rlctl_reply;

/* method ("GET", "PUT", "DELETE") on path ("/v1/rules/x") with an
 * optional JSON body and an optional If-Match / If-None-Match value.
 * Returns RLCTL_DONE when an answer came (any status), else
 * RLCTL_UNREACHABLE with the reason in r->error. */
int rlctl_http(const rlctl_opts *o, const char *method, const char *path,
               const char *body, const char *if_match,
               const char *if_none_match, rlctl_reply *r);
void rlctl_reply_free(rlctl_reply *r);

/* rlctl_http() then rlctl_status_exit(): the exit code; *r is set (and
 * must be freed) whatever the outcome. */
int rlctl_request(const rlctl_opts *o, const char *method, const char *path,
                  const char *body, const char *if_match,
                  const char *if_none_match, const char *what,
                  rlctl_reply *r);

/* An If-Match value: a bare version ("7") gets the ETag's quotes; "*" and
 * quoted values pass as they are; NULL stays NULL. */
const char *rlctl_etag(const char *v, char *buf, size_t len);

/* The exit code for an answer, after saying in plain words on stderr what
 * went wrong when it is not a 2xx or a 304. */
int rlctl_status_exit(const rlctl_reply *r, const char *what);

/* Print s (a string from the service, or read out of its JSON) with its
 * control bytes made '?'.  s may be NULL: nothing. */
void rlctl_put_clean(FILE *f, const char *s);

/* Read the bearer token: the first line of a file, trailing blanks
 * stripped.  0, or -1 with a message on stderr. */
int rlctl_read_token(const char *path, char *out, size_t len);

/* The commands: argv[0] is the command's name, getopt-style flags follow.
 * Each returns an exit code. */
int rlctl_cmd_put(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_get(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_delete(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_list(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_history(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_mode(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_watch(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_check(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_dryrun(const rlctl_opts *o, int argc, char **argv);
int rlctl_cmd_events(const rlctl_opts *o, int argc, char **argv);

#endif
