/*
 * rules_file.c -- see rules_file.h.  Reading is careful about what a path
 * can name: open(O_NONBLOCK) so a FIFO cannot hang the caller, fstat()
 * on the open descriptor (no race with a rename between stat and open),
 * a size cap checked before any memory is taken.  Writing is the usual
 * temp-file-and-rename, with the fsyncs that make it survive a crash.
 */
#include "rules_file.h"
#include "ratelimit.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAIL(code, ...) (snprintf(err, errlen, __VA_ARGS__), (code))

/* Read exactly up to `size` bytes, and see whether there is one more: a
 * file that grew while read is an error (we would parse half a write). */
static int read_all(int fd, char *buf, size_t size, size_t *got)
{
    size_t n = 0;

    while (n <= size) {
        ssize_t r = read(fd, buf + n, size + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *got = n;
    return 0;
}

int rules_file_read(const char *path, char **out, size_t *len,
                    struct stat *st, int *too_big, char *err, size_t errlen)
{
    struct stat sb;
    char *buf;
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

    if (too_big)
        *too_big = 0;
    if (fd < 0)
        return FAIL(RL_EIO, "%.200s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return FAIL(RL_EIO, "%.200s: not a regular file", path);
    }
    if (st)
        *st = sb;
    if (sb.st_size > RL_RULES_TEXT_MAX) {
        close(fd);
        if (too_big)
            *too_big = 1;
        return FAIL(RL_EIO, "%.200s: %lld bytes, more than the %d MiB a "
                    "rule set may have", path, (long long)sb.st_size,
                    RL_RULES_TEXT_MAX >> 20);
    }
    if (!(buf = malloc((size_t)sb.st_size + 2))) {
        close(fd);
        return FAIL(RL_ENOMEM, "reading %.200s: out of memory", path);
    }
    if (read_all(fd, buf, (size_t)sb.st_size, &n) != 0 ||
        n > (size_t)sb.st_size) {
        int e = errno;
        close(fd);
        free(buf);
        return n > (size_t)sb.st_size
                   ? FAIL(RL_EIO, "%.200s: changed while read", path)
                   : FAIL(RL_EIO, "%.200s: read error: %s", path,
                          strerror(e));
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return RL_OK;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The directory part of path, into dir (PATH_MAX). */
static void dir_of(const char *path, char *dir)
{
    char copy[PATH_MAX];

    snprintf(copy, sizeof copy, "%s", path);
    snprintf(dir, PATH_MAX, "%s", dirname(copy));
}

int rules_file_save(const char *path, const char *buf, size_t len,
                    char *err, size_t errlen)
{
    static _Atomic unsigned seq;
    char dir[PATH_MAX], tmp[PATH_MAX + 48];
    struct stat sb;
    int fd, dfd, keep = stat(path, &sb) == 0;

    if (strlen(path) >= PATH_MAX - 1)
        return FAIL(-1, "rules_file: path too long");
    dir_of(path, dir);
    /* O_EXCL with a name no other writer uses; 0644 less the umask, as
     * any new file (umask() itself would race with other threads) */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add(&seq, 1));
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
        return FAIL(-1, "%.200s: cannot create a temp file: %s", dir,
                    strerror(errno));
    if ((keep && fchmod(fd, sb.st_mode & 07777) != 0) ||
        write_all(fd, buf, len) != 0 ||
        fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return FAIL(-1, "%.200s: cannot write: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return FAIL(-1, "%.200s: cannot rename into place: %s", path,
                    strerror(e));
    }
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        fsync(dfd); /* the rename itself, durable */
        close(dfd);
    }
    return 0;
}
