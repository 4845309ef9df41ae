/*
 * resp.h -- the library's one RESP writer: commands for Redis encoded into
 * a buffer that starts on the caller's stack and moves to the heap only if
 * it outgrows it.  The script calls of the Redis stores (redis_script.c)
 * and the fleet's heartbeats (fleet.c) are written with it; no snprintf on
 * the request path.
 */
#ifndef RL_RESP_H
#define RL_RESP_H

#include <stddef.h>
#include <stdint.h>

typedef struct resp_buf {
    char *p;
    size_t len, cap;
    int heap;                 /* p was malloc'ed (it outgrew the stack)  */
    int oom;                  /* an append failed: the buffer is unusable */
} resp_buf;

/* A buffer writing into stack[0..cap) first. */
#define RESP_BUF(stack, cap) ((resp_buf){(stack), 0, (cap), 0, 0})

void resp_raw(resp_buf *b, const char *s, size_t n);
/* "<lead><v>\r\n": an array's head ('*') or a bulk string's ('$'). */
void resp_head(resp_buf *b, char lead, int64_t v);
void resp_arg(resp_buf *b, const char *s, size_t n);
void resp_num(resp_buf *b, int64_t v);
/* A whole command of argc C strings. */
void resp_cmd(resp_buf *b, int argc, const char *const *argv);
/* Give the heap part back (the buffer may be used again after). */
void resp_release(resp_buf *b);

#endif
