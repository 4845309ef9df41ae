/*
 * acl_rules.h -- the Redis ACL users the documentation tells an operator
 * to create (docs/REDIS.md, "Least privilege (ACLs)"; ratelimit(3); ratelimitd(8)),
 * read from the documents themselves, so that the suites running as those
 * users (check_acl.c, check_control.c) run as exactly what is written
 * there, and a document that drifts from the others fails a test.
 * Header-only (static inline), for the Check suites.
 */
#ifndef RL_ACL_RULES_H
#define RL_ACL_RULES_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis_harness.h"

#define ACL_TOKENS_MAX 64
#define ACL_TOKEN_LEN 64

typedef struct acl_rule {
    int n;
    char tok[ACL_TOKENS_MAX][ACL_TOKEN_LEN]; /* "ACL", "SETUSER", user, ... */
} acl_rule;

/* A file of the source tree ($top_srcdir, else the current directory). */
static inline FILE *acl_open_doc(const char *rel)
{
    const char *top = getenv("top_srcdir");
    char path[1024];

    snprintf(path, sizeof path, "%s/%s", top && top[0] ? top : ".", rel);
    return fopen(path, "r");
}

/* Drop the roff escapes a man page's literal display needs. */
static inline void acl_unroff(char *s)
{
    char *o = s;

    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] == '&') {
            p++;
            continue;
        }
        if (p[0] == '\\' && p[1] == 'e') {
            *o++ = '\\';
            p++;
            continue;
        }
        *o++ = *p;
    }
    *o = 0;
}

/*
 * The rule "ACL SETUSER <user> ..." as `doc` (a path under the source
 * tree) gives it: from the line holding it, joined with the lines that
 * follow up to a blank one, one starting with '.' (roff) or a code fence.
 * The test fails if the document has no such rule.
 */
static inline void acl_rule_from(const char *doc, const char *user,
                                 acl_rule *r)
{
    FILE *f = acl_open_doc(doc);
    char line[1024], text[4096] = "", head[96];
    int in = 0;

    ck_assert_msg(f != NULL, "cannot open %s (set top_srcdir)", doc);
    snprintf(head, sizeof head, "ACL SETUSER %s ", user);
    while (fgets(line, sizeof line, f)) {
        char *start = strstr(line, head);
        if (!in && !start)
            continue;
        if (in && (line[0] == '\n' || line[0] == '.' ||
                   strncmp(line, "```", 3) == 0))
            break;
        in = 1;
        line[strcspn(line, "\n")] = 0;
        acl_unroff(line);
        ck_assert_int_lt(strlen(text) + strlen(line) + 2, sizeof text);
        strcat(text, " ");
        strcat(text, start ? start : line);
    }
    fclose(f);
    ck_assert_msg(in, "%s gives no \"%s\"", doc, head);
    r->n = 0;
    for (char *t = strtok(text, " \t"); t; t = strtok(NULL, " \t")) {
        ck_assert_int_lt(r->n, ACL_TOKENS_MAX);
        ck_assert_int_lt(strlen(t), ACL_TOKEN_LEN);
        strcpy(r->tok[r->n++], t);
    }
}

/* Two documents give the same rule, token for token. */
static inline void acl_rules_agree(const acl_rule *a, const acl_rule *b,
                                   const char *what)
{
    ck_assert_msg(a->n == b->n, "%s: %d tokens against %d", what, a->n,
                  b->n);
    for (int i = 0; i < a->n; i++)
        ck_assert_msg(strcmp(a->tok[i], b->tok[i]) == 0,
                      "%s: token %d: \"%s\" against \"%s\"", what, i,
                      a->tok[i], b->tok[i]);
}

/*
 * Create `user` on server s as docs/REDIS.md says, with `password` in place
 * of the placeholder (the token starting with '>'), through the harness's
 * own connection (the default user).
 */
static inline void acl_create(const rh_server *s, const char *user,
                              const char *password)
{
    acl_rule r;
    const char *argv[ACL_TOKENS_MAX];
    char pw[ACL_TOKEN_LEN + 2];
    redisContext *c = rh_connect(s);
    redisReply *reply;
    int pwset = 0;

    acl_rule_from("docs/REDIS.md", user, &r);
    snprintf(pw, sizeof pw, ">%s", password);
    for (int i = 0; i < r.n; i++) {
        argv[i] = r.tok[i];
        if (r.tok[i][0] == '>') {
            argv[i] = pw;
            pwset++;
        }
    }
    ck_assert_int_eq(pwset, 1);
    ck_assert_ptr_nonnull(c);
    reply = redisCommandArgv(c, r.n, argv, NULL);
    ck_assert_msg(reply && reply->type == REDIS_REPLY_STATUS,
                  "ACL SETUSER %s: %s", user,
                  reply && reply->str ? reply->str : c->errstr);
    freeReplyObject(reply);
    redisFree(c);
}

#endif
