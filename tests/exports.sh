#!/bin/sh
# exports.sh -- the shared library exports its public API and nothing else:
#   - every exported symbol starts with "rl_";
#   - every exported symbol is a function declared RL_EXPORT in
#     include/ratelimit.h, and every such function is exported;
#   - no exported symbol is also exported by GNU Readline, whose public
#     names share the rl_ prefix: a program linking both libraries would
#     get one of the two definitions for both users.
#
# Run by `make check` from the build directory with top_srcdir and
# top_builddir in the environment (TESTS_ENVIRONMENT).  NM may name another
# nm.  Exit 0: pass, 1: fail, 77: skip (no shared library was built).

top_srcdir=${top_srcdir:-$(dirname "$0")/..}
. "$top_srcdir/tests/lib.sh" # header, pass, fail, summary, exported_functions
top_builddir=${top_builddir:-.}
NM=${NM:-nm}
lib=$top_builddir/.libs/libratelimit.so

# Defined dynamic symbols of a shared object, one per line, sorted, without
# symbol versions (name@@VER) and without version-definition entries
# (type A), which name a version node, not a symbol.
dynamic_symbols() {
    "$NM" -D --defined-only "$1" |
        awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' |
        LC_ALL=C sort -u
}

# ---- the library -------------------------------------------------------------
if [ ! -f "$lib" ]; then
    la=$top_builddir/libratelimit.la
    if [ -f "$la" ] && grep -q "^dlname=''" "$la"; then
        echo "SKIP: no shared library was built ($la has no dlname)"
        exit 77
    fi
    echo "FAIL: $lib not found; build it first (make libratelimit.la)"
    echo "0 passed, 1 failed"
    exit 1
fi
if ! command -v "$NM" >/dev/null 2>&1; then
    echo "FAIL: $NM not found"
    echo "0 passed, 1 failed"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/exports.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT PIPE TERM

if ! dynamic_symbols "$lib" >"$tmp/ours" || [ ! -s "$tmp/ours" ]; then
    echo "FAIL: $NM -D --defined-only $lib listed no symbol"
    echo "0 passed, 1 failed"
    exit 1
fi
exported_functions "$header" | LC_ALL=C sort -u >"$tmp/declared"

echo "library:  $lib: $(wc -l <"$tmp/ours") exported symbols"
echo "header:   $header: $(wc -l <"$tmp/declared") RL_EXPORT functions"
[ -s "$tmp/declared" ] || fail "found no RL_EXPORT function in $header"

# ---- GNU Readline --------------------------------------------------------------
readline=
for ldc in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
    if command -v "$ldc" >/dev/null 2>&1; then
        readline=$("$ldc" -p 2>/dev/null |
            awk '$1 == "libreadline.so.8" { print $NF; exit }')
        [ -n "$readline" ] && break
    fi
done
if [ -z "$readline" ] || [ ! -f "$readline" ]; then
    readline=
    for f in /usr/lib/*/libreadline.so.8 /lib/*/libreadline.so.8 \
             /usr/lib/libreadline.so.8 /usr/lib64/libreadline.so.8; do
        if [ -f "$f" ]; then
            readline=$f
            break
        fi
    done
fi
if [ -n "$readline" ]; then
    dynamic_symbols "$readline" >"$tmp/readline"
    echo "readline: $readline: $(wc -l <"$tmp/readline") exported symbols," \
         "$(grep -c '^rl_' "$tmp/readline") of them rl_*"
else
    echo "readline: libreadline.so.8 not installed; skipping the clash check"
    : >"$tmp/readline"
fi

# ---- each exported symbol -------------------------------------------------------
while read -r sym; do
    why=
    case $sym in
    rl_*) ;;
    *) why="$why; does not start with rl_" ;;
    esac
    grep -qxF "$sym" "$tmp/declared" ||
        why="$why; not declared RL_EXPORT in include/ratelimit.h"
    grep -qxF "$sym" "$tmp/readline" &&
        why="$why; also exported by $readline"
    if [ -z "$why" ]; then
        pass "$sym${readline:+ (not in readline)}"
    else
        fail "$sym${why}"
    fi
done <"$tmp/ours"

# ---- each declared function is exported ---------------------------------------------
while read -r fn; do
    if grep -qxF "$fn" "$tmp/ours"; then
        pass "$fn (declared) is exported"
    else
        fail "$fn is declared RL_EXPORT in include/ratelimit.h but not exported"
    fi
done <"$tmp/declared"

summary
