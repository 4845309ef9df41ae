/*
 * resp.c -- see resp.h.
 */
#include "resp.h"
#include "decimal.h"

#include <stdlib.h>
#include <string.h>

void resp_raw(resp_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = (b->len + n) * 2;
        char *np = b->heap ? realloc(b->p, cap) : malloc(cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        if (!b->heap)
            memcpy(np, b->p, b->len);
        b->p = np;
        b->cap = cap;
        b->heap = 1;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void resp_head(resp_buf *b, char lead, int64_t v)
{
    char tmp[1 + DECIMAL_MAX + 2]; /* lead, the number, CRLF */
    size_t n = 0;

    tmp[n++] = lead;
    n += decimal_put(tmp + n, v);
    tmp[n++] = '\r';
    tmp[n++] = '\n';
    resp_raw(b, tmp, n);
}

void resp_arg(resp_buf *b, const char *s, size_t n)
{
    resp_head(b, '$', (int64_t)n);
    resp_raw(b, s, n);
    resp_raw(b, "\r\n", 2);
}

void resp_num(resp_buf *b, int64_t v)
{
    char tmp[DECIMAL_MAX];

    resp_arg(b, tmp, decimal_put(tmp, v));
}

void resp_cmd(resp_buf *b, int argc, const char *const *argv)
{
    resp_head(b, '*', argc);
    for (int i = 0; i < argc; i++)
        resp_arg(b, argv[i], strlen(argv[i]));
}

void resp_release(resp_buf *b)
{
    if (b->heap)
        free(b->p);
    b->heap = 0;
    b->p = NULL;
    b->len = b->cap = 0;
}
