/*
 * tls_certs.h -- the certificates the TLS suites use, made by the openssl
 * command at test time in a fresh temp dir: a CA (ca.crt) and a stranger
 * CA (other.crt); server certificates from the CA for 127.0.0.1 and
 * localhost (server.crt), for redis.example only (wrongname.crt), and one
 * that expired in 2020 (expired.crt, issued with `openssl ca -startdate
 * -enddate`: `x509 -days` cannot go back in time); a client certificate
 * (client.crt, client.key).  EC P-256 keys: made in milliseconds.
 */
#ifndef RL_TLS_CERTS_H
#define RL_TLS_CERTS_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const char tls_certs_script[] =
    "cd \"$1\"\nexec 2>openssl.log\n"
    "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
    "openssl req -x509 $K -keyout ca.key -out ca.crt -days 3"
    " -subj /CN=rl-test-ca\n"
    "openssl req -x509 $K -keyout other.key -out other.crt -days 3"
    " -subj /CN=rl-stranger-ca\n"
    "openssl req $K -keyout server.key -out server.csr -subj /CN=localhost\n"
    "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext\n"
    "printf 'subjectAltName=DNS:redis.example\\n' > wrong.ext\n"
    "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key"
    " -CAcreateserial -days 3 -extfile san.ext -out server.crt\n"
    "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key"
    " -CAcreateserial -days 3 -extfile wrong.ext -out wrongname.crt\n"
    "mkdir db && : > db/index.txt && echo 1000 > db/serial\n"
    "printf '[ca]\\ndefault_ca=d\\n[d]\\ndatabase=db/index.txt\\n"
    "serial=db/serial\\nnew_certs_dir=db\\ndefault_md=sha256\\npolicy=p\\n"
    "[p]\\ncommonName=supplied\\n' > ca.cnf\n"
    "openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key"
    " -in server.csr -startdate 20200101000000Z -enddate 20200102000000Z"
    " -extfile san.ext -notext -out expired.crt\n"
    "openssl req $K -keyout client.key -out client.csr -subj /CN=rl-client\n"
    "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key"
    " -CAcreateserial -days 3 -out client.crt\n";

/* Make them in a new temp dir, its path into dir (at least 64 bytes); 0,
 * or -1 with openssl's complaint on stderr. */
static inline int tls_certs_make(char *dir, size_t len)
{
    int status = -1;
    pid_t pid;

    snprintf(dir, len, "/tmp/rl-tls-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    fflush(NULL);
    if ((pid = fork()) == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        execlp("sh", "sh", "-ec", tls_certs_script, "sh", dir, (char *)NULL);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "tls_certs: openssl failed: see %s/openssl.log\n", dir);
        return -1;
    }
    return 0;
}

/* Remove what tls_certs_make made. */
static inline void tls_certs_remove(const char *dir)
{
    pid_t pid;

    if (!dir[0])
        return;
    fflush(NULL);
    if ((pid = fork()) == 0) {
        execlp("rm", "rm", "-rf", dir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

#endif
