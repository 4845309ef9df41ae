#!/bin/sh
# nginx_module.sh -- build ngx_http_ratelimit_module against nginx-dev
# (nginx/build.sh) and run tests/nginx_module.py on it: the system's
# /usr/sbin/nginx, curl, wrk and a private redis-server.
#
# Run by `make check` from the build directory (top_srcdir, top_builddir
# in the environment).  Exit 0: pass, 1: fail, 77: skip (nginx-dev, nginx,
# redis-server, curl, wrk or python3 missing).
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
top_builddir=${top_builddir:-.}
PYTHON=${NGINX_TEST_PYTHON:-/usr/bin/python3}
NGINX=${NGINX:-/usr/sbin/nginx}

if [ ! -f /usr/share/nginx/src/conf_flags ]; then
    echo "SKIP: nginx-dev is not installed (/usr/share/nginx/src/conf_flags)"
    exit 77
fi
for tool in "$NGINX" redis-server curl wrk bash "$PYTHON"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "SKIP: $tool not found"
        exit 77
    fi
done
bash "$top_srcdir/nginx/build.sh" "$top_builddir" || exit 1
export NGINX
exec "$PYTHON" "$top_srcdir/tests/nginx_module.py" \
    "$top_builddir/nginx/objs/ngx_http_ratelimit_module.so"
