#!/bin/sh
# Sanitizer builds of the test suite, outside libtool, in build-san/<mode>:
#   sanitize.sh asan        AddressSanitizer + UndefinedBehaviorSanitizer
#   sanitize.sh tsan        ThreadSanitizer (the concurrent paths)
#   sanitize.sh fuzz [SEC]  libFuzzer (clang) on each target for SEC seconds
# Every src/*.c and src/*/*.c is compiled with the mode's flags and linked into each
# tests/check_*.c (check_async and check_async_loops cover the
# asynchronous checks; the latter needs libevent and libuv); any sanitizer
# report fails the run.  ratelimitd and rlctl
# are built the same way, and the suites that run them (check_ratelimitd*,
# check_control) find them through RATELIMITD and RLCTL, when
# libmicrohttpd, sqlite3 and libcurl are there (else those suites are
# skipped).
set -eu
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
sh "$src/lua/embed.sh" "$out/lua_scripts.c" rl_lua_check $lua "$src/lua/clock.lua" "$src/lua/parts.lua" $algos "$src/lua/settle.lua" "$src/lua/check.lua"
sh "$src/lua/embed.sh" "$out/lua_test_script.c" rl_lua_check_test $lua "$src/lua/clock_test.lua" "$src/lua/parts.lua" $algos "$src/lua/settle.lua" "$src/lua/check.lua"
sh "$src/lua/embed.sh" --library "$out/lua_library.c" rl_lua_library $lua "$src/lua/clock.lua" "$src/lua/library.lua" $algos -- "$src/lua/settle.lua" "$src/lua/check.lua"
# The library's sources: src/*.c and src/*/*.c, less an in-tree build's generated
# src/lua_scripts.c and src/lua_library.c (ours are the ones in $out).
lib_srcs=""
for f in "$src"/src/*.c "$src"/src/*/*.c "$out/lua_scripts.c" "$out/lua_library.c"; do
    [ "$f" = "$src/src/lua_scripts.c" ] && continue
    [ "$f" = "$src/src/lua_library.c" ] && continue
    lib_srcs="$lib_srcs $f"
done

if [ "$mode" = fuzz ]; then
    secs=${2:-30}
    n=0
    for t in rules config pattern uri cluster dryrun rulebody ruleid ruleset_delta script; do
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
pass=0 fail=0 failed=
# run_logged NAME CMD...: run CMD (no fork), its output teed to
# $out/NAME.log; on failure NAME joins $failed.
run_logged() {
    _name=$1; shift
    if { CK_FORK=no "$@"; echo "rc=$?" >"$out/$_name.rc"; } 2>&1 | tee "$out/$_name.log"; then :; fi
    [ "$(cat "$out/$_name.rc")" = rc=0 ] && return 0
    failed="$failed $_name"
    return 1
}
$CC $cflags $san -c "$src/tests/redis_harness.c" -o "$out/redis_harness.o"
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
for t in "$src"/tests/check_*.c; do
    name=$(basename "$t" .c)
    extra=
    if [ "${name#check_ratelimitd}" != "$name" ] || [ "$name" = check_control ] ||
       [ "$name" = check_generation ]; then
        [ -n "$rld_libs" ] || continue
        extra="$rld_cflags $out/rld_harness.o $rld_libs"
    fi
    # The event-loop adapters' suite: with libevent and libuv only.
    if [ "$name" = check_async_loops ]; then
        pkg-config --exists libevent libuv || continue
        extra="$(pkg-config --cflags --libs libevent libuv)"
    fi
    # ratelimit.so's suite: the module built without the sanitizer (it
    # runs inside redis-server, which none wraps), its path compiled in.
    if [ "$name" = check_module ]; then
        $CC $cflags -fPIC -shared -fvisibility=hidden "$src"/redis-module/*.c \
            "$src/src/base/algo.c" -o "$out/ratelimit.so"
        extra="-DRL_MODULE_PATH=\"$(cd "$out" && pwd)/ratelimit.so\""
    fi
    $CC $cflags $san "$t" $objs "$out/redis_harness.o" "$out/lua_test_script.o" $extra $libs -o "$out/$name"
    # No fork: the sanitizer sees every test in one process.  The output
    # goes to the screen and to $out/$name.log; a failed suite's log is
    # shown again at the end, where a CI tail sees it.
    if run_logged "$name" "$out/$name"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
$CC $cflags $san "$src"/tests/fuzz/*.c $rld_pure $objs $libs -o "$out/fuzz_run"
if run_logged fuzz_run "$out/fuzz_run" "$src/tests/fuzz/corpus" 300; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
for name in $failed; do
    echo "==== $mode: $name failed; its log's last lines ($out/$name.log):"
    grep -v '^$' "$out/$name.log" | tail -40
done
echo "$mode: $pass passed, $fail failed${failed:+ (}${failed# }${failed:+)}"
[ "$fail" -eq 0 ]
