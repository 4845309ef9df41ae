#!/bin/sh
# valgrind.sh -- the libtool-built check suites under valgrind's memcheck:
#   valgrind.sh            every suite of the list below, two at a time
#   valgrind.sh NAME...    only those (check_algo, check_redis, ...)
# `make valgrind` builds the suites and runs this.  Where sanitize.sh
# recompiles the sources with a sanitizer, this checks the build that ships:
# each suite goes through `libtool --mode=execute`, so a suite linked with
# libratelimit.la (check_abi) runs the real libratelimit.so, and the others
# run the library's own objects (libratelimit_core.la, the same -O2 code).
#
# Check forks each test; valgrind follows a fork by itself, and each process
# writes its own log, $out/NAME.PID.vg.  A test child that ends with an error
# exits with VG_ERROR_EXIT, which Check reports as that test's error ("early
# exit"), so the suite fails; besides, every log's ERROR SUMMARY is read, so a
# process whose exit status nobody looks at (a helper child) fails it too.
# Leaks: definite and indirect ones are errors; "possibly lost" is not (a
# pointer into the middle of a block, which the hash tables and the Lua
# arenas hold on purpose), nor "still reachable" (what a test child leaves to
# exit()).  Processes that a suite execs (redis-server, redis-sentinel,
# openssl, ratelimitd, rlctl) run natively: no --trace-children.
#
# The suites run 20-50 times slower under memcheck: CK_TIMEOUT_MULTIPLIER
# stretches Check's per-test timeouts; what valgrind cannot stretch (a test
# that wants a 20 ms timeout against a hung server to fire, a deadline a
# busy I/O thread must keep) is left out below, each with its reason.
set -eu
src=${top_srcdir:-.}
build=${top_builddir:-.}
out=build-san/valgrind
VG_ERROR_EXIT=97
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10}
# LIBTOOL may be a command with words ("/bin/bash ./libtool"): unquoted.
LIBTOOL=${LIBTOOL:-$build/libtool}
VALGRIND=${VALGRIND:-valgrind}

# One suite: NAME, then the log of its output in $out/NAME.log and a line
# "NAME  SECONDS  ok|FAILED (why)" on stdout.
run_one() {
    name=$1
    rm -f "$out/$name".*.vg
    start=$(date +%s)
    set +e
    $LIBTOOL --mode=execute "$VALGRIND" --tool=memcheck \
        --error-exitcode=$VG_ERROR_EXIT --leak-check=full \
        --show-leak-kinds=definite,indirect \
        --errors-for-leak-kinds=definite,indirect \
        --num-callers=30 --suppressions="$src/tests/valgrind.supp" \
        --log-file="$out/$name.%p.vg" \
        "$build/tests/$name" >"$out/$name.log" 2>&1
    rc=$?
    set -e
    secs=$(($(date +%s) - start))
    bad=$(grep -l 'ERROR SUMMARY: [1-9]' "$out/$name".*.vg 2>/dev/null || true)
    if [ "$rc" -eq 0 ] && [ -z "$bad" ]; then
        printf '%-28s %4ss  ok\n' "$name" "$secs"
        return 0
    fi
    printf '%-28s %4ss  FAILED (exit %s, %s process(es) with errors)\n' \
        "$name" "$secs" "$rc" "$(echo "$bad" | grep -c . || true)"
    {
        echo "==== valgrind: $name failed; its output ($out/$name.log):"
        grep -v '^$' "$out/$name.log" | tail -30
        for f in $bad; do
            echo "==== $f"
            cat "$f"
        done
    } >"$out/$name.failed"
    return 1
}

if [ "${1:-}" = --one ]; then
    shift
    # Each suite's own CK_* narrowing, from the list below.
    suite=$1; shift
    for kv in "$@"; do export "$kv"; done
    run_one "$suite"
    exit
fi

# The suites, one a line: NAME, then the CK_* settings that narrow it.
# Every suite is here but those left out in the comments, with the reason.
suites() {
    cat <<'EOF'
check_abi
check_acl
check_algo
check_async
check_async_loops
check_breaker
check_contention
check_denycache
check_dims
check_dryrun
check_functions
check_harness
check_headers
check_headers_ietf
check_lease
check_limiter
check_lua
check_match
check_memory
check_messages
check_metrics
check_events
check_options
check_redis
check_reserve
check_rule_json
check_rulechange
check_rules
check_rules_source
check_ruleset_delta
check_shm
check_sliding_log
check_tls
check_cluster
check_deadline
check_sentinel
check_ratelimitd
check_ratelimitd_durable
check_control
EOF
}

mkdir -p "$out"
if [ $# -gt 0 ]; then
    list=$(for n in "$@"; do suites | grep "^$n\( \|$\)" || echo "$n"; done)
else
    list=$(suites)
fi
# Suites configure did not build (no libevent/libuv, no ratelimitd) are
# skipped, as make check skips them.
list=$(echo "$list" | while read -r name rest; do
    if [ -x "$build/tests/$name" ]; then echo "$name${rest:+ $rest}"
    else echo "valgrind.sh: $name not built: skipped" >&2; fi
done)
rm -f "$out"/*.failed
start=$(date +%s)
set +e
echo "$list" | xargs -P2 -L1 sh "$0" --one
set -e
total=$(($(date +%s) - start))
n=$(echo "$list" | grep -c .)
# The failed suites' reports last, where a CI log's tail shows them.
failed=
for f in "$out"/*.failed; do
    [ -f "$f" ] || continue
    cat "$f"
    name=$(basename "$f" .failed)
    failed="${failed:+$failed }$name"
done
nf=$(echo "$failed" | wc -w)
echo "valgrind: $((n - nf)) passed, $nf failed${failed:+ ($failed)} in ${total}s"
[ "$nf" -eq 0 ]
