/*
 * log.c -- see log.h.  One place formats every message the library sends
 * by itself, so each one is cut to one line of printable text before a
 * program's hook (or stderr) sees it.  Secrets are kept out where the
 * messages are written: they name a Redis server by host and port or
 * socket path, never by its URI.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

void log_sanitize(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

void log_stderr(void *arg, int level, const char *msg)
{
    (void)arg;
    (void)level;
    /* one fprintf: stdio locks the stream, so lines do not interleave */
    fprintf(stderr, "libratelimit: %s\n", msg);
}

void log_emit(rl_log_fn *fn, void *arg, int level, const char *fmt, ...)
{
    char msg[LOG_MSG_MAX];
    va_list ap;

    if (!fn)
        return;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
        msg[0] = '\0';
    va_end(ap);
    log_sanitize(msg);
    fn(arg, level, msg);
}
