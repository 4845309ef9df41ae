#!/bin/sh
# redisbench.sh -- run bench/redisbench against a private, throw-away
# redis-server on a free loopback port.
#
#   sh bench/redisbench.sh [PATH/TO/redisbench] [redisbench options...]
#   e.g. sh bench/redisbench.sh build/bench/redisbench --json --quick
#
# What it does: docs/BENCHMARKS.md, "redisbench: one Redis server".
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)

bin=${REDISBENCH:-} # the path given first, else $REDISBENCH, else found
if [ $# -gt 0 ] && [ -f "$1" ] && [ -x "$1" ]; then
	bin=$1
	shift
fi
for c in ./bench/redisbench "$here/redisbench"; do
	if [ -z "$bin" ] && [ -f "$c" ] && [ -x "$c" ]; then
		bin=$c
	fi
done
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
	echo "redisbench.sh: no redisbench binary (give its path first, or set REDISBENCH; build it with make bench/redisbench)" >&2
	exit 1
fi
for tool in redis-server redis-cli redis-benchmark; do
	command -v "$tool" >/dev/null 2>&1 ||
		{ echo "redisbench.sh: $tool not found" >&2; exit 1; }
done

# ---- a private redis-server on a free loopback port ---------------------------
. "$here/redis-up.sh"
redis_init redisbench.sh 'redisbench.XXXXXX'

version=$(redis-server --version)
redis_up 10 redis_rand_port
echo "redisbench.sh: $version" >&2
echo "redisbench.sh: pid $REDIS_PID on 127.0.0.1:$REDIS_PORT; $(nproc 2>/dev/null || echo '?') CPUs; load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')" >&2
echo "redisbench.sh: $bin $* --port $REDIS_PORT" >&2

peer=
if [ "${1:-}" = async ]; then
	if command -v node >/dev/null 2>&1 && [ -d "$here/peer/node_modules/rate-limiter-flexible" ]; then
		peer="--peer $here/peer/peer.js"
	else
		echo "redisbench.sh: no node or no bench/peer/node_modules: the peer is not run (sh bench/peer/run.sh installs it)" >&2
	fi
fi

# ---- the benchmark (not exec'd: the trap must stop the server) -----------------
REDIS_SERVER_VERSION=$version
export REDIS_SERVER_VERSION
st=0
# shellcheck disable=SC2086 # $peer is two words or none
"$bin" "$@" $peer --port "$REDIS_PORT" || st=$?
exit "$st"
