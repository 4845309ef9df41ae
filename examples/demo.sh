#!/bin/sh
# demo.sh -- the README's demo.  Where redis-server is installed, it starts
# one on a free loopback port and shows a fleet of three gateway processes
# sharing one limit through it, then the single-process scenarios on Redis,
# then the fleet following an operator's change: ratelimitd (the rules
# service) on the same Redis, three gateways taking their rules from it,
# and rlctl raising a limit while they serve; where redis-server is not
# installed, it says so and runs the single-process scenarios on the
# in-process memory:// store.
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
rld=""
cleanup() {
    [ -n "$rld" ] && kill "$rld" 2>/dev/null && wait "$rld" 2>/dev/null
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

# ---- live rules: an operator changes a limit while the fleet runs ----------
ratelimitd="$build/tools/ratelimitd/ratelimitd"
rlctl="$build/tools/rlctl/rlctl"
if [ ! -x "$ratelimitd" ] || [ ! -x "$rlctl" ]; then
    echo "(ratelimitd or rlctl is not built: no live-rules demo; they need"
    echo " libmicrohttpd-dev, libsqlite3-dev and libcurl4-openssl-dev)"
    exit 0
fi
redis-cli -p "$port" flushall >/dev/null
printf 'operator:%s\n' "$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')" \
    >"$dir/tokens"
chmod 600 "$dir/tokens"
cut -d: -f2 "$dir/tokens" >"$dir/token"
"$ratelimitd" --token-file "$dir/tokens" --db "$dir/rules.db" \
    --listen 127.0.0.1:0 --port-file "$dir/rld.port" --redis "$store" \
    >/dev/null 2>"$dir/rld.log" &
rld=$!
for i in $(seq 100); do [ -s "$dir/rld.port" ] && break; sleep 0.05; done
[ -s "$dir/rld.port" ] || { cat "$dir/rld.log" >&2; exit 1; }
RLCTL_SERVER="http://127.0.0.1:$(cat "$dir/rld.port")"
RLCTL_TOKEN_FILE="$dir/token"
export RLCTL_SERVER RLCTL_TOKEN_FILE
say() { printf '$ %s\n' "$*"; "$@"; }
quietly() { printf '$ %s\n' "$*"; "$@" >/dev/null; }

echo "== Live rules: ratelimitd on $RLCTL_SERVER stores every change and"
echo "   publishes it to Redis; each gateway follows within milliseconds"
echo
quietly "$rlctl" put search-per-user --dimension user --endpoint /search \
    --tier free --limit 100 --window 60
quietly "$rlctl" put search-per-ip --dimension ip --endpoint /search \
    --limit 150 --window 60 --mode log
say "$rlctl" list
echo
"$demo" --live 3 11 "$store" &
live=$!
sleep 5.5
echo "$ $rlctl put search-per-user ... --limit 200   # the operator raises it"
"$rlctl" put search-per-user --dimension user --endpoint /search \
    --tier free --limit 200 --window 60 >/dev/null
wait "$live"
echo
echo "The limit went from 100 to 200 per minute for the whole fleet, without"
echo "a restart; alice, who had spent her 100, went on from 100, not from 0."
echo "search-per-ip ran as a dry run (mode log): it rejected nothing, and"
echo "the gateways reported what it would have rejected:"
say "$rlctl" dryrun search-per-ip --redis "$store"
