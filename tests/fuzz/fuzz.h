/*
 * fuzz.h -- the fuzz targets: one per parser of outside input.  Each takes
 * arbitrary bytes, must never crash, leak or hang, and checks the
 * invariants of whatever it managed to parse (abort() on a violation).
 * They run under libFuzzer (`make fuzz`) and, over the checked-in corpus
 * plus deterministic mutations, in `make check` (tests/fuzz/run.c).
 */
#ifndef RL_FUZZ_H
#define RL_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int fuzz_rules(const uint8_t *data, size_t size);   /* rule JSON          */
int fuzz_config(const uint8_t *data, size_t size);  /* option name=value  */
int fuzz_pattern(const uint8_t *data, size_t size); /* endpoint patterns  */
int fuzz_uri(const uint8_t *data, size_t size);     /* store URIs         */
int fuzz_cluster(const uint8_t *data, size_t size); /* CLUSTER SLOTS, MOVED */
int fuzz_dryrun(const uint8_t *data, size_t size);  /* dry-run report value */
int fuzz_rulebody(const uint8_t *data, size_t size); /* ratelimitd PUT body */
int fuzz_ruleid(const uint8_t *data, size_t size);  /* ratelimitd path, ETags */
int fuzz_ruleset_delta(const uint8_t *data, size_t size); /* = full parse */
int fuzz_script(const uint8_t *data, size_t size);  /* check script answer */
int fuzz_globindex(const uint8_t *data, size_t size); /* = the rule walk */

#define FUZZ_CHECK(cond)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__,  \
                    __LINE__, #cond);                                        \
            abort();                                                         \
        }                                                                    \
    } while (0)

/* hiredis 0.14 (Debian 12) has no cap on an array's announced length: a
 * header like "*323456789" makes it allocate gigabytes before reading one
 * element.  That is the reader's business, not the parsers' under test:
 * the RESP targets skip inputs announcing more than 65536 elements or
 * bytes. */
static inline int fuzz_resp_huge(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((d[i] == '*' || d[i] == '$' || d[i] == '%' || d[i] == '~') &&
            (i == 0 || d[i - 1] == '\n')) {
            long v = 0;
            for (size_t j = i + 1; j < n && d[j] >= '0' && d[j] <= '9'; j++)
                if ((v = v * 10 + (d[j] - '0')) > 65536)
                    return 1;
        }
    }
    return 0;
}

#endif
