/*
 * redis_tls.h -- TLS to Redis (rediss://) with OpenSSL: the client
 * context made from the options (CA, client certificate, verification),
 * the handshake (SNI, the host name or IP checked against the server's
 * certificate, a saved session offered for resumption) done by the
 * connector with a deadline, and the non-blocking reads and writes the
 * I/O loop does on an established connection.
 *
 * Hiredis 0.14 has no TLS, so the library brings its own: the connector
 * (redis_connector.c, through redis_link.c) connects and handshakes off
 * the request path, then hands the fd and its SSL to the loop
 * (redis_io.c), which reads and writes it through rtls_read / rtls_write.
 * Messages say what failed and why ("TLS to 127.0.0.1:6390: certificate
 * verify failed: certificate has expired") and never hold a secret.
 */
#ifndef RL_REDIS_TLS_H
#define RL_REDIS_TLS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

/* What the tls_* options say; NULL strings: not set. */
typedef struct rtls_opts {
    const char *ca_file;    /* PEM bundle of trusted CAs                 */
    const char *ca_dir;     /* c_rehash'ed directory of trusted CAs      */
    const char *cert_file;  /* client certificate (chain), PEM           */
    const char *key_file;   /* its private key, PEM                      */
    int verify;             /* 0: no server verification (tls_verify=0)  */
} rtls_opts;

/* A client context: TLS 1.2 or later; the server's certificate verified
 * against ca_file / ca_dir (the system's store when neither is set)
 * unless verify is 0; the client certificate loaded if given (both files
 * or neither).  NULL with the reason in err. */
SSL_CTX *rtls_ctx_new(const rtls_opts *o, char *err, size_t errlen);

/* A connection on socket fd to host:port, ready for SSL_connect (what
 * rtls_handshake does first; for a caller that waits on more than the
 * socket): SNI and the name or IP check set, *sess offered.  NULL with
 * the reason in err. */
SSL *rtls_new(SSL_CTX *ctx, int fd, const char *host, int port,
              SSL_SESSION *sess, char *err, size_t errlen);

/* Handshake on connected socket fd (non-blocking from here on) to
 * host:port by deadline_ms (CLOCK_MONOTONIC): SNI and the name check for
 * a host name, the IP check for an IP literal; *sess, if set, offered for
 * resumption.  The SSL, or NULL with the reason in err. */
SSL *rtls_handshake(SSL_CTX *ctx, int fd, const char *host, int port,
                    SSL_SESSION *sess, int64_t deadline_ms, char *err,
                    size_t errlen);

/* After ret = SSL_read/SSL_write/SSL_connect(ssl) <= 0: wait (poll) until
 * the socket is ready for what OpenSSL wants, by deadline_ms.  0: try
 * again; -1: an error or the deadline, the reason in err. */
int rtls_wait(SSL *ssl, int fd, int ret, int64_t deadline_ms,
              const char *host, int port, char *err, size_t errlen);

/* Why the last operation on ssl failed (ret its result), as "TLS to
 * host:port: reason[: detail]" into err; clears the error queue. */
void rtls_error(SSL *ssl, int ret, const char *host, int port, char *err,
                size_t errlen);

/* The loop's non-blocking transfers: > 0 bytes moved; 0 the peer closed;
 * RTLS_WANT_READ / RTLS_WANT_WRITE: wait for that, then call again (a
 * write with the same bytes, or more); RTLS_FAIL: the connection is
 * broken.  A read returns what OpenSSL holds decrypted first: keep
 * reading until it wants more (epoll does not see those bytes). */
enum { RTLS_WANT_READ = -1, RTLS_WANT_WRITE = -2, RTLS_FAIL = -3 };
ssize_t rtls_read(SSL *ssl, void *buf, size_t len);
ssize_t rtls_write(SSL *ssl, const void *buf, size_t len);

/* OpenSSL writes with write(2): to a server that went away that raises
 * SIGPIPE.  A thread that writes TLS holds SIGPIPE blocked meanwhile
 * (the library's own threads for their life; a caller's thread between
 * these two calls, which then drop a SIGPIPE that arose). */
typedef struct rtls_sigpipe {
    sigset_t old;
    int pending;  /* one was pending before: not ours to drop */
} rtls_sigpipe;
void rtls_sigpipe_block(rtls_sigpipe *s);
void rtls_sigpipe_restore(const rtls_sigpipe *s);

/* Free ssl without waiting for the peer (no close_notify round trip),
 * keeping its session resumable.  NULL: nothing. */
void rtls_free(SSL *ssl);

#endif
