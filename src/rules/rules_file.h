/*
 * rules_file.h -- rule files on disk: read one whole, safely, and write
 * the last good copy atomically.
 */
#ifndef RL_RULES_FILE_H
#define RL_RULES_FILE_H

#include <stddef.h>
#include <sys/stat.h>

/*
 * Read the rule file `path` into a new NUL-terminated buffer (*out, *len
 * bytes without the NUL; free() it).  The file is opened without blocking
 * (a FIFO or a device is refused, never waited on), must be a regular
 * file, and one over RL_RULES_TEXT_MAX bytes is refused before a byte is
 * read.  *st (if not NULL) gets the file's fstat.  Returns RL_OK, or
 * RL_EIO / RL_ENOMEM with the reason in err; *too_big (if not NULL) is
 * set to 1 when the refusal is for the size, else 0.
 */
int rules_file_read(const char *path, char **out, size_t *len,
                    struct stat *st, int *too_big, char *err,
                    size_t errlen);

/*
 * Replace `path` with buf[0..len) atomically: a temp file in the same
 * directory, written and fsync()ed, renamed over path, then the directory
 * fsync()ed, so a reader (or a crash) sees the old copy or the new one,
 * never half of one.  Keeps an existing file's permission bits (new
 * files: 0644 less the umask).  Returns 0, or -1 with the reason in err.
 */
int rules_file_save(const char *path, const char *buf, size_t len,
                    char *err, size_t errlen);

#endif
