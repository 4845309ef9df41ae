/*
 * futex.c -- see futex.h.
 */
#include "futex.h"
#include "clock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void futex_wait_until(_Atomic uint32_t *w, uint32_t val, int64_t deadline_ns)
{
    struct timespec rel, *tp = NULL;

    if (deadline_ns != INT64_MAX) {
        int64_t left = deadline_ns - clock_mono_ns();
        if (left <= 0)
            return;
        rel.tv_sec = left / 1000000000;
        rel.tv_nsec = left % 1000000000;
        tp = &rel;
    }
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, tp, NULL, 0);
}

void futex_wake_one(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void futex_wake_all(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}
