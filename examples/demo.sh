#!/bin/sh
# demo.sh -- the README's demo.  Where redis-server is installed, it starts
# one on a free loopback port and shows a fleet of three gateway processes
# sharing one limit through it, then the single-process scenarios on Redis;
# where it is not, it says so and runs those scenarios on the in-process
# memory:// store.
#
#   demo.sh BUILDDIR SRCDIR
set -eu
build=${1:-.} src=${2:-.}
demo="$build/examples/demo"
rules="$src/examples/rules.json"

if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis-server is not installed: the demo runs on the in-process"
    echo "memory:// store, where limits hold across this process's threads."
    echo "(apt-get install redis-server to see the fleet-wide demo)"
    echo
    exec "$demo" "$rules" memory://
fi

dir=$(mktemp -d)
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# A free port: try a few random ones until a server stays up.
for try in 1 2 3 4 5; do
    port=$(( 20000 + ($$ * 7 + try * 7919) % 30000 ))
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$dir" --logfile "$dir/redis.log" --daemonize no &
    pid=$!
    for i in $(seq 50); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.05
    done
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
done
[ -n "$pid" ] || { echo "demo: could not start redis-server" >&2; exit 1; }

store="redis://127.0.0.1:$port/0"
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$port"
echo
"$demo" --fleet 3 "$rules" "$store"
redis-cli -p "$port" flushall >/dev/null
"$demo" "$rules" "$store"
