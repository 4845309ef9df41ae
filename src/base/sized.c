/*
 * sized.c -- the check of a caller's struct of another size than this
 * library's (sized.h says why; its descriptors and the exact-size fast
 * path live there).
 */
#include "sized.h"
#include "error.h"

size_t sized_span_other(const void *owner, const char *what,
                        const sized_type *t, size_t size)
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
