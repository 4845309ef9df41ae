/*
 * ratelimit/libuv.h -- libratelimit's asynchronous checks in a libuv loop.
 * Header-only: include it after <uv.h>'s users include libuv, link
 * libratelimit and libuv.
 *
 *     rl_uv w;
 *     rl_async *a;
 *     rl_async_new(lim, 256, &a);
 *     rl_uv_attach(&w, uv_default_loop(), a);    // callbacks now run in
 *     rl_check_start(a, &req, &chk);              // the loop's thread
 *     ...
 *     rl_uv_detach(&w, on_closed);  // then, in on_closed: rl_async_free(a)
 *
 * One rl_uv per rl_async, in the loop's thread (the thread rules of
 * ratelimit.h's "asynchronous checks").  The rl_uv must stay where it is
 * until the close callback given to rl_uv_detach() ran.
 */
#ifndef RATELIMIT_LIBUV_H
#define RATELIMIT_LIBUV_H

#include <ratelimit.h>
#include <uv.h>

typedef struct rl_uv {
    uv_poll_t poll;           /* on rl_async_fd()                     */
    rl_async *async;
} rl_uv;

static inline void rlad_uv_ready(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    rl_async_process(((rl_uv *)p->data)->async);
}

/* Watch a's descriptor in loop: completions are processed (their
 * callbacks run) as the loop finds it readable.  0 or a libuv error. */
static inline int rl_uv_attach(rl_uv *w, uv_loop_t *loop, rl_async *a)
{
    int rc;

    w->async = a;
    if ((rc = uv_poll_init(loop, &w->poll, rl_async_fd(a))) != 0)
        return rc;
    w->poll.data = w;
    return uv_poll_start(&w->poll, UV_READABLE, rlad_uv_ready);
}

/* Stop watching; closed calls back (may be NULL) once libuv let go of
 * the handle. */
static inline void rl_uv_detach(rl_uv *w, uv_close_cb closed)
{
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, closed);
}

#endif
