#!/bin/sh
# architecture.sh -- docs/ARCHITECTURE.md's map of src/ is the tree.
#
# The map is the first cell of the tables' rows: every `src/...` path named
# there must be a file, and every file under src/ must be named, a .c
# standing for the .h beside it (a header without a .c is named itself).
# The tree is `git ls-files src` in a checkout; in a release tarball (make
# distcheck), the .c and .h files under src/ (the build generates its Lua
# C files into gen/, not src/).
# Run by `make check` with top_srcdir set.
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
. "$top_srcdir/tests/lib.sh" # pass, fail, summary

doc=$top_srcdir/docs/ARCHITECTURE.md
tmp=${TMPDIR:-/tmp}/architecture.$$
trap 'rm -f "$tmp".*' EXIT

# The tree.
if git -C "$top_srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
   [ -n "$(git -C "$top_srcdir" ls-files src)" ]; then
    git -C "$top_srcdir" ls-files src
else
    (cd "$top_srcdir" && find src -name '*.[ch]')
fi | sort -u > "$tmp.tree"

# The map: backquoted src/ paths in the first cell of each table row.
awk -F' [|] ' '/^[|] `/ {
    cell = substr($1, 3)
    while (match(cell, /`src\/[^`]*`/)) {
        print substr(cell, RSTART + 1, RLENGTH - 2)
        cell = substr(cell, RSTART + RLENGTH)
    }
}' "$doc" | sort > "$tmp.listed"

if [ -s "$tmp.listed" ]; then
    pass "the map names $(wc -l < "$tmp.listed") files"
else
    fail "no src/ file found in $doc's tables"
fi

dups=$(uniq -d "$tmp.listed")
if [ -z "$dups" ]; then
    pass "each file is named once"
else
    fail "named more than once in $doc:" $dups
fi

# Named but not in the tree.
missing=$(comm -23 "$tmp.listed" "$tmp.tree")
if [ -z "$missing" ]; then
    pass "every file the map names is in the tree"
else
    fail "named in $doc but not in src/:" $missing
fi

# In the tree but not named (a .h is named by its .c).
sort -u "$tmp.listed" > "$tmp.named"
sed -n 's/\.c$/.h/p' "$tmp.named" | sort -u > "$tmp.implied"
sort -u "$tmp.named" "$tmp.implied" > "$tmp.covered"
unnamed=$(comm -23 "$tmp.tree" "$tmp.covered")
if [ -z "$unnamed" ]; then
    pass "every file under src/ is on the map"
else
    fail "in src/ but not on $doc's map:" $unnamed
fi

summary
