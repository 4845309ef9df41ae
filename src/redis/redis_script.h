/*
 * redis_script.h -- the script call of the Redis stores: a batch of
 * requests encoded as one call of lua/check.lua, and its answer read
 * back.  Pure functions of their arguments (no I/O, no locks): the I/O
 * loop (redis_io.c) calls them for each connection turn.
 */
#ifndef RL_REDIS_SCRIPT_H
#define RL_REDIS_SCRIPT_H

#include <hiredis/hiredis.h>

#include "clock.h"
#include "redis_io.h"
#include "resp.h"

typedef struct script_ctx {
    const char *script;          /* the text, for EVAL                   */
    size_t script_len;
    char sha[41];                /* its SHA-1, for EVALSHA               */
    char fn[44];                 /* the library's function, for FCALL:
                                    "rl_" and the library's SHA-1       */
    char lean[48];               /* its lean function (lua/lean.lua):
                                    fn and "_l"                         */
    int compact;                 /* the compact layout (redis_key.h)     */
    const rl_clock *clock;       /* tests: the time passed to the script */
    const char *lean_tail;       /* after each lean argument: "" (NULL
                                    too), or ":1" where no limiter before
                                    1.1.0 shares the keys (option
                                    redis_oldest_limiter, lua/lean.lua) */
} script_ctx;

/* How a call names the script: by its SHA-1, by its text, or as the
 * function library's function (the same arguments). */
enum { SCRIPT_EVALSHA, SCRIPT_EVAL, SCRIPT_FCALL };

/* x's names: sha from the script's text, fn from the library's (NULL:
 * none, fn left empty). */
void script_ctx_names(script_ctx *x, const char *library, size_t len);

/*
 * One script call over jobs[0..nb), appended to b.  Mode 'c' decides and
 * charges with every key declared; 'C' too, with the keys undeclared (a
 * cluster batch over many slots); 'r' gives back what each job's ops
 * charged (out[i].allowed && out[i].changed) at its now_ms.  how: a
 * SCRIPT_* above (SCRIPT_FCALL only when x->fn is set).  A lone request
 * of one charge that the lean path serves (mode 'c', FCALL, the plain
 * layout, no lease, no sliding log, no replaced shape in force) goes as
 * an FCALL of x->lean instead: one key, one argument (lua/lean.lua); a
 * batch of such requests, as an FCALL of x->fn and "_b": their keys,
 * then an argument each.
 */
void script_put(const script_ctx *x, resp_buf *b, rio_job *const *jobs,
                int nb, char mode, int how);

/* A rule's numbers as the script reads them from its table: algorithm,
 * limit, burst, window ms, p, q (check.lua's and settle.lua's layout). */
void script_put_numbers(resp_buf *b, const algo_params *ap);

/* 1 when r's replaced shape s goes with a check at `now` (its states may
 * still be alive; compact: kept in the current shape's layout). */
int script_shape_sent(const script_ctx *x, const rl_rule *r,
                      const rule_shape *s, int64_t now);

/* ASKING, before the call a migration redirected. */
void script_put_asking(resp_buf *b);

/* An error reply's meaning (RN_MOVED, RN_ASK, RN_TRYAGAIN, RN_DOWN,
 * RN_REPLICA, else RN_ERROR); the address of a redirect into why->addr.
 * -1: NOSCRIPT, or no such function.  Also ratelimit.so's (its keys are
 * declared, so Redis answers its redirects alike). */
int script_classify(const redisReply *rep, rnode_reply *why);

/*
 * Read one call's answer for the requests it carried: slot j had n[j]
 * ops and is jobs[j], or NULL if that job left (its deadline passed).  A
 * job's rc, now_ms, out[] and why are filled.  Returns 1 for NOSCRIPT
 * or, for an FCALL, a function the server does not have (FUNCTION FLUSH,
 * a fresh replica promoted) (nothing filled), 0 otherwise (an error reply: every job's why says
 * which).
 */
int script_parse(const redisReply *rep, rio_job *const *jobs,
                 const size_t *n, int nb);

#endif
