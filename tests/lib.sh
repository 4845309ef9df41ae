# lib.sh -- what the shell tests share (tests/exports.sh, tests/manlint.sh).
# Sourced, after the test has set top_srcdir, as
#   top_srcdir=${top_srcdir:-$(dirname "$0")/..}
#   . "$top_srcdir/tests/lib.sh"
# Sets header (the public header), counts results with pass and fail, and
# ends with summary, whose status is the test's: 0 when nothing failed.

header=$top_srcdir/include/ratelimit.h

passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# "N passed, M failed"; true when M is 0.
summary() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

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
