#!/bin/sh
# Sanitizer builds of the test suite, outside libtool, in build-san/<mode>:
#   sanitize.sh asan        AddressSanitizer + UndefinedBehaviorSanitizer
#   sanitize.sh tsan        ThreadSanitizer (the concurrent paths)
#   sanitize.sh fuzz [SEC]  libFuzzer (clang) on each target for SEC seconds
# Every src/*.c and src/*/*.c is compiled with the mode's flags and linked into each
# tests/check_*.c (tsan: those that start threads, see tsan_skip below;
# check_async and check_async_loops cover the
# asynchronous checks; the latter needs libevent and libuv); any sanitizer
# report fails the run.  ratelimitd and rlctl
# are built the same way, and the suites that run them (check_ratelimitd*,
# check_control) find them through RATELIMITD and RLCTL, when
# libmicrohttpd, sqlite3 and libcurl are there (else those suites are
# skipped).
set -eu
# sanitize.sh --run OUT NAME [ARGS]: run one linked suite (no fork: the
# sanitizer sees every test in one process), its output to OUT/NAME.log and
# its exit status to OUT/NAME.rc; the pool at the end runs these.
# ARGS: NAME=VALUE words are the suite's environment (CK_RUN_CASE=...),
# the others its arguments.
if [ "${1:-}" = --run ]; then
    out=$2 name=$3
    shift 3
    args=
    for w in "$@"; do
        case $w in *=*) export "$w" ;; *) args="$args $w" ;; esac
    done
    t0=$(date +%s)
    # shellcheck disable=SC2086 # $args: words, none with a blank
    if CK_FORK=no "$out/$name" $args >"$out/$name.log" 2>&1; then rc=0; else rc=$?; fi
    echo "$rc" >"$out/$name.rc"
    printf '%-28s %4ss  %s\n' "$name" "$(($(date +%s) - t0))" \
        "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")"
    exit 0
fi
mode=${1:?usage: sanitize.sh asan|tsan|fuzz [seconds]}
src=${top_srcdir:-.}
out=build-san/$mode
CC=${CC:-cc}
mkdir -p "$out"

cflags="-std=c11 -D_GNU_SOURCE -DRL_BUILDING_LIBRARY -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Werror"
# tools/ratelimitd first: its request.h, not the library's src/request.h,
# is the one the fuzz targets include (src/*.c find their own first; no
# file in src's folders includes request.h).  src's folders: as Makefile.am's
# SRC_INCLUDES.
cflags="$cflags -I$src/include -I$src/tools/ratelimitd -I$src/src -I$src/src/base -I$src/src/redis -I$src/src/store -I$src/src/rules -I$src/src/telemetry -I$src/tests $(pkg-config --cflags jansson hiredis openssl check)"
libs="$(pkg-config --libs jansson hiredis openssl check) -lpthread -lm"
# ratelimitd: the pure request parsing is in the fuzz targets too.
rld_pure="$src/tools/ratelimitd/route.c $src/tools/ratelimitd/body.c $src/tools/ratelimitd/etag.c"
rld_mods="libmicrohttpd sqlite3 libcurl"
if pkg-config --exists $rld_mods; then
    rld_cflags=$(pkg-config --cflags $rld_mods)
    rld_libs=$(pkg-config --libs $rld_mods)
else
    rld_cflags= rld_libs=
    echo "sanitize.sh: no $rld_mods: ratelimitd and its suite are skipped"
fi
case $mode in
asan) san="-fsanitize=address,undefined -fno-sanitize-recover=all"
      # The twin suites' random walks (tests/twin_rng.h): the first
      # quarter of them, each walk whole; make check runs them all.
      export RL_TEST_WALK_DIV=4
      export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
      export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ;;
tsan) san="-fsanitize=thread"
      export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ;;
fuzz) CC=clang
      san="-fsanitize=fuzzer,address,undefined"
      cflags=$(echo "$cflags" | sed 's/-Werror//') ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac

# The scripts the library embeds, and the test build of them.
lua="$src/lua/common.lua"
algos="$src/lua/token_bucket.lua $src/lua/gcra.lua $src/lua/fixed_window.lua $src/lua/sliding_window.lua $src/lua/sliding_log.lua $src/lua/convert.lua $src/lua/compact.lua"
sh "$src/lua/embed.sh" "$out/lua_scripts.c" rl_lua_check $lua "$src/lua/clock.lua" "$src/lua/parts.lua" $algos "$src/lua/lean.lua" "$src/lua/settle.lua" "$src/lua/check.lua"
sh "$src/lua/embed.sh" "$out/lua_test_script.c" rl_lua_check_test $lua "$src/lua/clock_test.lua" "$src/lua/parts.lua" $algos "$src/lua/lean.lua" "$src/lua/settle.lua" "$src/lua/check.lua"
sh "$src/lua/embed.sh" --library "$out/lua_library.c" rl_lua_library $lua "$src/lua/clock.lua" "$src/lua/library.lua" $algos "$src/lua/lean.lua" "$src/lua/lean_library.lua" -- "$src/lua/settle.lua" "$src/lua/check.lua"
# The library's sources: src/*.c and src/*/*.c and the scripts embedded above
# (the build generates its own into gen/; a stale src/lua_scripts.c or
# src/lua_library.c an older build left in src/ is passed over).
lib_srcs=""
for f in "$src"/src/*.c "$src"/src/*/*.c "$out/lua_scripts.c" "$out/lua_library.c"; do
    [ "$f" = "$src/src/lua_scripts.c" ] && continue
    [ "$f" = "$src/src/lua_library.c" ] && continue
    lib_srcs="$lib_srcs $f"
done

if [ "$mode" = fuzz ]; then
    secs=${2:-30}
    n=0
    for t in rules config pattern uri cluster dryrun rulebody ruleid ruleset_delta script globindex; do
        mkdir -p "$out/corpus-$t"
        cp "$src/tests/fuzz/corpus/$t/"* "$out/corpus-$t/"
        $CC $cflags $san -DFUZZ_TARGET_$t $lib_srcs $rld_pure \
            "$src/tests/fuzz/fuzz_$t.c" $libs -o "$out/fuzz_$t"
        echo "fuzz_$t: ${secs}s"
        "$out/fuzz_$t" -max_total_time="$secs" -max_len=4096 "$out/corpus-$t"
        n=$((n + 1))
    done
    echo "$n passed, 0 failed"
    exit 0
fi

# The library's objects, as many compiles at once as there are cores
# (make's -j does not reach into this script); any failure stops the run.
objs=""
for f in $lib_srcs; do
    objs="$objs $out/$(basename "$f" .c).o"
done
export CC cflags san out
printf '%s\n' $lib_srcs | xargs -P "$(nproc 2>/dev/null || echo 2)" -n 1 \
    sh -c '$CC $cflags $san -c "$1" -o "$out/$(basename "$1" .c).o"' sh
# The Redis harness, its files (tests/redis_harness*.c) all.
harness=
for f in "$src"/tests/redis_harness*.c; do
    $CC $cflags $san -c "$f" -o "$out/$(basename "$f" .c).o"
    harness="$harness $out/$(basename "$f" .c).o"
done
$CC $cflags $san -c "$out/lua_test_script.c" -o "$out/lua_test_script.o"
if [ -n "$rld_libs" ]; then
    $CC $cflags $rld_cflags $san "$src"/tools/ratelimitd/*.c $objs $rld_libs \
        $libs -o "$out/ratelimitd"
    $CC $cflags $rld_cflags $san -c "$src/tests/rld_harness.c" -o "$out/rld_harness.o"
    RATELIMITD=$(cd "$out" && pwd)/ratelimitd
    $CC $cflags $rld_cflags $san -I"$src/tools/rlctl" "$src"/tools/rlctl/*.c \
        $objs $rld_libs $libs -o "$out/rlctl"
    RLCTL=$(cd "$out" && pwd)/rlctl
    export RATELIMITD RLCTL
fi

# Every suite is linked first, JOBS links at a time, then run JOBS at a
# time: the suites mostly wait on servers and timers, so on two cores two
# at once take about half the time of one by one (SAN_JOBS=1).
jobs=${SAN_JOBS:-$(nproc 2>/dev/null || echo 2)}
# What tsan leaves out.  TSan watches threads: these suites start none, not
# the library's (a limiter on redis:// starts its connector and I/O loop
# threads, cluster:// and sentinel:// their watchers, a rules source or an
# event sink theirs; none of these suites opens one) nor their own: a
# pthread_create counted under CK_FORK=no found 0 in each.
#   check_lua, check_lua_lean  the C maths beside the script, over hiredis
#   check_module, check_module_change  ratelimit.so, inside redis-server
#       (built without a sanitizer), over hiredis (check_module_cluster's
#       cluster case opens limiters: it stays)
#   check_harness_cluster  the test harness's clusters, no library call
#   check_match, check_glob_index, check_values  the rule matchers, CPU only
#   check_memory  the memory store's tables and eviction, from one thread
# The asan run fails any of them that starts a thread (tests/no_threads.c).
# TSan's checks of one thread (a lock order, a mutex misused) go with them;
# the memory store's locks run under tsan in check_threads, check_contention,
# check_limiter_check and check_sliding_log.  ASan+UBSan runs them all.
# check_sliding_log's twins case (the C and Lua logs over hiredis, no
# thread) is left out the same way: tsan runs its sliding_log case, which
# has its threads.
tsan_skip="check_lua check_lua_lean check_module check_module_change check_harness_cluster check_match check_glob_index check_values check_memory"
tsan_env="check_sliding_log CK_RUN_CASE=sliding_log"
no_thread() {
    case " $tsan_skip " in *" $1 "*) return 0 ;; esac
    return 1
}
skipped() {
    [ "$mode" = tsan ] && no_thread "$1"
}
link_suite() {
    name=$(basename "$1" .c)
    extra=
    ! skipped "$name" || return 0
    if [ "${name#check_ratelimitd}" != "$name" ] || [ "$name" = check_control ] ||
       [ "$name" = check_generation ]; then
        [ -n "$rld_libs" ] || return 0
        extra="$rld_cflags $out/rld_harness.o $rld_libs"
    fi
    # The event-loop adapters' suite: with libevent and libuv only.
    if [ "$name" = check_async_loops ]; then
        pkg-config --exists libevent libuv || return 0
        extra="$(pkg-config --cflags --libs libevent libuv)"
    fi
    # ratelimit.so's suites (and check_reserve's module kinds): the
    # module, built once below without the sanitizer (it runs inside
    # redis-server, which none wraps), its path compiled in.
    case $name in check_module*|check_reserve)
        extra="-DRL_MODULE_PATH=\"$(cd "$out" && pwd)/ratelimit.so\"" ;;
    # decimal.h's portable path, compiled apart (Makefile.am's sources).
    check_headers_ietf) extra="$src/tests/decimal_portable.c" ;;
    esac
    # Under asan a tsan_skip suite that starts a thread fails
    # (tests/no_threads.c), so the list above cannot go stale.
    if [ "$mode" = asan ] && no_thread "$name"; then
        extra="$extra $src/tests/no_threads.c -Wl,--wrap=pthread_create"
    fi
    $CC $cflags $san "$1" $objs $harness "$out/lua_test_script.o" \
        $extra $libs -o "$out/$name"
    echo "$name" >>"$out/suites"
}
$CC $cflags -fPIC -shared -fvisibility=hidden "$src"/redis-module/*.c \
    "$src/src/base/algo.c" "$src/src/base/settle.c" "$src/src/base/hash.c" \
    -o "$out/ratelimit.so"
rm -f "$out/suites" "$out"/*.rc
: >"$out/suites"
want=0
for t in "$src"/tests/check_*.c; do
    link_suite "$t" &
    want=$((want + 1))
    [ $((want % jobs)) -ne 0 ] || wait
done
$CC $cflags $san "$src"/tests/fuzz/*.c $rld_pure $objs $libs -o "$out/fuzz_run"
wait
# The longest suites first (their times under each sanitizer), so the
# pool's lanes end together; a suite's line carries tsan's settings.
slow="check_lua check_module_cluster check_lua_lean check_cluster check_sliding_log check_memory check_module_change check_match check_faults check_cluster_failover check_sentinel check_module check_reserve check_control"
{
    for name in $slow; do grep -x "$name" "$out/suites" || true; done
    echo "fuzz_run $src/tests/fuzz/corpus 300"
    for name in $(cat "$out/suites"); do
        case " $slow " in *" $name "*) ;; *) echo "$name" ;; esac
    done
} | if [ "$mode" = tsan ]; then
    while read -r line; do
        case $line in "${tsan_env%% *}") echo "$tsan_env" ;; *) echo "$line" ;; esac
    done
else cat; fi | xargs -P "$jobs" -L1 sh "$0" --run "$out"

# A suite that failed to link has no .rc and counts as failed too.
pass=0 fail=0 failed=
for t in "$src"/tests/check_*.c fuzz_run; do
    name=$(basename "$t" .c)
    ! skipped "$name" || continue
    [ "$name" = fuzz_run ] || [ -n "$rld_libs" ] || case $name in
        check_ratelimitd*|check_control|check_generation) continue ;; esac
    if [ "$name" = check_async_loops ] && ! pkg-config --exists libevent libuv; then
        continue
    fi
    if [ "$(cat "$out/$name.rc" 2>/dev/null)" = 0 ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        failed="$failed $name"
    fi
done
for name in $failed; do
    echo "==== $mode: $name failed; its log's last lines ($out/$name.log):"
    grep -v '^$' "$out/$name.log" 2>/dev/null | tail -40
done
[ "$mode" != tsan ] || echo "tsan: left out (no thread): $tsan_skip; check_sliding_log's twins case"
echo "$mode: $pass passed, $fail failed${failed:+ (}${failed# }${failed:+)}"
[ "$fail" -eq 0 ]
