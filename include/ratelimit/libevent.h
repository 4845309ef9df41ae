/*
 * ratelimit/libevent.h -- libratelimit's asynchronous checks in a
 * libevent (2.x) loop.  Header-only: link libratelimit and libevent.
 *
 *     rl_event w;
 *     rl_async *a;
 *     rl_async_new(lim, 256, &a);
 *     rl_event_attach(&w, base, a);     // callbacks now run in the loop
 *     rl_check_start(a, &req, &chk);
 *     ...
 *     rl_event_detach(&w);
 *     rl_async_free(a);
 *
 * One rl_event per rl_async, in the loop's thread (the thread rules of
 * ratelimit.h's "asynchronous checks").
 */
#ifndef RATELIMIT_LIBEVENT_H
#define RATELIMIT_LIBEVENT_H

#include <event2/event.h>
#include <ratelimit.h>

typedef struct rl_event {
    struct event *ev;         /* persistent read event on rl_async_fd() */
    rl_async *async;
} rl_event;

static inline void rlad_event_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    rl_async_process((rl_async *)arg);
}

/* Watch a's descriptor in base: completions are processed (their
 * callbacks run) as the loop finds it readable.  0, or -1 (libevent
 * could not make or add the event). */
static inline int rl_event_attach(rl_event *w, struct event_base *base,
                                  rl_async *a)
{
    w->async = a;
    w->ev = event_new(base, rl_async_fd(a), EV_READ | EV_PERSIST,
                      rlad_event_ready, a);
    if (!w->ev)
        return -1;
    if (event_add(w->ev, NULL) != 0) {
        event_free(w->ev);
        w->ev = NULL;
        return -1;
    }
    return 0;
}

/* Stop watching (before rl_async_free). */
static inline void rl_event_detach(rl_event *w)
{
    if (w->ev)
        event_free(w->ev);
    w->ev = NULL;
}

#endif
