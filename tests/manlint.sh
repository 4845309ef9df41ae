#!/bin/sh
# manlint.sh -- every man page (man/man*/, the library's and the tools')
# passes `mandoc -Tlint -Wwarning` without a word, and every function the
# public header exports (RL_EXPORT) has its own page man/man3/<name>.3,
# and every JSON example a page shows, rendered (mandoc -T utf8), parses
# (tests/manjson.py: a quote an mdoc macro line swallowed shows here).
#
# Run by `make check` from the build directory with top_srcdir and MANDOC
# in the environment (TESTS_ENVIRONMENT).  Exit 0: pass, 1: fail, 77: skip
# (mandoc is not installed).

top_srcdir=${top_srcdir:-$(dirname "$0")/..}
. "$top_srcdir/tests/lib.sh" # header, pass, fail, summary, exported_functions
MANDOC=${MANDOC:-mandoc}
mandir=$top_srcdir/man/man3

if ! command -v "$MANDOC" >/dev/null 2>&1; then
    echo "SKIP: mandoc not found (MANDOC=$MANDOC)"
    exit 77
fi

# ---- 1. lint every page ----------------------------------------------------
pages=0
for page in "$top_srcdir"/man/man[1-8]/*.[1-8]; do
    [ -f "$page" ] || continue
    pages=$((pages + 1))
    name=man/$(basename "$(dirname "$page")")/$(basename "$page")
    out=$("$MANDOC" -Tlint -Wwarning "$page" 2>&1)
    rc=$?
    if [ -z "$out" ] && [ "$rc" -eq 0 ]; then
        pass "lint $name"
    else
        fail "lint $name (mandoc exit $rc)"
        printf '%s\n' "$out" | sed 's/^/    /'
    fi
done
if [ "$pages" -eq 0 ]; then
    fail "no man pages in $mandir"
fi

# ---- 2. one page per exported function ---------------------------------------
if [ ! -r "$header" ]; then
    fail "cannot read $header"
else
    funcs=$(exported_functions "$header")
    if [ -z "$funcs" ]; then
        fail "found no RL_EXPORT function in $header"
    fi
    for f in $funcs; do
        if [ -f "$mandir/$f.3" ]; then
            pass "$f has man/man3/$f.3"
        else
            fail "$f is declared RL_EXPORT in include/ratelimit.h but has no man/man3/$f.3"
        fi
    done
fi

# ---- 3. every JSON example, as rendered, parses -----------------------------
python=${MANJSON_PYTHON:-/usr/bin/python3}
if [ ! -x "$python" ]; then
    fail "no $python to parse the pages' JSON examples with"
elif out=$("$python" "$top_srcdir/tests/manjson.py" "$MANDOC" \
        "$top_srcdir"/man/man[1-8]/*.[1-8]); then
    pass "every JSON example the pages show parses" \
        "($(printf '%s\n' "$out" | grep -c '^PASS'))"
else
    fail "a man page shows JSON that does not parse"
    printf '%s\n' "$out" | grep -v '^PASS' | sed 's/^/    /'
fi

summary
