/*
 * no_threads.c -- keeps tests/sanitize.sh's tsan_skip list true.  The
 * suites on it are left out of the ThreadSanitizer run because they start
 * no thread; under ASan each of them is linked with this file and
 * -Wl,--wrap=pthread_create, so a thread started by the suite or by the
 * library's objects linked into it (a limiter on redis:// starts its I/O
 * threads) stops the run with the fix named, instead of the suite losing
 * TSan unnoticed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                          void *(*fn)(void *), void *arg);

int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                          void *(*fn)(void *), void *arg)
{
    (void)t, (void)attr, (void)fn, (void)arg;
    fputs("no_threads: this suite started a thread, so ThreadSanitizer must"
          " see it: take it off tsan_skip in tests/sanitize.sh\n", stderr);
    abort();
}
