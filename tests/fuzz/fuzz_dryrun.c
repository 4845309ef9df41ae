/*
 * fuzz_dryrun.c -- a dry-run report value as read from Redis
 * (src/telemetry/dryrun_report.c): "<version> <checks> <would_deny> <2048 hex>".  The
 * hash is writable by anyone who can write to Redis, so the parser takes
 * outside input.  Whatever parses must be usable as is: would_deny within
 * checks, every register a possible rank, the canonical form written back
 * equal to the input (but for the hex digits' case) and parsing to the
 * same field; merged, the estimate is finite and never above would_deny.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dryrun_report.h"
#include "fuzz.h"

static void check_field(const uint8_t *data, size_t size,
                        const dryrun_field *f)
{
    char buf[DRYRUN_VALUE_MAX];
    dryrun_field again;
    size_t len;

    FUZZ_CHECK(f->version >= 0 && f->would_deny <= f->checks);
    for (unsigned i = 0; i < HLL_M; i++)
        FUZZ_CHECK(f->sketch.reg[i] <= HLL_RANK_MAX);
    len = dryrun_value_format(buf, f);
    FUZZ_CHECK(len == size && strlen(buf) == len);
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK(buf[i] == tolower(data[i]));
    FUZZ_CHECK(dryrun_value_parse(buf, len, &again) == 0);
    FUZZ_CHECK(memcmp(f, &again, sizeof *f) == 0);
}

int fuzz_dryrun(const uint8_t *data, size_t size)
{
    dryrun_report r;
    dryrun_field f;
    double e;
    int got;

    memset(&f, 0, sizeof f); /* padding, for the memcmp above */
    if (dryrun_value_parse((const char *)data, size, &f) == 0)
        check_field(data, size, &f);
    dryrun_report_init(&r);
    got = dryrun_merge(&r, (const char *)data, size);
    FUZZ_CHECK(got == -1 || got == 1);
    got = dryrun_merge(&r, (const char *)data, size);
    FUZZ_CHECK(got == -1 || got == 1);
    e = hll_estimate(&r.sketch);
    FUZZ_CHECK(isfinite(e) && e >= 0);
    FUZZ_CHECK(dryrun_report_distinct(&r) <= r.would_deny);
    FUZZ_CHECK(r.would_deny <= r.checks);
    FUZZ_CHECK(r.limiters + r.invalid == 2);
    return 0;
}

#ifdef FUZZ_TARGET_dryrun
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_dryrun(data, size);
}
#endif
