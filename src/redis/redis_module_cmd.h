/*
 * redis_module_cmd.h -- checks as ratelimit.so's native command RL.CHECK
 * (redis-module/, ratelimit.so(8)) instead of the Lua library, on a
 * server that has the module: detected per connection at connect
 * (COMMAND INFO, so again after every reconnect or failover), one
 * RL.CHECK for a batch of requests (REQS), its reply read into the
 * requests' decisions; refunds and settles as RL.SETTLE.  The option redis_command
 * forces either way.  The states are the same either way, so connections
 * and limiters may mix them.
 */
#ifndef RL_REDIS_MODULE_CMD_H
#define RL_REDIS_MODULE_CMD_H

#include <hiredis/hiredis.h>

#include "redis_io.h"
#include "redis_link.h"
#include "redis_script.h"
#include "resp.h"

/* The option redis_command (options.c's order). */
enum { RCMD_AUTO, RCMD_MODULE, RCMD_LUA };

/* What a connection's server offers (the connector's `fcall` bits): the
 * function library, and RL.CHECK where redis_command lets it be used. */
#define RCONN_LIBRARY 1
#define RCONN_MODULE 2

/* A batch's `how` beside redis_script.h's SCRIPT_*: RL.CHECKs. */
#define SCRIPT_MODULE 16

/* At connect: RCONN_MODULE when the server has RL.CHECK and o->command
 * is not RCMD_LUA, else 0; -1 with why in err when RCMD_MODULE asks for
 * it and the server has none (the connect fails), or no answer. */
int rcmd_detect(const rio_opts *o, rlink *l, char *err, size_t errlen);

/* 1 when every request of the batch can go as RL.CHECK: at most one
 * reply per request fits an entry, and each request has 1..64 keys (a
 * rule's replaced shapes go with it: RL.CHECK converts as the script). */
int rcmd_batch_ok(rio_job *const *jobs, int nb);

/* The batch as one RL.CHECK into b: every request's keys declared, each
 * request all or nothing on its own (REQS, when more than one). */
void rcmd_put(const script_ctx *x, resp_buf *b, rio_job *const *jobs,
              int nb);

/* Undo what j's RL.CHECK-or-script charged (the script's mode "r", as
 * script_put(.., 'r', ..) writes it): RL.SETTLE r into b. */
void rcmd_put_refund(const script_ctx *x, resp_buf *b, const rio_job *j);

/* One op's values of an RL.SETTLE (cost units, charged at `at` ms; field
 * flen bytes, 0: the plain layout), and the test clock's trailing NOW ms
 * (nothing when test_now is 0). */
void rcmd_put_settle_op(resp_buf *b, const store_op *op, int64_t cost,
                        int64_t at, const char *field, size_t flen);
void rcmd_put_now(resp_buf *b, int64_t test_now);

/* 1 when rep says the server has no such command or refuses it to this
 * user (unloaded; an ACL without +rl.check or +rl.settle). */
int rcmd_refused(const redisReply *rep);

/* The batch's answers from its RL.CHECK reply: jobs[j] (NULL: its caller
 * left; n[j] its keys) each filled: 0, or 1 when the server has no such
 * command or refuses it (unloaded, an ACL without +rl.check): the batch
 * goes again through Lua and the connection uses Lua until it connects
 * again. */
int rcmd_parse(const redisReply *rep, rio_job *const *jobs, const size_t *n,
               int nb);

#endif
