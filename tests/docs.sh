#!/bin/sh
# docs.sh -- the front page and the guides cannot rot unseen:
#   1. README.md shows examples/readme_example.c verbatim (the ```c block
#      whose first line names the file);
#   2. that program, built by make, prints five admissions and then the 429
#      a client gets (status line, Retry-After, the JSON body);
#   3. the README's API table has a row for every function the public
#      header exports, linked to its man page;
#   4. every relative link of README.md and docs/*.md names a file of the
#      source tree, and every #anchor a heading of the file it points into;
#   5. every page of the project's own that they name as name(N) (rl_*,
#      ratelimit, ratelimitd, rlctl, the nginx module) is in man/manN.
#
# Run by `make check` with top_srcdir and top_builddir in the environment
# (TESTS_ENVIRONMENT).  Exit 0: pass, 1: fail.

top_srcdir=${top_srcdir:-$(dirname "$0")/..}
top_builddir=${top_builddir:-.}
. "$top_srcdir/tests/lib.sh" # header, pass, fail, summary, exported_functions
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# ---- 1. the example as the README shows it ----------------------------------
awk '/^```c$/ { getline; if ($0 ~ /^\/\* readme_example\.c /) { on = 1 } else next }
     on && /^```$/ { exit }
     on { print }' "$top_srcdir/README.md" >"$tmp/shown.c"
if [ -s "$tmp/shown.c" ] && cmp -s "$tmp/shown.c" "$top_srcdir/examples/readme_example.c"; then
    pass "README.md shows examples/readme_example.c verbatim"
else
    fail "README.md's example differs from examples/readme_example.c:"
    diff "$top_srcdir/examples/readme_example.c" "$tmp/shown.c"
fi

# ---- 2. the example runs as the README says --------------------------------
if "$top_builddir/examples/readme_example" >"$tmp/out" 2>&1 &&
    [ "$(grep -c '^request [1-5]: 200 OK' "$tmp/out")" -eq 5 ] &&
    grep -q '^request 6: HTTP/1.1 429 Too Many Requests' "$tmp/out" &&
    grep -q '^Retry-After: [1-9]' "$tmp/out" &&
    grep -q '"error":"rate_limited"' "$tmp/out"; then
    pass "examples/readme_example: 5 admitted, then the 429"
else
    fail "examples/readme_example printed:"
    cat "$tmp/out"
fi

# ---- 3. a row per public function in the README's API table -------------
missing=""
for f in $(exported_functions "$header"); do
    grep -q "^| \[\`$f\`\](man/man3/$f.3)" "$top_srcdir/README.md" || missing="$missing $f"
done
if [ -z "$missing" ]; then
    pass "README.md's API table has a row per exported function"
else
    fail "README.md's API table leaves out:$missing"
fi

# ---- 4. relative links and anchors resolve ----------------------------------
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: links (no python3)"
else
    if python3 - "$top_srcdir" <<'PY'
import os, re, sys
top = sys.argv[1]
docs = ["README.md", "bindings/python/README.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(top, "docs")))
                        if f.endswith(".md")]
def slugs(path):
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            t = line.lstrip("#").strip().lower()
            t = re.sub(r"[^\w\- ]", "", t).replace(" ", "-")
            out.add(t)
    return out
bad = 0
for doc in docs:
    path = os.path.join(top, doc)
    text = re.sub(r"```.*?```", "", open(path, encoding="utf-8").read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            print("FAIL: %s: link %s: no such file" % (doc, target)); bad += 1
        elif anchor and dest.endswith(".md") and anchor not in slugs(dest):
            print("FAIL: %s: link %s: no such heading" % (doc, target)); bad += 1
sys.exit(1 if bad else 0)
PY
    then
        pass "relative links of README.md and docs/*.md resolve"
    else
        fail "a relative link does not resolve (above)"
    fi
fi

# ---- 5. the man pages the docs name exist -------------------------------
missing=""
for ref in $(cat "$top_srcdir/README.md" "$top_srcdir"/docs/*.md |
    grep -o '\b\(rl_[a-z0-9_]*\|ratelimit\|ratelimitd\|rlctl\|ngx_http_ratelimit_module\)([1-8])' |
    sort -u); do
    name=${ref%(*}; sec=${ref#*(}; sec=${sec%)}
    [ -f "$top_srcdir/man/man$sec/$name.$sec" ] || missing="$missing $ref"
done
if [ -z "$missing" ]; then
    pass "every man page README.md and docs/*.md name exists"
else
    fail "README.md or docs/*.md name man pages that do not exist:$missing"
fi

summary
