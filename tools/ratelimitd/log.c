/*
 * log.c -- ratelimitd's log: one line per change and per refused or failed
 * request, on stderr (journald or a file collects it).  A line is built
 * whole and written with one write(2), so lines from concurrent handlers
 * never interleave; anything a client sent is made printable first.
 */
#include "ratelimitd.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024
#define LOG_PREFIX "ratelimitd: "

void log_line(const char *fmt, ...)
{
    char buf[LOG_LINE_MAX];
    size_t pre = strlen(LOG_PREFIX), n;
    va_list ap;
    int len;

    memcpy(buf, LOG_PREFIX, pre);
    va_start(ap, fmt);
    len = vsnprintf(buf + pre, sizeof buf - pre - 1, fmt, ap);
    va_end(ap);
    if (len < 0)
        return;
    n = pre + ((size_t)len < sizeof buf - pre - 1 ? (size_t)len
                                                   : sizeof buf - pre - 2);
    for (size_t i = pre; i < n; i++)
        if ((unsigned char)buf[i] < ' ' || (unsigned char)buf[i] > '~')
            buf[i] = '?';
    buf[n++] = '\n';
    if (write(STDERR_FILENO, buf, n) < 0)
        return; /* nowhere left to say it */
}
