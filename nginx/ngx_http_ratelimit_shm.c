/*
 * ngx_http_ratelimit_shm.c -- the shm:// region of the module's store,
 * seen from the master: checked before any worker needs it, removed when
 * the master exits.
 *
 * The workers make and open the region (/dev/shm/NAME) as the workers'
 * user; the master never opens it (made by root, mode 0600, it would shut
 * the workers out).  A region left by another user (a root rlctl check, an
 * nginx of another user) cannot be opened by the workers: each would exit
 * at its start and the master would go on listening with no worker, so
 * clients hang.  The configuration's check (after the http block is read,
 * so for `nginx -t`, a start and a reload alike) refuses it instead, with
 * the region, its owner and the workers' user.
 *
 * The master removes at its exit every region its workers used since it
 * started: the one configured now and any that a reload dropped (kept
 * until then: the old workers may still count in it while they finish).
 * The names live in this file's static table, which reloads keep (the
 * module stays loaded in the master across them).
 *
 * Copyright (c) 2026 the libratelimit developers.  MIT licence.
 */
#include "ngx_http_ratelimit.h"

#include <grp.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* Where POSIX shared memory objects live on Linux (shm_open(3)). */
#define NGX_HTTP_RATELIMIT_SHM_DIR "/dev/shm/"

/* The groups of the workers' user looked at (getgrouplist(3)); a user in
 * more is judged by the first ones. */
#define NGX_HTTP_RATELIMIT_GROUPS_MAX 256

/* Regions one master removes at its exit; past this many distinct names
 * in its life, the newest replace the oldest (logged). */
#define NGX_HTTP_RATELIMIT_SHM_KEPT 16

static char ngx_http_ratelimit_regions[NGX_HTTP_RATELIMIT_SHM_KEPT]
                                      [NGX_HTTP_RATELIMIT_SHM_NAME_MAX + 2];
static ngx_uint_t ngx_http_ratelimit_nregions;

/* The region's name ("/NAME", for shm_open and shm_unlink) of mcf's store
 * into buf; 0 when the store is no shm:// region. */
static size_t ngx_http_ratelimit_region(ngx_http_ratelimit_main_conf_t *mcf,
                                        char *buf)
{
    size_t n = sizeof(NGX_HTTP_RATELIMIT_SHM_SCHEME) - 1;

    if (mcf == NULL || !mcf->used || mcf->store.len <= n ||
        mcf->store.len - n > NGX_HTTP_RATELIMIT_SHM_NAME_MAX ||
        ngx_strncmp(mcf->store.data, NGX_HTTP_RATELIMIT_SHM_SCHEME, n) != 0)
        return 0;
    /* the name was checked by the library (letters, digits, . _ -) */
    ngx_snprintf((u_char *)buf, NGX_HTTP_RATELIMIT_SHM_NAME_MAX + 2, "/%*s%Z",
                 mcf->store.len - n, mcf->store.data + n);
    return mcf->store.len - n + 1;
}

/* The user and group the workers will run as: the `user` directive (read
 * before the http block), else nginx's default for a root master (NGX_USER,
 * as the core module's configuration does), else the master's own. */
static ngx_int_t ngx_http_ratelimit_worker_ids(ngx_conf_t *cf, uid_t *uid,
                                               gid_t *gid, const char **name)
{
    ngx_core_conf_t *ccf;
    struct passwd *pw;

    ccf = (ngx_core_conf_t *)ngx_get_conf(cf->cycle->conf_ctx,
                                          ngx_core_module);
    if (ccf->user != (ngx_uid_t)NGX_CONF_UNSET_UINT) {
        *uid = ccf->user;
        *gid = ccf->group;
        *name = ccf->username;
        return NGX_OK;
    }
    *uid = geteuid();
    *gid = getegid();
    *name = NULL;
#ifdef NGX_USER
    if (*uid == 0) {
        pw = getpwnam(NGX_USER);
        if (pw == NULL)
            return NGX_DECLINED; /* nginx itself will refuse the start */
        *uid = pw->pw_uid;
        *gid = pw->pw_gid;
        *name = NGX_USER;
    }
#else
    (void)pw;
#endif
    return NGX_OK;
}

/* Whether user (uid, primary group gid, and the groups initgroups() will
 * give the workers, when the user has a name) may read and write a file
 * of st, as the kernel decides. */
static ngx_int_t ngx_http_ratelimit_can_rw(const struct stat *st, uid_t uid,
                                           gid_t gid, const char *user)
{
    gid_t groups[NGX_HTTP_RATELIMIT_GROUPS_MAX];
    int n = NGX_HTTP_RATELIMIT_GROUPS_MAX, i, member = st->st_gid == gid;
    mode_t need;

    if (uid == 0)
        return 1;
    if (!member && st->st_uid != uid && user != NULL &&
        getgrouplist(user, gid, groups, &n) >= 0)
        for (i = 0; i < n && !member; i++)
            member = groups[i] == st->st_gid;
    need = st->st_uid == uid ? (S_IRUSR | S_IWUSR)
           : member          ? (S_IRGRP | S_IWGRP)
                             : (S_IROTH | S_IWOTH);
    return (st->st_mode & need) == need;
}

ngx_int_t ngx_http_ratelimit_shm_check(ngx_conf_t *cf,
                                       ngx_http_ratelimit_main_conf_t *mcf)
{
    char name[NGX_HTTP_RATELIMIT_SHM_NAME_MAX + 2];
    char path[sizeof(NGX_HTTP_RATELIMIT_SHM_DIR) +
              NGX_HTTP_RATELIMIT_SHM_NAME_MAX];
    struct stat st;
    struct passwd *owner;
    const char *user;
    uid_t uid;
    gid_t gid;

    if (ngx_http_ratelimit_region(mcf, name) == 0 ||
        ngx_http_ratelimit_worker_ids(cf, &uid, &gid, &user) != NGX_OK)
        return NGX_OK;
    ngx_snprintf((u_char *)path, sizeof(path), NGX_HTTP_RATELIMIT_SHM_DIR
                 "%s%Z", name + 1);
    if (stat(path, &st) != 0)
        return NGX_OK; /* the first worker makes it */
    if (ngx_http_ratelimit_can_rw(&st, uid, gid, user))
        return NGX_OK;
    owner = getpwuid(st.st_uid);
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "ratelimit: store \"%V\": %s "
                       "belongs to %s (uid %d, mode 0%d%d%d) and the workers' "
                       "user %s (uid %d) cannot open it: remove it (rm %s) "
                       "or give ratelimit_store another name",
                       &mcf->store, path,
                       owner ? owner->pw_name : "another user",
                       (int)st.st_uid, (int)(st.st_mode >> 6) & 7,
                       (int)(st.st_mode >> 3) & 7, (int)st.st_mode & 7,
                       user ? user : "", (int)uid, path);
    return NGX_ERROR;
}

ngx_int_t ngx_http_ratelimit_init_module(ngx_cycle_t *cycle)
{
    ngx_http_ratelimit_main_conf_t *mcf;
    char name[NGX_HTTP_RATELIMIT_SHM_NAME_MAX + 2];
    ngx_uint_t i, n = ngx_http_ratelimit_nregions;

    mcf = ngx_http_cycle_get_module_main_conf(cycle,
                                              ngx_http_ratelimit_module);
    if (ngx_http_ratelimit_region(mcf, name) == 0)
        return NGX_OK;
    for (i = 0; i < n && i < NGX_HTTP_RATELIMIT_SHM_KEPT; i++)
        if (ngx_strcmp(ngx_http_ratelimit_regions[i], name) == 0)
            return NGX_OK;
    if (n >= NGX_HTTP_RATELIMIT_SHM_KEPT)
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0, "ratelimit: more than %d "
                      "shm regions in this master's life: \"%s\" is left in "
                      "/dev/shm at exit", NGX_HTTP_RATELIMIT_SHM_KEPT,
                      ngx_http_ratelimit_regions[n % NGX_HTTP_RATELIMIT_SHM_KEPT]);
    ngx_cpystrn((u_char *)ngx_http_ratelimit_regions[n %
                                                     NGX_HTTP_RATELIMIT_SHM_KEPT],
                (u_char *)name, sizeof(name));
    ngx_http_ratelimit_nregions = n + 1;
    return NGX_OK;
}

void ngx_http_ratelimit_exit_master(ngx_cycle_t *cycle)
{
    ngx_uint_t i;
    const char *name;

    for (i = 0; i < ngx_http_ratelimit_nregions &&
                i < NGX_HTTP_RATELIMIT_SHM_KEPT; i++) {
        name = ngx_http_ratelimit_regions[i];
        if (shm_unlink(name) != 0 && ngx_errno != NGX_ENOENT)
            ngx_log_error(NGX_LOG_WARN, cycle->log, ngx_errno,
                          "ratelimit: shm_unlink(\"%s\")", name);
    }
    ngx_http_ratelimit_nregions = 0;
}
