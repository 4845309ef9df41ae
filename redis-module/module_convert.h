/*
 * module_convert.h -- a rule's replaced shapes in RL.CHECK (see
 * module_convert.c): their part of the arguments, the lookup and
 * conversion of a client's state under them, and the old state's removal
 * once the converted one is written.
 */
#ifndef RL_MODULE_CONVERT_H
#define RL_MODULE_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "algo.h"
#include "module_api.h"

#define MC_MAX 8 /* replaced shapes of one rule (rule.h's RULE_PREV_MAX) */

/* One key's replaced shapes, newest first, as sent:
 *   SHAPES i shape n  then n x (algo limit burst window_ms name since_ms)
 * (i: the key's index from 0; shape: the current shape's name, the end of
 * the key's name). */
typedef struct mc_old {
    int n;
    size_t curlen;                 /* the current shape name's length */
    algo_params ap[MC_MAX];
    RedisModuleString *name[MC_MAX];
    int64_t since[MC_MAX];         /* replaced at (ms)                */
    int from;                      /* mc_migrate: the shape converted
                                      from, -1: none                  */
    RedisModuleString *key;        /* its name (the caller frees:
                                      mc_free)                        */
} mc_old;

/* The SHAPES section at argv[at] into *o: the index after it, or -1 with
 * the error to answer in *err. */
int mc_parse(mc_old *o, RedisModuleString **argv, int argc, int at,
             const char **err);

/* The state of a client that has none under key (its rule `to`): its
 * newest state under an old shape, converted; else a bucket's least
 * level; else fresh.  o->from says which old shape's state is to go. */
int mc_migrate(RedisModuleCtx *ctx, RedisModuleString *key,
               RedisModuleString *field, const algo_params *to,
               mc_old *o, int64_t now, algo_state *st);

/* Delete the old state mc_migrate took (o->from >= 0): the plain key, or
 * the field in the old base's hashes of now's epoch and the one before. */
void mc_drop(RedisModuleCtx *ctx, const mc_old *o, RedisModuleString *field,
             int64_t now);

void mc_free(RedisModuleCtx *ctx, mc_old *o);

#endif
