/*
 * error.h -- error codes to text, and the per-thread, per-handle message
 * behind rl_errmsg().  A failing call records a message tagged with the
 * handle it was made on; the calling thread reads it back with rl_errmsg().
 * Thread-local storage keeps this lock-free and safe for many threads.
 */
#ifndef RL_ERROR_H
#define RL_ERROR_H

#include <stddef.h>

#define RL_ERRMSG_MAX 256

/* Record "fmt ..." as the calling thread's last error on `owner` (NULL for
 * calls without a handle) and return `code`, so callers can write
 * `return rl_fail(lim, RL_EINVAL, "key is empty");`.  The message is cut
 * to RL_ERRMSG_MAX - 1 bytes and its control bytes (below 0x20, 0x7f)
 * become '?': it may quote anything a caller supplied.  A message must
 * never quote a password (name a server by host:port or by
 * redis_uri_redact()). */
int rl_fail(const void *owner, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, with a message already formatted (e.g. from a parser). */
int rl_fail_msg(const void *owner, int code, const char *msg);

#endif
