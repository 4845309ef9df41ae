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
# Leaks: definite and indirect ones are errors.  "Possibly lost" (only an
# interior pointer found) is shown but no error: a process that ends with
# threads still running, as a test child whose assertion failed with a
# limiter open, has some in glibc's per-thread blocks; no passing suite has
# any.  "Still reachable" (what a test child leaves to exit()) is neither.
# Processes that a suite execs (redis-server, redis-sentinel, openssl,
# ratelimitd, rlctl) run natively: no --trace-children.
# --track-origins is off (it doubles the time); valgrind reads VALGRIND_OPTS,
# so VALGRIND_OPTS=--track-origins=yes tests/valgrind.sh NAME reruns a
# suite that reported an uninitialised value with the value's origin.
#
# The suites run 20-50 times slower under memcheck: CK_TIMEOUT_MULTIPLIER
# stretches Check's per-test timeouts; what valgrind cannot stretch (a
# stall timed against a 5 ms timeout, a deadline a busy I/O thread must
# keep) is left out below, each with its reason.
set -eu
src=${top_srcdir:-.}
build=${top_builddir:-.}
out=build-san/valgrind
VG_ERROR_EXIT=97
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10}
# LIBTOOL may be a command with words ("/bin/bash ./libtool"): unquoted.
LIBTOOL=${LIBTOOL:-$build/libtool}
VALGRIND=${VALGRIND:-valgrind}

# One suite: NAME [ARG...]; its output in $out/NAME.log, a line
# "NAME  SECONDS  ok|FAILED (why)" on stdout, and when it failed, its
# report (output's tail, the logs with errors) in $out/NAME.failed.
run_one() {
    name=$1; shift
    rm -f "$out/$name".*.vg
    start=$(date +%s)
    # Each test's time under memcheck, for choosing what runs here.
    export CK_XML_LOG_FILE_NAME="$out/$name.xml"
    set +e
    $LIBTOOL --mode=execute "$VALGRIND" --tool=memcheck \
        --error-exitcode=$VG_ERROR_EXIT --leak-check=full \
        --show-leak-kinds=definite,indirect,possible \
        --errors-for-leak-kinds=definite,indirect \
        --num-callers=30 --suppressions="$src/tests/valgrind.supp" \
        --log-file="$out/$name.%p.vg" \
        "$build/tests/$name" "$@" >"$out/$name.log" 2>&1
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
    # One line of the list below: NAME, then its CK_* settings (NAME=VALUE)
    # and its arguments (the other words).
    suite=$2; shift 2
    args=
    for w in "$@"; do
        case $w in
        *=*) export "$w" ;;
        *) args="$args $w" ;;
        esac
    done
    run_one "$suite" $args
    exit
fi

# The suites, one a line: NAME, then the CK_* settings that narrow it and
# its arguments.  Every check suite is here but these, left out on purpose:
#   check_lua       its time (~8 minutes under memcheck) is redis-server
#                   running the Lua scripts, which memcheck does not see; the
#                   C side it compares them with (algo.c) is check_algo's,
#                   check_sliding_log's and check_reserve's, here.
#   check_lua_lean  split from check_lua (its lean path and batches): the
#                   same reason; the two together took the ~8 minutes.
#   check_deadline  it asserts that a blocking check keeps its 20 ms timeout
#                   on busy cores; memcheck runs one thread at a time, 20-50
#                   times slower (a worst of 1.5 s measured), by design.
#   check_breaker   every test times stalls against 5-300 ms timeouts and
#                   the breaker's 200 ms opening bound (1366 ms seen under
#                   memcheck); a dead server's paths (refused connections,
#                   failure modes) run here in check_redis.
#   check_control, check_ratelimitd, check_ratelimitd_durable, check_generation,
#   check_ratelimitd_daemon, check_ratelimitd_values
#                   they test ratelimitd and rlctl, which they exec, and which
#                   therefore run natively: memcheck would see only the
#                   tests' HTTP client, for a minute.
#   check_faults    not a make check suite (make faults): kill -9, SIGSTOP
#                   and outages timed against load, for seconds each.
#   check_fleet     a 100 ms SIGSTOP of Redis against four limiters'
#                   heartbeats and fallback shares: the fallback's counting
#                   code runs here in check_redis's and check_lease's cases.
#   check_cluster_failover  its checks are timed against the cluster's
#                   failover (a 2 s timeout, a 5 % bound on the other
#                   master's share), which memcheck's slowness would decide,
#                   not the code; the cluster store's paths run here in
#                   check_cluster.
#   check_redis_timing  it holds checks to their timeouts (a hung server,
#                   1 ms, a batch's deadline, a silent connection replaced
#                   after a second, the breaker's opening); the Redis
#                   store's paths run here in check_redis.
# and these narrowed:
#   check_match     the match case only: the random case compares the glob
#                   matcher and the rule index with reference versions over
#                   10^5+ random cases, CPU-bound (1.5-3.5 minutes under
#                   memcheck); fuzz_run's pattern target and check_rules run
#                   the same code here.
#   check_memory    the memory case only: the spread case fills tables with
#                   10^5+ keys to measure bytes per key and the spread of
#                   crafted keys (~2 minutes more), through the same insert
#                   and eviction paths.
#   check_reserve   RSV_STEPS=300 random reserve/settle steps on Redis, not
#                   1500: the same operations, a fifth of the time.
#   check_sentinel  the uris case only: the others check with a 500 ms
#                   timeout through failovers, which memcheck's slowness
#                   turns into fallback decisions the tests refuse.
#   check_sliding_log  the sliding_log case only: the twins case's long
#                   sequences (over a minute) are mostly Redis running the
#                   script; the C log code runs here in the other tests.
#   check_values    the values case only: the random case compares the
#                   value index with a plain walk over random sets (over a
#                   minute, CPU-bound); the values case's 5000 overrides run
#                   the same index code.
#   check_glob_index  GLOB_SETS=40 random rule sets, not 400 (3.5 minutes
#                   under memcheck): the same trie paths, a tenth the cases.
#   check_module    the library case only: the twin and cluster cases
#                   compare ratelimit.so, which runs inside redis-server
#                   (natively), with the script; the library case runs the
#                   library's detection of the module (src/redis).
#   check_module_cluster  the cluster case only: the failovers case holds
#                   checks to seconds-bounds through planned failovers at
#                   cluster-node-timeout 3 s, which memcheck's slowness
#                   would decide; the cluster case fails over too.
#   check_module_change  not run: its twins compare ratelimit.so's refunds,
#                   settles and conversions (inside redis-server, natively)
#                   with the script; the library's side of them runs in
#                   check_module_lib, which is.
# fuzz_run replays the fuzz corpus (every parser, planted secrets) with 100
# mutations a file, not make check's 300.  The longest suites come first,
# so that the two lanes end together.
suites() {
    cat <<EOF
check_cluster
check_redis
check_memory CK_RUN_CASE=memory
check_tls
check_dryrun
check_sliding_log CK_RUN_CASE=sliding_log
check_threads
check_rules_source
check_rules_source_local
check_lease
check_limiter
check_limiter_check
check_rulechange
check_rulechange_inherit
check_rulechange_refill
check_last_good_start
check_reserve RSV_STEPS=300
check_harness
check_harness_cluster
check_acl
check_metrics
check_messages
check_async
check_shm
check_denycache
check_ruleset_delta
check_rule_json
check_functions
check_headers
check_headers_format
check_async_loops
check_contention
check_events
check_dims
check_headers_ietf
check_failed_result
check_abi
check_algo
check_rules
check_rules_match
check_options
check_values CK_RUN_CASE=values
check_glob_index GLOB_SETS=40
check_module CK_RUN_CASE=library
check_module_cluster CK_RUN_CASE=cluster
check_module_lib
check_match CK_RUN_CASE=match
check_sentinel CK_RUN_CASE=uris
fuzz_run $src/tests/fuzz/corpus 100
EOF
}

mkdir -p "$out"
if [ $# -gt 0 ]; then
    list=$(for n in "$@"; do suites | grep "^$n\( \|$\)" || echo "$n"; done)
else
    list=$(suites)
fi
# A suite configure did not build (check_async_loops without libevent and
# libuv) is skipped, as make check skips it.
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
