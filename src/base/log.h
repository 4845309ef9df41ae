/*
 * log.h -- the messages a limiter sends on its own (the rules source:
 * sets taken and refused, the source away and back, the start from the
 * last good file) to the program's log hook, rl_config_set_log().
 */
#ifndef RL_LOG_H
#define RL_LOG_H

#include <stddef.h>

#include "ratelimit.h"

#define LOG_MSG_MAX 512 /* bytes of one message, with the NUL */

/* The default hook: one line on stderr, "libratelimit: <msg>". */
void log_stderr(void *arg, int level, const char *msg);

/* Replace every control byte (below 0x20, and 0x7f) in s with '?', so a
 * message cannot break a log line or drive a terminal. */
void log_sanitize(char *s);

/* Format, sanitize and deliver one message to fn(arg, ...); nothing when
 * fn is NULL. */
void log_emit(rl_log_fn *fn, void *arg, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
