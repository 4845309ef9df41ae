/*
 * rules_watch.h -- noticing that a rule file changed, for the rules source
 * "file:PATH": inotify on the file's DIRECTORY (an editor that saves by
 * writing a new file and renaming it over the old one replaces the inode
 * a watch on the file would follow), plus a stat() the caller makes now
 * and then as the backstop (inotify unavailable, a file system that does
 * not report, a writer that never closes the file).
 */
#ifndef RL_RULES_WATCH_H
#define RL_RULES_WATCH_H

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>

typedef struct rwatch {
    int fd;                  /* inotify descriptor, -1 without one      */
    char dir[PATH_MAX];
    char base[NAME_MAX + 1]; /* the file's name within dir              */
    struct stat last;        /* what rwatch_changed() saw last           */
    int have_last;
} rwatch;

/* Watch `path`'s directory.  0, or -1 with the reason in err: then
 * w->fd is -1 and only rwatch_changed() notices changes. */
int rwatch_open(rwatch *w, const char *path, char *err, size_t errlen);
void rwatch_close(rwatch *w);

/* w->fd is readable: read the events; 1 if one may concern the file
 * (written and closed, renamed into place, removed), else 0. */
int rwatch_events(rwatch *w);

/* Does `st` (a fresh stat of the file) differ from the last one seen, in
 * identity, size, or modification or change time?  Remembers it. */
int rwatch_changed(rwatch *w, const struct stat *st);

#endif
