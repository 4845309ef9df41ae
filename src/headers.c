/*
 * headers.c -- the HTTP side of a decision.  rl_headers(), rl_headers_format()
 * and rl_body_format() turn an rl_result into response headers and a 429
 * body: the de facto X-RateLimit-Limit / -Remaining / -Reset trio, plus
 * Retry-After on a denial and, on request, the IETF pair RateLimit-Policy /
 * RateLimit of draft-ietf-httpapi-ratelimit-headers: by default as -11
 * reads it (r the available quota, t the effective window within which the
 * client should spend no more than r, a Retry-After never before that
 * window's end), or with RL_HEADERS_DRAFT10 byte for byte as 1.0 wrote the
 * draft-10 form (t the seconds until reset_at).  Nothing here allocates, keeps state or trusts the rl_result: every number
 * is clamped, the rule id is read within its array and reduced to
 * [A-Za-z0-9._:-], so no output byte can be a control character, CR, LF or
 * DEL whatever the result holds.
 */
#include "clock.h"
#include "decimal.h"
#include "ratelimit.h"

#include <stddef.h>
#include <string.h>

/* Largest Integer a Structured Field (RFC 8941 section 3.3.1) may carry. */
#define SF_INT_MAX 999999999999999LL

/* The most headers one call writes: the trio, Retry-After, the IETF pair. */
#define MAX_HEADERS RL_HEADERS_MAX

/* Every option bit rl_headers() knows. */
#define KNOWN_OPTIONS ((unsigned)(RL_HEADERS_IETF | RL_HEADERS_DRAFT10))

/* Milliseconds per second, for the effective window's rounding. */
#define MS_PER_S 1000

/* Bytes of rule_id ever read: up to the NUL or the whole array. */
#define POLICY_MAX (RL_RULE_ID_MAX + 1)

/*
 * The longest IETF value: '"' policy '";q=' number ';w=' number, numbers
 * capped at 15 digits.  It must fit rl_header.value with its NUL.
 */
_Static_assert(1 + POLICY_MAX + 4 + 15 + 3 + 15 < sizeof(((rl_header *)0)->value),
               "IETF header value does not fit rl_header.value");
/* An int64 in decimal (19 digits) fits too. */
_Static_assert(DECIMAL_MAX < sizeof(((rl_header *)0)->value),
               "integer value does not fit rl_header.value");
_Static_assert(sizeof("X-RateLimit-Remaining") <= sizeof(((rl_header *)0)->name),
               "header name does not fit rl_header.name");

/* A bounded string builder; overflow is sticky and nothing is written past
 * cap - 1 (the last byte is kept for the NUL). */
typedef struct sbuf {
    char *p;
    size_t cap;
    size_t len;
    int overflow;
} sbuf;

static void sb_init(sbuf *sb, char *p, size_t cap)
{
    sb->p = p;
    sb->cap = cap;
    sb->len = 0;
    sb->overflow = (cap == 0);
    if (cap > 0)
        p[0] = '\0';
}

static void sb_putn(sbuf *sb, const char *s, size_t n)
{
    if (sb->overflow)
        return;
    if (n >= sb->cap - sb->len) {
        sb->overflow = 1;
        return;
    }
    memcpy(sb->p + sb->len, s, n);
    sb->len += n;
    sb->p[sb->len] = '\0';
}

static void sb_puts(sbuf *sb, const char *s)
{
    sb_putn(sb, s, strlen(s));
}

/* Appends v (>= 0) in decimal: in place when the widest fits, else
 * through sb_putn's bound. */
static void sb_uint(sbuf *sb, int64_t v)
{
    char tmp[DECIMAL_MAX];

    if (v < 0)
        v = 0;
    if (!sb->overflow && sb->cap - sb->len > DECIMAL_MAX) {
        sb->len += decimal_put(sb->p + sb->len, v);
        sb->p[sb->len] = '\0';
        return;
    }
    sb_putn(sb, tmp, decimal_put(tmp, v));
}

static int64_t clamp_min(int64_t v, int64_t lo)
{
    return v < lo ? lo : v;
}

static int64_t clamp_sf(int64_t v, int64_t lo)
{
    v = clamp_min(v, lo);
    return v > SF_INT_MAX ? SF_INT_MAX : v;
}

/* The Retry-After value, in whole seconds, never below 1. */
static int64_t retry_after_of(const rl_result *r)
{
    return clamp_min(r->retry_after, 1);
}

static int is_policy_byte(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
           c == '-';
}

/* Writes the sanitised policy name of r into out (NUL-terminated). */
static void policy_of(const rl_result *r, char out[POLICY_MAX + 1])
{
    size_t i;

    for (i = 0; i < POLICY_MAX && r->rule_id[i] != '\0'; i++) {
        unsigned char c = (unsigned char)r->rule_id[i];
        out[i] = is_policy_byte(c) ? (char)c : '_';
    }
    out[i] = '\0';
    if (i == 0)
        memcpy(out, "default", sizeof("default"));
}

static void set_name(rl_header *h, const char *name)
{
    size_t n = strlen(name);

    memcpy(h->name, name, n + 1);
}

/* v (negative as 0) in decimal, in place: rl_header.value always holds
 * the widest (DECIMAL_MAX and its NUL), so no bounded builder. */
static void set_number(rl_header *h, int64_t v)
{
    h->value[decimal_put(h->value, v < 0 ? 0 : v)] = '\0';
}

static int count_headers(const rl_result *r, unsigned options)
{
    return 3 + (r->allowed == 0 ? 1 : 0) +
           ((options & RL_HEADERS_IETF) ? 2 : 0);
}

/* The seconds from now until reset_at, never negative: the draft-10 "t".
 * Now is CLOCK_REALTIME, as for draft-11, not time(): glibc's time() reads
 * the coarse clock, a tick behind, so the two could differ by a second. */
static int64_t seconds_to_reset(const rl_result *r)
{
    int64_t now = clock_wall_ms() / MS_PER_S;

    /* reset_at > now >= 0, so the subtraction cannot overflow. */
    return r->reset_at > now ? r->reset_at - now : 0;
}

/* The seconds until reset_at, rounded up, at millisecond precision when the
 * result carries reset_at_ms (1.0.0 and later), else as draft-10 counts. */
static int64_t seconds_to_reset_ms(const rl_result *r)
{
    int64_t now, d;

    if (r->size < offsetof(rl_result, reset_at_ms) + sizeof(r->reset_at_ms) ||
        r->reset_at_ms <= 0)
        return seconds_to_reset(r);
    now = clock_wall_ms();
    /* reset_at_ms > 0 and now >= 0: no overflow either way. */
    d = r->reset_at_ms > now ? r->reset_at_ms - now : 0;
    return d / MS_PER_S + (d % MS_PER_S != 0);
}

/* Whole seconds the policy (q units per w seconds) takes to grant `units`,
 * rounded up: the shortest window over which units keep to its pace.  All
 * arguments are clamped Structured Field Integers (q >= 0, w >= 1). */
static int64_t seconds_for(int64_t units, int64_t q, int64_t w)
{
    if (units == 0)
        return 0;
    if (q == 0 || units > (INT64_MAX - q) / w)
        return SF_INT_MAX;
    return clamp_sf((units * w + q - 1) / q, 0);
}

/* Whole units the policy grants in `secs` seconds, rounded down. */
static int64_t units_in(int64_t secs, int64_t q, int64_t w)
{
    if (q != 0 && secs > INT64_MAX / q)
        return SF_INT_MAX;
    return secs * q / w;
}

/*
 * The draft-11 service limit: r the units the client may spend now, t the
 * effective window within which it should spend no more than r.  Admitted:
 * t runs to reset_at (the window's end, the bucket full again) and is never
 * shorter than the policy takes to grant r, so r / t never advertises more
 * than q / w (draft-11 section 6 asks for that cap).  Denied: t is the wait
 * Retry-After carries, so Retry-After is never before the window's end, and
 * r is cut to what the policy grants in t.
 */
static void service_limit(const rl_result *res, int64_t *r, int64_t *t)
{
    int64_t q = clamp_sf(res->limit, 0), w = clamp_sf(res->window, 1);
    int64_t avail = clamp_sf(res->remaining, 0), win, pace;

    if (res->allowed == 0) {
        win = clamp_sf(retry_after_of(res), 1);
        pace = units_in(win, q, w);
        *r = avail < pace ? avail : pace;
        *t = win;
        return;
    }
    win = clamp_sf(seconds_to_reset_ms(res), 0);
    pace = seconds_for(avail, q, w);
    *r = avail;
    *t = win > pace ? win : pace;
}

/* RateLimit-Policy and RateLimit into out[0] and out[1]. */
static void ietf_pair(const rl_result *result, unsigned options,
                      rl_header *out)
{
    char policy[POLICY_MAX + 1];
    int64_t r, t;
    sbuf sb;

    policy_of(result, policy);
    if (options & RL_HEADERS_DRAFT10) {
        r = clamp_sf(result->remaining, 0);
        t = clamp_sf(seconds_to_reset(result), 0);
    } else {
        service_limit(result, &r, &t);
    }

    set_name(&out[0], "RateLimit-Policy");
    sb_init(&sb, out[0].value, sizeof(out[0].value));
    sb_puts(&sb, "\"");
    sb_puts(&sb, policy);
    sb_puts(&sb, "\";q=");
    sb_uint(&sb, clamp_sf(result->limit, 0));
    sb_puts(&sb, ";w=");
    sb_uint(&sb, clamp_sf(result->window, 1));

    set_name(&out[1], "RateLimit");
    sb_init(&sb, out[1].value, sizeof(out[1].value));
    sb_puts(&sb, "\"");
    sb_puts(&sb, policy);
    sb_puts(&sb, "\";r=");
    sb_uint(&sb, r);
    sb_puts(&sb, ";t=");
    sb_uint(&sb, t);
}

/* Is options a combination rl_headers() accepts?  RL_HEADERS_DRAFT10 only
 * qualifies RL_HEADERS_IETF: alone it would silently do nothing. */
static int options_valid(unsigned options)
{
    if (options & ~KNOWN_OPTIONS)
        return 0;
    return !(options & RL_HEADERS_DRAFT10) || (options & RL_HEADERS_IETF);
}

RL_EXPORT int rl_headers(const rl_result *result, unsigned options,
                         rl_header *out, size_t max)
{
    int n, i = 0;

    if (result == NULL || out == NULL || result->size < RL_RESULT_SIZE_MIN ||
        !options_valid(options))
        return RL_EINVAL;
    n = count_headers(result, options);
    if (max < (size_t)n)
        return RL_ERANGE;

    set_name(&out[i], "X-RateLimit-Limit");
    set_number(&out[i++], clamp_min(result->limit, 0));
    set_name(&out[i], "X-RateLimit-Remaining");
    set_number(&out[i++], clamp_min(result->remaining, 0));
    set_name(&out[i], "X-RateLimit-Reset");
    set_number(&out[i++], clamp_min(result->reset_at, 0));
    if (result->allowed == 0) {
        set_name(&out[i], "Retry-After");
        set_number(&out[i++], retry_after_of(result));
    }
    if (options & RL_HEADERS_IETF) {
        ietf_pair(result, options, &out[i]);
        i += 2;
    }
    return i;
}

RL_EXPORT int rl_headers_format(const rl_result *result, unsigned options,
                                char *buf, size_t len)
{
    rl_header h[MAX_HEADERS];
    sbuf sb;
    int n, i;

    if (result == NULL || buf == NULL || result->size < RL_RESULT_SIZE_MIN)
        return RL_EINVAL;
    n = rl_headers(result, options, h, MAX_HEADERS);
    if (n < 0)
        return n;

    sb_init(&sb, buf, len);
    for (i = 0; i < n; i++) {
        sb_puts(&sb, h[i].name);
        sb_puts(&sb, ": ");
        sb_puts(&sb, h[i].value);
        sb_puts(&sb, "\r\n");
    }
    if (sb.overflow) {
        if (len > 0)
            buf[0] = '\0';
        return RL_ERANGE;
    }
    return (int)sb.len;
}

RL_EXPORT int rl_body_format(const rl_result *result, char *buf, size_t len)
{
    sbuf sb;

    if (result == NULL || buf == NULL || result->size < RL_RESULT_SIZE_MIN)
        return RL_EINVAL;
    sb_init(&sb, buf, len);
    if (result->allowed == 0) {
        sb_puts(&sb, "{\"error\":\"rate_limited\",\"retryAfter\":");
        sb_uint(&sb, retry_after_of(result));
        sb_puts(&sb, "}");
    }
    if (sb.overflow) {
        if (len > 0)
            buf[0] = '\0';
        return RL_ERANGE;
    }
    return (int)sb.len;
}
