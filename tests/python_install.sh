#!/bin/sh
# python_install.sh -- the Python binding as a user installs it: the
# library by `make install` (into a DESTDIR of ours), the binding by pip,
# offline, into a fresh venv (python3 -m venv --system-site-packages, to
# see Debian's python3-setuptools and python3-wheel; pip install
# --no-build-isolation --no-index), then imported and used from outside
# the tree: the package comes from the venv, the library it loads is the
# installed one (found as the dynamic linker finds it: LD_LIBRARY_PATH
# stands for ldconfig's cache here), the distribution's version is the
# library's, and a limit holds.
#
# Run by `make check` from the build directory (top_srcdir, top_builddir
# in the environment).  Nothing is written to the source tree: pip builds
# from a copy.  Exit 0: pass, 1: fail, 77: skip (no python3 with venv,
# setuptools and wheel, or no shared library).
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
top_builddir=${top_builddir:-.}
python=${RATELIMIT_PYTHON:-/usr/bin/python3}
. "$top_srcdir/tests/lib.sh" # pass, fail, summary

if [ ! -x "$python" ] ||
   ! "$python" -c 'import ensurepip, venv, setuptools, wheel' 2>/dev/null; then
    echo "SKIP: $python with venv, setuptools and wheel not found" \
         "(Debian: python3-venv python3-setuptools python3-wheel)"
    exit 77
fi
if [ ! -f "$top_builddir/.libs/libratelimit.so" ]; then
    echo "SKIP: no shared library built (a static-only build?)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-pyinstall.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# ---- 1. make install ---------------------------------------------------------
if ${MAKE:-make} -s -C "$top_builddir" install DESTDIR="$tmp/dest" \
        >"$tmp/install.log" 2>&1; then
    pass "make install DESTDIR=..."
else
    fail "make install DESTDIR=... failed"
    sed 's/^/    /' "$tmp/install.log" | tail -20
    summary
    exit 1
fi
so=$(find "$tmp/dest" -name libratelimit.so.1 | head -n 1)
if [ -z "$so" ]; then
    fail "make install put no libratelimit.so.1 under DESTDIR"
    summary
    exit 1
fi
libdir=$(dirname "$so")

# ---- 2. pip install into a venv, offline --------------------------------------
cp -R "$top_srcdir/bindings/python" "$tmp/src"
chmod -R u+w "$tmp/src"
if "$python" -m venv --system-site-packages "$tmp/venv" &&
   "$tmp/venv/bin/pip" install -q --no-build-isolation --no-index \
        "$tmp/src" >"$tmp/pip.log" 2>&1; then
    pass "pip install --no-build-isolation --no-index ./bindings/python"
else
    fail "pip install of bindings/python into a venv failed"
    sed 's/^/    /' "$tmp/pip.log" | tail -20
    summary
    exit 1
fi
rm -rf "$tmp/src" # the package can come from the venv only

# ---- 3. import and use it from outside the tree ------------------------------
cat >"$tmp/use.py" <<'PY'
import importlib.metadata
import os
import sys

import ratelimit

venv, libdir = sys.argv[1], sys.argv[2]
assert ratelimit.__file__.startswith(venv + "/"), ratelimit.__file__
rules = ('{"version":1,"rules":[{"rule_id":"r","dimension":"user",'
         '"limit":3,"window_seconds":60,"algorithm":"fixed_window"}]}')
with ratelimit.Limiter("memory://", rules=rules) as lim:
    got = [bool(lim.check(endpoint="/x", user="u")) for _ in range(4)]
assert got == [True, True, True, False], got
with open("/proc/self/maps") as f:
    mapped = {line.split()[-1] for line in f if "libratelimit" in line}
assert mapped == {os.path.realpath(os.path.join(libdir, "libratelimit.so.1"))}, mapped
dist = importlib.metadata.version("libratelimit")
assert dist == ratelimit.library_version(), (dist, ratelimit.library_version())
print("imported from", ratelimit.__file__, "library", ratelimit.library_version())
PY
if out=$(cd "$tmp" && env -u RATELIMIT_LIBRARY -u PYTHONPATH \
        LD_LIBRARY_PATH="$libdir" "$tmp/venv/bin/python" "$tmp/use.py" \
        "$tmp/venv" "$libdir" 2>&1); then
    pass "import ratelimit from the venv, outside the tree: the installed" \
         "library, a limit of 3 holds ($out)"
else
    fail "the installed binding does not work from outside the tree"
    printf '%s\n' "$out" | sed 's/^/    /'
fi
summary
