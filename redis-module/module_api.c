/*
 * module_api.c -- the module API's function pointers (module_api.h) and
 * their lookup at load: what redismodule.h's RedisModule_Init does, for
 * the functions ratelimit.so uses only.
 */
#include "module_api.h"

#define RL_MODULE_DEFINE(ret, name, args) ret (*RedisModule_##name) args;
RL_MODULE_FUNCS(RL_MODULE_DEFINE)
#undef RL_MODULE_DEFINE

int rl_module_api(RedisModuleCtx *ctx, const char *name, int ver)
{
    /* The server's lookup, the first pointer of the context it hands
     * RedisModule_OnLoad (the reference's RedisModule_Init reads it so). */
    int (*get_api)(const char *, void *);
    void *first = ((void **)ctx)[0];
    int ok = 1;

    *(void **)&get_api = first;
#define RL_MODULE_LOOKUP(ret, name, args) \
    ok &= get_api("RedisModule_" #name, (void *)&RedisModule_##name) == \
          REDISMODULE_OK;
    RL_MODULE_FUNCS(RL_MODULE_LOOKUP)
#undef RL_MODULE_LOOKUP
    if (!ok || RedisModule_IsModuleNameBusy(name))
        return REDISMODULE_ERR;
    RedisModule_SetModuleAttribs(ctx, name, ver, REDISMODULE_APIVER_1);
    return REDISMODULE_OK;
}
