/*
 * pattern.h -- endpoint patterns for rule matching.
 *
 *   "/search"      exact: no wildcard byte
 *   STAR           any run of bytes except '/': one path segment, or part
 *                  of one ("/users/STAR/posts", "/v1/STAR.json")
 *   STAR STAR      (two stars, no space) any run of bytes, '/' included;
 *                  a pattern ending in it is a prefix match ("/api/STARSTAR")
 *   ?              one byte except '/'
 *   (STAR stands for the asterisk, which cannot be written in a C comment
 *   next to a slash.)
 *
 * Matching is linear in the endpoint: a few word operations per byte per
 * 64 pattern bytes (at most 4 words: RL_PATTERN_MAX), with no allocation
 * and no backtracking blow-up, whatever the pattern and the endpoint.
 */
#ifndef RL_PATTERN_H
#define RL_PATTERN_H

#include <stddef.h>

#define RL_PATTERN_MAX 255 /* bytes in an endpoint pattern */

/* 0 if `pat` is a valid pattern, else -1 with the reason in err. */
int pattern_check(const char *pat, char *err, size_t errlen);

/* 1 if the endpoint matches the (valid) pattern, else 0. */
int pattern_match(const char *pat, const char *endpoint);

/* The same for an endpoint of n bytes (no NUL read, none needed: a
 * request's counted string where the caller holds it). */
int pattern_match_n(const char *pat, const char *endpoint, size_t n);

/* 1 if the pattern has no wildcard (so it can be looked up exactly). */
int pattern_is_exact(const char *pat);

#endif
