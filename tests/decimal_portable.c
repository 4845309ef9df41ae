/*
 * decimal_portable.c -- decimal.h's portable path (digit pairs, no
 * eight-digit word: what a big-endian machine runs), compiled here with
 * DECIMAL_PORTABLE so check_headers_ietf tests it against printf on this
 * little-endian machine too, beside the word path every build runs.
 */
#define DECIMAL_PORTABLE 1
#include "decimal.h"

#ifdef DECIMAL_EIGHT
#error "DECIMAL_PORTABLE must leave out the eight-digit word"
#endif

size_t decimal_put_portable(char *p, int64_t x);

size_t decimal_put_portable(char *p, int64_t x)
{
    return decimal_put(p, x);
}
