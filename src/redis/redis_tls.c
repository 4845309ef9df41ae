/*
 * redis_tls.c -- see redis_tls.h.  OpenSSL's error queue is per thread:
 * every operation here clears it first, so a message never reports an
 * older failure, and reads it once to build the message.  Messages take
 * OpenSSL's reason strings and the verification result's text (fixed
 * strings, no peer data), plus the host and port the caller gave.
 */
#include "redis_tls.h"
#include "clock.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

/* The reason of the oldest error queued, or `none`; clears the queue. */
static const char *queued_reason(const char *none)
{
    unsigned long e = ERR_get_error();
    const char *why = e ? ERR_reason_error_string(e) : NULL;

    ERR_clear_error();
    return why ? why : none;
}

/* Whether path opens (a directory when dir): 0, else its errno. */
static int open_errno(const char *path, int dir)
{
    DIR *d = dir ? opendir(path) : NULL;
    FILE *f = dir ? NULL : fopen(path, "r");
    int e = d || f ? 0 : errno;

    if (d)
        closedir(d);
    if (f)
        fclose(f);
    return e;
}

/* The message of a file (or directory) OpenSSL did not take: what could
 * not be done ("load the CA file"), the option, its path, and why: the
 * errno of opening it ourselves when that fails too (OpenSSL 3 queues a
 * system error without a reason string: "unknown error"), else OpenSSL's
 * reason (a file that opens but holds no certificate, a key that does not
 * fit the certificate). */
static int load_failed(char *err, size_t errlen, const char *what,
                       const char *option, const char *path, int dir)
{
    int e = open_errno(path, dir);
    const char *why = e ? strerror(e) : queued_reason("unknown error");

    ERR_clear_error();
    return snprintf(err, errlen, "TLS: cannot %s (%s) \"%s\": %s", what,
                    option, path, why), -1;
}

/* The CA file or directory that failed: the one that does not open, else
 * the file (OpenSSL's reason says what is wrong in it). */
static int ca_failed(const rtls_opts *o, char *err, size_t errlen)
{
    if (o->ca_file && (!o->ca_dir || open_errno(o->ca_file, 0)))
        return load_failed(err, errlen, "load the CA file", "tls_ca_file",
                           o->ca_file, 0);
    return load_failed(err, errlen, "load the CA directory", "tls_ca_dir",
                       o->ca_dir, 1);
}

static int load_files(SSL_CTX *ctx, const rtls_opts *o, char *err,
                      size_t errlen)
{
    if (!o->ca_file && !o->ca_dir &&
        SSL_CTX_set_default_verify_paths(ctx) != 1)
        return snprintf(err, errlen, "TLS: cannot load the system's CA "
                        "certificates: %s", queued_reason("unknown error")),
               -1;
    /* OpenSSL reads a CA directory at each verification, so takes one
     * that does not exist: it is opened here to be refused now */
    if ((o->ca_file || o->ca_dir) &&
        (SSL_CTX_load_verify_locations(ctx, o->ca_file, o->ca_dir) != 1 ||
         (o->ca_dir && open_errno(o->ca_dir, 1))))
        return ca_failed(o, err, errlen);
    if (!o->cert_file != !o->key_file)
        return snprintf(err, errlen, "TLS: tls_cert_file and tls_key_file "
                        "go together (mutual TLS needs both)"), -1;
    if (!o->cert_file)
        return 0;
    if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1)
        return load_failed(err, errlen, "load the client certificate",
                           "tls_cert_file", o->cert_file, 0);
    if (SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1)
        return load_failed(err, errlen, "use the client key", "tls_key_file",
                           o->key_file, 0);
    return 0;
}

SSL_CTX *rtls_ctx_new(const rtls_opts *o, char *err, size_t errlen)
{
    SSL_CTX *ctx;

    ERR_clear_error();
    if (!(ctx = SSL_CTX_new(TLS_client_method()))) {
        snprintf(err, errlen, "TLS: %s", queued_reason("out of memory"));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, o->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE,
                       NULL);
    /* The loop writes from a buffer that may grow (move) between a write
     * that wanted to wait and its retry, and takes partial writes. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (load_files(ctx, o, err, errlen) != 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* ---- the handshake ------------------------------------------------------ */

void rtls_error(SSL *ssl, int ret, const char *host, int port, char *err,
                size_t errlen)
{
    int e = SSL_get_error(ssl, ret);
    long v = SSL_get_verify_result(ssl);
    const char *why;

    if (e == SSL_ERROR_SSL) {
        why = queued_reason("protocol error");
    } else if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        why = errno && e == SSL_ERROR_SYSCALL ? strerror(errno)
                                              : "the server closed the "
                                                "connection";
    } else {
        ERR_clear_error();
        why = "unexpected state";
    }
    if (v != X509_V_OK)
        snprintf(err, errlen, "TLS to %s:%d: %s: %s", host, port, why,
                 X509_verify_cert_error_string(v));
    else if (SSL_is_init_finished(ssl) && !SSL_get_certificate(ssl))
        /* TLS 1.3: a server that wants a client certificate says so only
         * after the handshake, often as a reset */
        snprintf(err, errlen, "TLS to %s:%d: %s (does the server require "
                 "a client certificate? tls_cert_file, tls_key_file)", host,
                 port, why);
    else
        snprintf(err, errlen, "TLS to %s:%d: %s", host, port, why);
}

int rtls_wait(SSL *ssl, int fd, int ret, int64_t deadline_ms,
              const char *host, int port, char *err, size_t errlen)
{
    int e = SSL_get_error(ssl, ret);
    struct pollfd p = {.fd = fd};
    int64_t left;

    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        rtls_error(ssl, ret, host, port, err, errlen);
        return -1;
    }
    p.events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
    for (;;) {
        int n;
        if ((left = deadline_ms - clock_mono_ms()) <= 0) {
            snprintf(err, errlen, "TLS to %s:%d: timed out", host, port);
            return -1;
        }
        n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR) {
            snprintf(err, errlen, "TLS to %s:%d: poll: %s", host, port,
                     strerror(errno));
            return -1;
        }
    }
}

/* What the certificate must name: an IP literal is checked as an
 * address, anything else as a DNS name and sent as SNI. */
static int set_peer_name(SSL *ssl, const char *host)
{
    unsigned char addr[16];

    if (inet_pton(AF_INET, host, addr) == 1 ||
        inet_pton(AF_INET6, host, addr) == 1)
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1;
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return SSL_set_tlsext_host_name(ssl, host) == 1 &&
           SSL_set1_host(ssl, host) == 1;
}

SSL *rtls_new(SSL_CTX *ctx, int fd, const char *host, int port,
              SSL_SESSION *sess, char *err, size_t errlen)
{
    SSL *ssl;

    ERR_clear_error();
    if (!(ssl = SSL_new(ctx)) || SSL_set_fd(ssl, fd) != 1 ||
        !set_peer_name(ssl, host) || (sess && SSL_set_session(ssl, sess) != 1)) {
        snprintf(err, errlen, "TLS to %s:%d: %s", host, port,
                 queued_reason("cannot set up the connection"));
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

SSL *rtls_handshake(SSL_CTX *ctx, int fd, const char *host, int port,
                    SSL_SESSION *sess, int64_t deadline_ms, char *err,
                    size_t errlen)
{
    SSL *ssl = rtls_new(ctx, fd, host, port, sess, err, errlen);
    int ret;

    if (!ssl)
        return NULL;
    while ((errno = 0, ret = SSL_connect(ssl)) != 1)
        if (rtls_wait(ssl, fd, ret, deadline_ms, host, port, err, errlen)) {
            SSL_free(ssl);
            return NULL;
        }
    return ssl;
}

/* ---- the loop's transfers ------------------------------------------------- */

static ssize_t outcome(SSL *ssl, int ret)
{
    switch (SSL_get_error(ssl, ret)) {
    case SSL_ERROR_WANT_READ:
        return RTLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return RTLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    default:
        ERR_clear_error();
        return RTLS_FAIL;
    }
}

ssize_t rtls_read(SSL *ssl, void *buf, size_t len)
{
    int ret;

    ERR_clear_error();
    ret = SSL_read(ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    return ret > 0 ? ret : outcome(ssl, ret);
}

ssize_t rtls_write(SSL *ssl, const void *buf, size_t len)
{
    int ret;

    ERR_clear_error();
    ret = SSL_write(ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    return ret > 0 ? ret : outcome(ssl, ret);
}

void rtls_free(SSL *ssl)
{
    if (!ssl)
        return;
    /* As if shut down: OpenSSL then keeps the session resumable (a
     * connection freed mid-stream would mark it not resumable). */
    SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(ssl);
}

void rtls_sigpipe_block(rtls_sigpipe *s)
{
    sigset_t set, pend;

    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pend);
    s->pending = sigismember(&pend, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &set, &s->old);
}

void rtls_sigpipe_restore(const rtls_sigpipe *s)
{
    sigset_t set;
    struct timespec zero = {0, 0};

    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    if (!s->pending)
        while (sigtimedwait(&set, NULL, &zero) == SIGPIPE) {
        }
    pthread_sigmask(SIG_SETMASK, &s->old, NULL);
}
