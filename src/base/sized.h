/*
 * sized.h -- the one rule of the growable public structs (rl_result,
 * rl_request, rl_stats, rl_dryrun, rl_rules_status, rl_async_check;
 * ratelimit.h's
 * conventions): the caller's `size` says how many bytes of its struct the
 * library may read or fill.  Every function that takes one of them asks
 * here, so they all answer alike: below the struct's first 1.0 layout is
 * RL_EINVAL with one message naming the struct; otherwise the span is
 * min(caller's size, ours); `size` itself is never written.
 */
#ifndef RL_SIZED_H
#define RL_SIZED_H

#include <stddef.h>
#include <string.h>

#include "ratelimit.h"

/* A growable struct: its name, its first 1.0 layout's size, this
 * library's size of it, its alignment and its init macro's name. */
typedef struct sized_type {
    const char *name;
    size_t min, ours, align;
    const char *init;
} sized_type;

extern const sized_type sized_result, sized_request, sized_stats,
    sized_dryrun, sized_rules_status, sized_async_check;
extern const sized_type sized_reservation;

/*
 * The bytes of the caller's struct (of `size`, named in the message as
 * `what`, e.g. "rl_check: result->size") the library may read or fill: size
 * capped at this library's sizeof.  0 when size is below t's first
 * layout, with rl_fail(owner, RL_EINVAL, ...) done.
 */
size_t sized_span(const void *owner, const char *what, const sized_type *t,
                  size_t size);

/* The same for the first element of an array strided by size (which must
 * also keep every element aligned).  0 with rl_fail() done, or the span. */
size_t sized_stride(const void *owner, const char *what,
                    const sized_type *t, size_t size);

/* Copy span bytes of this library's full struct `full` into the caller's
 * `dst`, all but the leading size member (the caller's stays). */
static inline void sized_fill(void *dst, const void *full, size_t span)
{
    memcpy((char *)dst + sizeof(size_t), (const char *)full + sizeof(size_t),
           span - sizeof(size_t));
}

/* Zero the span bytes of the caller's dst after its size member. */
static inline void sized_zero(void *dst, size_t span)
{
    memset((char *)dst + sizeof(size_t), 0, span - sizeof(size_t));
}

/* A failed call's answer zeroed, whatever made it fail: the caller's
 * struct at dst (NULL tolerated) after its size member, as far as its size
 * goes, capped at this library's size.  A size below t's first layout says
 * nothing of what the caller owns: nothing is written then.  No message:
 * the caller reports the failure itself. */
static inline void sized_clear(void *dst, const sized_type *t)
{
    size_t size;

    if (!dst)
        return;
    memcpy(&size, dst, sizeof size);
    if (size >= t->min)
        sized_zero(dst, size < t->ours ? size : t->ours);
}

#endif
