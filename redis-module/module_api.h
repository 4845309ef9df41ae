/*
 * module_api.h -- the part of the Redis module API that ratelimit.so uses,
 * declared here because Debian ships no redismodule.h.  Each function is a
 * pointer filled at load by name through RedisModule_GetApi, as the
 * reference's RedisModule_Init does: the server puts its GetApi function
 * first in the context it hands RedisModule_OnLoad, and GetApi("RedisModule_
 * <name>", &pointer) fills a pointer or answers REDISMODULE_ERR for a name
 * the server lacks (Redis module API reference, "Modules API reference",
 * RedisModule_OnLoad and RedisModule_Init; src/redismodule.h of Redis 7.0).
 * The constants below are that header's values, which are part of the
 * module ABI.  Every function listed exists in Redis 7.0.
 */
#ifndef RL_MODULE_API_H
#define RL_MODULE_API_H

#include <stddef.h>
#include <stdint.h>

#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1
#define REDISMODULE_APIVER_1 1

#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_STRING 1
#define REDISMODULE_KEYTYPE_HASH 3

#define REDISMODULE_NO_EXPIRE -1
#define REDISMODULE_HASH_NONE 0
#define REDISMODULE_HASH_DELETE ((RedisModuleString *)(long)1)
#define REDISMODULE_ERRORMSG_WRONGTYPE \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

typedef long long mstime_t;
typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx,
                                  RedisModuleString **argv, int argc);

/* The pointers: defined once (module_api.c), filled by rl_module_api(). */
#define RL_MODULE_FUNCS(X)                                                   \
    X(int, CreateCommand, (RedisModuleCtx *, const char *,                   \
                           RedisModuleCmdFunc, const char *, int, int, int)) \
    X(void, SetModuleAttribs, (RedisModuleCtx *, const char *, int, int))    \
    X(int, IsModuleNameBusy, (const char *))                                 \
    X(int, WrongArity, (RedisModuleCtx *))                                   \
    X(int, ReplyWithLongLong, (RedisModuleCtx *, long long))                 \
    X(int, ReplyWithError, (RedisModuleCtx *, const char *))                 \
    X(int, ReplyWithArray, (RedisModuleCtx *, long))                         \
    X(int, ReplyWithStringBuffer, (RedisModuleCtx *, const char *, size_t))  \
    X(RedisModuleKey *, OpenKey, (RedisModuleCtx *, RedisModuleString *,     \
                                  int))                                      \
    X(void, CloseKey, (RedisModuleKey *))                                    \
    X(int, KeyType, (RedisModuleKey *))                                      \
    X(int, DeleteKey, (RedisModuleKey *))                                    \
    X(char *, StringDMA, (RedisModuleKey *, size_t *, int))                  \
    X(int, StringTruncate, (RedisModuleKey *, size_t))                       \
    X(mstime_t, GetAbsExpire, (RedisModuleKey *))                            \
    X(int, SetAbsExpire, (RedisModuleKey *, mstime_t))                       \
    X(int, HashSet, (RedisModuleKey *, int, ...))                            \
    X(int, HashGet, (RedisModuleKey *, int, ...))                            \
    X(RedisModuleString *, CreateString, (RedisModuleCtx *, const char *,    \
                                          size_t))                           \
    X(void, FreeString, (RedisModuleCtx *, RedisModuleString *))             \
    X(const char *, StringPtrLen, (const RedisModuleString *, size_t *))     \
    X(int, StringToLongLong, (const RedisModuleString *, long long *))       \
    X(int, Replicate, (RedisModuleCtx *, const char *, const char *, ...))   \
    X(int, IsKeysPositionRequest, (RedisModuleCtx *))                        \
    X(void, KeyAtPos, (RedisModuleCtx *, int))                               \
    X(mstime_t, Milliseconds, (void))

#define RL_MODULE_DECLARE(ret, name, args) \
    extern ret (*RedisModule_##name) args;
RL_MODULE_FUNCS(RL_MODULE_DECLARE)
#undef RL_MODULE_DECLARE

/* Fill every pointer above through the GetApi function the server put
 * first in ctx, then register the module as `name` (the reference's
 * RedisModule_Init).  REDISMODULE_ERR when a function is missing (a
 * server older than 7.0) or the name is taken. */
int rl_module_api(RedisModuleCtx *ctx, const char *name, int ver);

/* The module's entry point, which the server looks up by this name. */
__attribute__((visibility("default"))) int
RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
