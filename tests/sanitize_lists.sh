#!/bin/sh
# sanitize_lists.sh -- the sanitizer and valgrind runs test what the build
# builds.  tests/sanitize.sh generates the library's embedded scripts itself
# (its own lua/embed.sh calls): for each script symbol (rl_lua_check,
# rl_lua_check_test, rl_lua_library) it must embed the same lua/ files in
# the same order as Makefile.am's rule (a file left out once gave the
# sanitizer builds a script without the lean path's function, and
# check_lua failed only there).  And tests/valgrind.sh runs a list of
# suites: every tests/check_*.c must be on it or named in its comment with
# the reason it is left out or narrowed (suites added without either once
# never ran under memcheck).  Run by `make check` with top_srcdir set.
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
. "$top_srcdir/tests/lib.sh" # pass, fail, summary

mk=$top_srcdir/Makefile.am
san=$top_srcdir/tests/sanitize.sh
vg=$top_srcdir/tests/valgrind.sh

# A file's lines with their backslash continuations joined.
joined() {
    sed -e ':a' -e '/\\$/N' -e 's/\\\n/ /' -e 'ta' "$1"
}

# The value of `NAME = ...` in Makefile.am, or of `NAME="..."` in a script.
mk_var() {
    joined "$mk" | sed -n "s/^$1 *= *//p"
}
sh_var() {
    joined "$san" | sed -n "s/^$1=\"\\(.*\\)\"\$/\\1/p"
}

# The embed.sh line of symbol $2 in file $1 (its variables expanded), as
# its lua/ files and `--` separators, one a line.
embedded() {
    joined "$1" | grep 'embed\.sh' | grep "[ ]$2[ ]" |
        sed -e "s|\$(LUA_ALGOS_SRC)|$(mk_var LUA_ALGOS_SRC)|g" \
            -e "s|\$lua |$(sh_var lua) |g" -e "s|\$algos |$(sh_var algos) |g" |
        grep -o 'lua/[a-z_]*\.lua\| -- ' | sed 's/ //g'
}

tmp=${TMPDIR:-/tmp}/sanitize_lists.$$
trap 'rm -f "$tmp".*' EXIT
syms=$(joined "$mk" | grep 'embed\.sh' | grep -o 'rl_lua_[a-z_]*' | sort -u)
[ -n "$syms" ] || fail "Makefile.am: no embed.sh rule found"
for sym in $syms; do
    embedded "$mk" "$sym" >"$tmp.mk"
    embedded "$san" "$sym" >"$tmp.san"
    if [ ! -s "$tmp.san" ]; then
        fail "tests/sanitize.sh does not generate $sym"
    elif cmp -s "$tmp.mk" "$tmp.san"; then
        pass "$sym: tests/sanitize.sh embeds Makefile.am's $(grep -c . "$tmp.mk") files"
    else
        fail "$sym: tests/sanitize.sh embeds $(echo $(cat "$tmp.san")), Makefile.am $(echo $(cat "$tmp.mk"))"
    fi
done

for f in "$top_srcdir"/tests/check_*.c; do
    name=$(basename "$f" .c)
    if grep -q "^$name\( \|\$\)" "$vg"; then
        pass "$name runs under valgrind"
    elif grep -q "^#.*[^a-z_]$name\([^a-z_]\|\$\)" "$vg"; then
        pass "$name: tests/valgrind.sh says why it is left out"
    else
        fail "$name: neither on tests/valgrind.sh's list nor named in its comment"
    fi
done
summary
