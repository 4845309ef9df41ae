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

#define FUZZ_CHECK(cond)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__,  \
                    __LINE__, #cond);                                        \
            abort();                                                         \
        }                                                                    \
    } while (0)

#endif
