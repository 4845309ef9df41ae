/*
 * gateway.h -- what the two files of examples/gateway share: gateway.c
 * (the command line, the HTTP server on libmicrohttpd and the check of
 * every request) and gateway_upstream.c (passing an admitted request on to
 * the upstream through libcurl).
 */
#ifndef GATEWAY_H
#define GATEWAY_H

#include <stddef.h>

/* The most body bytes a request may carry to the upstream (413 beyond),
 * and the most an upstream's answer may carry back (502 beyond). */
#define GW_REQUEST_BODY_MAX (1u << 20)
#define GW_RESPONSE_BODY_MAX (8u << 20)
/* The upstream's deadlines: connecting, and the whole exchange. */
#define GW_UPSTREAM_CONNECT_MS 2000L
#define GW_UPSTREAM_TIMEOUT_MS 10000L
/* Headers kept of an upstream's answer (the rest are dropped). */
#define GW_UPSTREAM_HEADERS_MAX 64

/* One header of the upstream's answer, "Name" and "value" in one block. */
typedef struct gw_header {
    char *name;  /* owns the block; value points into it */
    char *value;
} gw_header;

/* A request to pass on: everything read from the client. */
typedef struct gw_forward {
    const char *method;
    const char *target;  /* the request-target as the client sent it */
    const char *client_ip;
    const char *body;
    size_t body_len;
    void *conn;          /* the libmicrohttpd connection (its headers) */
} gw_forward;

/* The upstream's answer; status 502 / 504 with an empty body when it
 * could not be had (error says why, for the log). */
typedef struct gw_answer {
    unsigned status;
    gw_header headers[GW_UPSTREAM_HEADERS_MAX];
    size_t nheaders;
    char *body;          /* malloc'd, owned by the answer */
    size_t body_len;
    size_t body_cap;
    int too_large;
    char error[128];
} gw_answer;

/* Validate an --upstream URL (http://host[:port][/prefix]) and keep its
 * base; 0, or -1 with a message in err.  Call once, before any thread. */
int gw_upstream_init(const char *url, char *err, size_t errlen);
void gw_upstream_cleanup(void);

/* Pass f on with the connection's handle *handle (created on first use,
 * kept for the connection's keep-alive to the upstream); fill *a. */
void gw_upstream_forward(void **handle, const gw_forward *f, gw_answer *a);
/* Free a connection's handle (NULL is a no-op). */
void gw_upstream_handle_free(void *handle);
void gw_answer_free(gw_answer *a);

#endif /* GATEWAY_H */
