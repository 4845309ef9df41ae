/*
 * sized.c -- the growable public structs' descriptions, and the one check
 * of a caller's size (sized.h says why).
 */
#include "sized.h"
#include "error.h"

#include <stdalign.h>

#define SIZED(type, min, init)                                             \
    {#type, (min), sizeof(type), alignof(type), init}

const sized_type sized_result =
    SIZED(rl_result, RL_RESULT_SIZE_MIN, "RL_RESULT_INIT");
const sized_type sized_request =
    SIZED(rl_request, RL_REQUEST_SIZE_MIN, "RL_REQUEST_INIT");
const sized_type sized_stats =
    SIZED(rl_stats, RL_STATS_SIZE_MIN, "RL_STATS_INIT");
const sized_type sized_dryrun =
    SIZED(rl_dryrun, RL_DRYRUN_SIZE_MIN, "RL_DRYRUN_INIT");
const sized_type sized_rules_status =
    SIZED(rl_rules_status, RL_RULES_STATUS_SIZE_MIN, "RL_RULES_STATUS_INIT");
const sized_type sized_async_check =
    SIZED(rl_async_check, RL_ASYNC_CHECK_SIZE_MIN, "RL_ASYNC_CHECK_INIT");
const sized_type sized_reservation =
    SIZED(rl_reservation, RL_RESERVATION_SIZE_MIN, "RL_RESERVATION_INIT");

size_t sized_span(const void *owner, const char *what, const sized_type *t,
                  size_t size)
{
    if (size < t->min) {
        rl_fail(owner, RL_EINVAL, "%s is %zu, below the %zu bytes of the "
                "first 1.0 %s: set it to sizeof(%s) (%s)", what, size,
                t->min, t->name, t->name, t->init);
        return 0;
    }
    return size < t->ours ? size : t->ours;
}

size_t sized_stride(const void *owner, const char *what,
                    const sized_type *t, size_t size)
{
    size_t span = sized_span(owner, what, t, size);

    if (span && size % t->align) {
        rl_fail(owner, RL_EINVAL, "%s is %zu, not a multiple of %zu: the "
                "array's elements would not be aligned", what, size,
                t->align);
        return 0;
    }
    return span;
}
