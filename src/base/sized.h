/*
 * sized.h -- the one rule of the growable public structs (rl_result,
 * rl_request, rl_stats, rl_dryrun, rl_rules_status, rl_async_check;
 * ratelimit.h's
 * conventions): the caller's `size` says how many bytes of its struct the
 * library may read or fill.  Every function that takes one of them asks
 * here, so they all answer alike: below the struct's first 1.0 layout is
 * RL_EINVAL with one message naming the struct; otherwise the span is
 * min(caller's size, ours); `size` itself is never written.
 *
 * The usual caller's struct has this library's size exactly: that case
 * is tested inline here, once for every function (the descriptors are
 * constants of this header, so the test is against a constant and the
 * zeroing of such a struct a few stores, not a memset call); only other
 * sizes reach sized.c.
 */
#ifndef RL_SIZED_H
#define RL_SIZED_H

#include <stdalign.h>
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

#define SIZED_(type, min, init)                                            \
    {#type, (min), sizeof(type), alignof(type), init}
#define SIZED_DEF_(var, type, min, init)                                   \
    static const sized_type var __attribute__((unused)) =                 \
        SIZED_(type, min, init)

SIZED_DEF_(sized_result, rl_result, RL_RESULT_SIZE_MIN, "RL_RESULT_INIT");
SIZED_DEF_(sized_request, rl_request, RL_REQUEST_SIZE_MIN, "RL_REQUEST_INIT");
SIZED_DEF_(sized_stats, rl_stats, RL_STATS_SIZE_MIN, "RL_STATS_INIT");
SIZED_DEF_(sized_dryrun, rl_dryrun, RL_DRYRUN_SIZE_MIN, "RL_DRYRUN_INIT");
SIZED_DEF_(sized_rules_status, rl_rules_status, RL_RULES_STATUS_SIZE_MIN,
           "RL_RULES_STATUS_INIT");
SIZED_DEF_(sized_async_check, rl_async_check, RL_ASYNC_CHECK_SIZE_MIN,
           "RL_ASYNC_CHECK_INIT");
SIZED_DEF_(sized_reservation, rl_reservation, RL_RESERVATION_SIZE_MIN,
           "RL_RESERVATION_INIT");

/* sized_span() for a size other than this library's (sized.c). */
size_t sized_span_other(const void *owner, const char *what,
                        const sized_type *t, size_t size);

/*
 * The bytes of the caller's struct (of `size`, named in the message as
 * `what`, e.g. "rl_check: result->size") the library may read or fill: size
 * capped at this library's sizeof.  0 when size is below t's first
 * layout, with rl_fail(owner, RL_EINVAL, ...) done.
 */
static inline size_t sized_span(const void *owner, const char *what,
                                const sized_type *t, size_t size)
{
    if (__builtin_expect(size == t->ours, 1))
        return t->ours;
    return sized_span_other(owner, what, t, size);
}

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

/* sized_zero() of a struct of type t: of this library's size (the usual
 * case) a zeroing of constant length, a few inline stores. */
static inline void sized_zero_as(void *dst, const sized_type *t,
                                 size_t span)
{
    if (span == t->ours)
        sized_zero(dst, t->ours);
    else
        sized_zero(dst, span);
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
        sized_zero_as(dst, t, size < t->ours ? size : t->ours);
}

#endif
