#!/bin/sh
# nginx_install.sh -- the nginx module as an operator installs it: built
# against nginx-dev (nginx/build.sh), installed by `make
# install-nginx-module` (what `make install` runs when configured
# --with-nginx-module) once with DESTDIR (the files land under it, the
# snippet names the final path) and once into a prefix of its own, whose
# snippet tests/nginx_install.py includes in the real nginx; with it, the
# shm:// region's checks (a region the workers cannot open, one a reload
# drops); and nginx/build.sh from a checkout whose path holds ".S".
#
# Run by `make check` from the build directory (top_srcdir, top_builddir
# in the environment).  Exit 0: pass, 1: fail, 77: skip (nginx-dev,
# nginx, curl or python3 missing).
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
top_builddir=${top_builddir:-.}
PYTHON=${NGINX_TEST_PYTHON:-/usr/bin/python3}
NGINX=${NGINX:-/usr/sbin/nginx}
. "$top_srcdir/tests/lib.sh" # pass, fail, summary

if [ ! -f /usr/share/nginx/src/conf_flags ]; then
    echo "SKIP: nginx-dev is not installed (/usr/share/nginx/src/conf_flags)"
    exit 77
fi
for tool in "$NGINX" curl bash "$PYTHON"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "SKIP: $tool not found"
        exit 77
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-nginx-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
make_() { ${MAKE:-make} -s -C "$top_builddir" "$@" >>"$tmp/make.log" 2>&1; }

# ---- DESTDIR: everything under it, the snippet naming the final path ------
moddir=/usr/lib/nginx/modules
confdir=/usr/share/nginx/modules-available
if make_ install-nginx-module DESTDIR="$tmp/dest" nginxmoddir="$moddir" \
        nginxconfdir="$confdir"; then
    snippet=$tmp/dest$confdir/mod-http-ratelimit.conf
    files=$(cd "$tmp/dest" && find . -type f | sort | tr '\n' ' ')
    if [ -f "$tmp/dest$moddir/ngx_http_ratelimit_module.so" ] &&
       [ "$(cat "$snippet")" = "load_module $moddir/ngx_http_ratelimit_module.so;" ] &&
       [ "$files" = "./usr/lib/nginx/modules/ngx_http_ratelimit_module.so ./usr/share/nginx/modules-available/mod-http-ratelimit.conf " ]; then
        pass "DESTDIR install: $files; the snippet: $(cat "$snippet")"
    else
        fail "DESTDIR install put: $files"
    fi
else
    fail "make install-nginx-module DESTDIR=... failed"
    tail -20 "$tmp/make.log" | sed 's/^/    /'
fi

# ---- a prefix of its own: the module nginx loads through the snippet ------
snippet=
if make_ install-nginx-module prefix="$tmp/prefix"; then
    snippet=$(find "$tmp/prefix" -name mod-http-ratelimit.conf)
    case $snippet in
    "$tmp/prefix/share/nginx/modules-available/mod-http-ratelimit.conf")
        pass "prefix install: the snippet in PREFIX/share/nginx/modules-available" ;;
    *)  fail "prefix install: the snippet is at '$snippet'" ;;
    esac
else
    fail "make install-nginx-module prefix=... failed"
    tail -20 "$tmp/make.log" | sed 's/^/    /'
fi
# ---- a checkout whose path holds ".S": nginx/build.sh from there ---------
# (nginx's auto/make took /tmp/ci3.S7lj/... for an assembler source and
# named objects no rule makes).  The tree: nginx/, include/ and the
# library's archive, in a directory named x.S1; the module built there loads.
tree=$tmp/x.S1
mkdir -p "$tree/nginx" "$tree/.libs"
cp -R "$top_srcdir/include" "$tree/" &&
cp "$top_srcdir"/nginx/config "$top_srcdir"/nginx/build.sh \
   "$top_srcdir"/nginx/*.[ch] "$tree/nginx/" &&
ln -s "$(cd "$top_builddir" && pwd)/.libs/libratelimit_core.a" "$tree/.libs/"
printf 'load_module %s;\nerror_log stderr;\npid %s;\nevents {}\n' \
    "$tree/nginx/objs/ngx_http_ratelimit_module.so" "$tmp/t.pid" >"$tmp/t.conf"
if bash "$tree/nginx/build.sh" "$tree" >"$tmp/build.log" 2>&1 &&
   "$NGINX" -t -q -p "$tmp" -e stderr -c "$tmp/t.conf" >>"$tmp/build.log" 2>&1; then
    pass "built and loaded from a checkout in $tree"
else
    fail "nginx/build.sh in $tree:"
    tail -5 "$tmp/build.log" | sed 's/^/    /'
fi
summary >/dev/null
before=$failed

so=$top_builddir/nginx/objs/ngx_http_ratelimit_module.so

"$PYTHON" "$top_srcdir/tests/nginx_install.py" "$so" $snippet
rc=$?
echo "install: $passed passed, $before failed"
[ "$rc" -eq 0 ] && [ "$before" -eq 0 ]
