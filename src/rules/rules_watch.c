/*
 * rules_watch.c -- see rules_watch.h.  The events that matter: a write
 * finished (IN_CLOSE_WRITE: "cat > rules.json", an editor writing in
 * place), a file renamed into place (IN_MOVED_TO: the rename-replace of
 * editors and of rules_file_save), and the file going away (IN_DELETE,
 * IN_MOVED_FROM).  IN_MODIFY is left out on purpose: it fires mid-write,
 * when the file holds half a rule set.
 */
#include "rules_watch.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#define WATCH_MASK                                                         \
    (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |             \
     IN_DELETE_SELF | IN_MOVE_SELF)

int rwatch_open(rwatch *w, const char *path, char *err, size_t errlen)
{
    char a[PATH_MAX], b[PATH_MAX];

    memset(w, 0, sizeof *w);
    w->fd = -1;
    snprintf(a, sizeof a, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    snprintf(w->dir, sizeof w->dir, "%s", dirname(a));
    snprintf(w->base, sizeof w->base, "%s", basename(b));
    if ((w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
        snprintf(err, errlen, "inotify: %s", strerror(errno));
        return -1;
    }
    if (inotify_add_watch(w->fd, w->dir, WATCH_MASK) < 0) {
        snprintf(err, errlen, "inotify on %.200s: %s", w->dir,
                 strerror(errno));
        close(w->fd);
        w->fd = -1;
        return -1;
    }
    return 0;
}

void rwatch_close(rwatch *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
}

int rwatch_events(rwatch *w)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int hit = 0;
    ssize_t n;

    while ((n = read(w->fd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const void *)p;
            /* the directory itself moved or went: only stat can tell */
            if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_Q_OVERFLOW)) ||
                (ev->len && strcmp(ev->name, w->base) == 0))
                hit = 1;
            p += sizeof *ev + ev->len;
        }
    }
    return hit;
}

int rwatch_changed(rwatch *w, const struct stat *st)
{
    int changed = !w->have_last || st->st_dev != w->last.st_dev ||
                  st->st_ino != w->last.st_ino ||
                  st->st_size != w->last.st_size ||
                  st->st_mtim.tv_sec != w->last.st_mtim.tv_sec ||
                  st->st_mtim.tv_nsec != w->last.st_mtim.tv_nsec ||
                  st->st_ctim.tv_sec != w->last.st_ctim.tv_sec ||
                  st->st_ctim.tv_nsec != w->last.st_ctim.tv_nsec;

    w->last = *st;
    w->have_last = 1;
    return changed;
}
