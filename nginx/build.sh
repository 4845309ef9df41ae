#!/bin/bash
# build.sh -- build ngx_http_ratelimit_module.so for the system's nginx.
#
#   nginx/build.sh [TOP_BUILDDIR]
#
# The way Debian builds dynamic modules for its packaged nginx (dh's
# nginx_mod build system): nginx-dev's /usr/share/nginx/src configured with
# the package's own flags (conf_flags: --with-compat among them) plus
# --add-dynamic-module=this folder, objects in a build directory of ours,
# then `make modules`.  The module links the library statically, from the
# libtool convenience archive of TOP_BUILDDIR (default: the source tree):
# its objects are PIC, and none of its symbols is exported from the module
# (nginx/config: --exclude-libs), so the .so carries its own libratelimit,
# whatever (if any) libratelimit.so.1 is installed, and loads from anywhere
# without an rpath into a build tree.
# The result: TOP_BUILDDIR/nginx/objs/ngx_http_ratelimit_module.so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/.." && pwd)
top_builddir=$(cd "${1:-$top_srcdir}" && pwd)
nginx_src=${NGINX_SRC:-/usr/share/nginx/src}
objs=$top_builddir/nginx/objs

if [ ! -f "$nginx_src/conf_flags" ]; then
    echo "nginx/build.sh: $nginx_src/conf_flags not found (install nginx-dev)" >&2
    exit 77
fi
lib=$top_builddir/.libs/libratelimit_core.a
if [ ! -f "$lib" ]; then
    echo "nginx/build.sh: $lib not found: build the library first (make)" >&2
    exit 1
fi
# shellcheck disable=SC1091
. "$nginx_src/conf_flags"
cflags="-g -O2 -fPIC"
ldflags="-fPIC"
if command -v dpkg-buildflags >/dev/null; then
    cflags="$(dpkg-buildflags --get CFLAGS) -fPIC $(dpkg-buildflags --get CPPFLAGS)"
    ldflags="$(dpkg-buildflags --get LDFLAGS) -fPIC"
fi
deplibs=$(pkg-config --libs hiredis jansson openssl)
mkdir -p "$objs"
# One build of a tree's module at a time: make check runs the suites that
# build it (tests/nginx_module.sh, tests/nginx_install.sh, make install's)
# side by side.
if command -v flock >/dev/null; then
    exec 9>"$objs/.build.lock"
    flock 9
fi
# nginx's auto/make finds object names with regexes ([^ ]*\.)c, ...S over
# whole paths: a build directory with ".S" (or ".c", ".cc", ".cpp") in its
# path, as in a clone in /tmp/ci3.S7lj, yields targets no rule makes.  So
# configure sees this folder and the build directory through symlinks in a
# private directory without a dot, and the files it writes get the real
# paths back (make itself does not care about dots).
configure_nginx() {
    local base=${TMPDIR:-/tmp} link f text
    case $base in *.*) base=/tmp ;; esac
    link=$(mktemp -d "$base/rlngxXXXXXX") || return 1
    case $link in *.*) rm -rf "$link"; echo "nginx/build.sh: $link has a dot" >&2; return 1 ;; esac
    ln -s "$here" "$link/addon" && ln -s "$objs" "$link/objs" &&
    (cd "$nginx_src" &&
     RATELIMIT_INC="$top_srcdir/include" RATELIMIT_LIB="$lib" \
     RATELIMIT_DEPLIBS="$deplibs -lpthread -lm" \
     ./configure --with-cc-opt="$cflags" --with-ld-opt="$ldflags" \
        "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$link/addon" \
        --builddir="$link/objs") >"$objs/configure.log" 2>&1 || {
        rm -rf "$link"
        tail -30 "$objs/configure.log" >&2
        return 1
    }
    for f in "$objs/Makefile" "$objs/ngx_auto_config.h"; do
        text=$(<"$f")
        text=${text//"$link/objs"/"$objs"}
        printf '%s\n' "${text//"$link/addon"/"$here"}" >"$f"
    done
    rm -rf "$link"
}
if [ ! -f "$objs/Makefile" ] || [ "$here/config" -nt "$objs/Makefile" ]; then
    configure_nginx || exit 1
fi
# The archive is a prerequisite of nothing in nginx's Makefile: relink
# when it is newer than the module.
so=$objs/ngx_http_ratelimit_module.so
if [ -f "$so" ] && [ "$lib" -nt "$so" ]; then rm -f "$so"; fi
make -s -f "$objs/Makefile" -C "$nginx_src" modules
echo "nginx/build.sh: built $so"
