#!/bin/sh
# manlint.sh -- every man page passes `mandoc -Tlint -Wwarning` without a
# word, and every function the public header exports (RL_EXPORT) has its
# own page man/man3/<name>.3.
#
# Run by `make check` from the build directory with top_srcdir and MANDOC
# in the environment (TESTS_ENVIRONMENT).  Exit 0: pass, 1: fail, 77: skip
# (mandoc is not installed).

top_srcdir=${top_srcdir:-$(dirname "$0")/..}
MANDOC=${MANDOC:-mandoc}
mandir=$top_srcdir/man/man3
header=$top_srcdir/include/ratelimit.h

if ! command -v "$MANDOC" >/dev/null 2>&1; then
    echo "SKIP: mandoc not found (MANDOC=$MANDOC)"
    exit 77
fi

passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# The names of the functions declared RL_EXPORT in a header: comments and
# preprocessor lines (the #define of RL_EXPORT itself) removed, the text cut
# into declarations at ';', and from each one carrying RL_EXPORT the last
# identifier before its first '('.
exported_functions() {
    awk '
    {   # drop comments, which may span lines
        line = $0; out = ""
        while (line != "") {
            if (incomment) {
                i = index(line, "*/")
                if (i == 0) { line = ""; break }
                line = substr(line, i + 2); incomment = 0
                continue
            }
            i = index(line, "/*"); j = index(line, "//")
            if (j && (!i || j < i)) { out = out substr(line, 1, j - 1); break }
            if (!i) { out = out line; break }
            out = out substr(line, 1, i - 1) " "
            line = substr(line, i + 2); incomment = 1
        }
        # drop preprocessor directives and their continuation lines
        if (cont || out ~ /^[ \t]*#/) { cont = (out ~ /\\[ \t]*$/); next }
        text = text " " out
    }
    END {
        n = split(text, decl, ";")
        for (k = 1; k <= n; k++) {
            d = " " decl[k] " "
            if (d !~ /[^A-Za-z0-9_]RL_EXPORT[^A-Za-z0-9_]/) continue
            p = index(d, "(")
            if (!p) continue
            head = substr(d, 1, p - 1)
            sub(/[ \t]+$/, "", head)
            if (match(head, /[A-Za-z_][A-Za-z0-9_]*$/))
                print substr(head, RSTART, RLENGTH)
        }
    }' "$1"
}

# ---- 1. lint every page ----------------------------------------------------
pages=0
for page in "$mandir"/*.3; do
    [ -f "$page" ] || continue
    pages=$((pages + 1))
    out=$("$MANDOC" -Tlint -Wwarning "$page" 2>&1)
    rc=$?
    if [ -z "$out" ] && [ "$rc" -eq 0 ]; then
        pass "lint man/man3/$(basename "$page")"
    else
        fail "lint man/man3/$(basename "$page") (mandoc exit $rc)"
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

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
