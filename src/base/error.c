/*
 * error.c -- rl_strerror() and rl_errmsg().
 *
 * Each thread keeps the message of its last failed call, tagged with the
 * handle that call was made on (like errno, a success leaves it alone).
 * rl_errmsg(lim) returns it if it belongs to lim.  Thread-local storage
 * needs no lock and avoids the race a message kept in the shared handle
 * would have.
 *
 * This is the one place messages are recorded, so it is where they are
 * made safe to log: many quote what a caller or a file supplied (a rule
 * id, a JSON string, an option's value), and servers write rl_errmsg()
 * to their logs.  Every control byte (below 0x20, and 0x7f) becomes '?',
 * as in the messages of the log hook (log.c), so no message can forge a
 * log line or drive a terminal.
 */
#include "ratelimit.h"
#include "error.h"
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local struct {
    const void *owner;
    int code;
    char msg[RL_ERRMSG_MAX];
} last_error;

RL_EXPORT const char *rl_strerror(int code)
{
    switch (code) {
    case RL_OK: return "success";
    case RL_EINVAL: return "invalid argument";
    case RL_ENOMEM: return "out of memory";
    case RL_ENORULE: return "no such rule";
    case RL_ERULE: return "invalid rule";
    case RL_EPARSE: return "rule JSON does not parse";
    case RL_EIO: return "cannot read file";
    case RL_EOPTION: return "bad configuration option";
    case RL_ESTORE: return "store error";
    case RL_ERANGE: return "buffer too small";
    case RL_EBUSY: return "too many checks in flight";
    case RL_ESETTLED: return "reservation already settled or expired";
    default: return "unknown error";
    }
}

RL_EXPORT const char *rl_errmsg(const rl_limiter *lim)
{
    if (last_error.code == 0 || last_error.owner != (const void *)lim)
        return "";
    return last_error.msg;
}

int rl_fail_msg(const void *owner, int code, const char *msg)
{
    last_error.owner = owner;
    last_error.code = code;
    /* Long messages are cut short on purpose. */
    if (snprintf(last_error.msg, sizeof last_error.msg, "%s: %s",
                 rl_strerror(code), msg) < 0)
        last_error.msg[0] = '\0';
    log_sanitize(last_error.msg);
    return code;
}

int rl_fail(const void *owner, int code, const char *fmt, ...)
{
    char buf[RL_ERRMSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    if (vsnprintf(buf, sizeof buf, fmt, ap) < 0)
        buf[0] = '\0';
    va_end(ap);
    return rl_fail_msg(owner, code, buf);
}
