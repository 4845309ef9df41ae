#!/bin/sh
# run-tests.sh -- the Python binding's tests (bindings/python/tests, pytest),
# as `make check` runs them: against the library just built
# (RATELIMIT_LIBRARY=.libs/libratelimit.so of the build tree) and the
# struct layouts the C compiler reports (RATELIMIT_ABI_LAYOUT, the
# abi_layout program make check builds), with Debian's /usr/bin/python3
# (RATELIMIT_PYTHON names another).  Nothing is written to the source
# tree (no bytecode, no pytest cache), so it runs in a VPATH build of a
# read-only tree (make distcheck).
#
# Exit 0: pass, 1: fail, 77: skip (no such python3, no pytest for it, or
# no shared library was built).

top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
python=${RATELIMIT_PYTHON:-/usr/bin/python3}

if [ ! -x "$python" ] || ! "$python" -c 'import pytest' 2>/dev/null; then
    echo "SKIP: $python with pytest not found (Debian: python3-pytest)"
    exit 77
fi
lib=$top_builddir/.libs/libratelimit.so
if [ ! -f "$lib" ]; then
    echo "SKIP: $lib not built (a static-only build?)"
    exit 77
fi
abs() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd)" "$(basename "$1")"); }

RATELIMIT_LIBRARY=$(abs "$lib")
RATELIMIT_ABI_LAYOUT=$(abs "$top_builddir/bindings/python/tests/abi_layout")
PYTHONDONTWRITEBYTECODE=1
export RATELIMIT_LIBRARY RATELIMIT_ABI_LAYOUT PYTHONDONTWRITEBYTECODE
exec "$python" -m pytest -q -p no:cacheprovider \
    "$top_srcdir/bindings/python/tests"
