#!/bin/sh
# asyncbench.sh -- run `redisbench async` against a private, throw-away
# redis-server on a free loopback port, with rate-limiter-flexible
# (bench/peer/peer.js) in the same run when node and its npm packages are
# there (bench/peer/run.sh installs them once).
#
#   sh bench/asyncbench.sh [PATH/TO/redisbench] [async options...]
#   e.g. sh bench/asyncbench.sh build/bench/redisbench --json --seconds 5
#
# Exit status: the benchmark's, or 1 when the server cannot be started.
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
bin=
if [ $# -gt 0 ] && [ -f "$1" ] && [ -x "$1" ]; then
	bin=$1
	shift
fi
for c in ./bench/redisbench "$here/redisbench"; do
	[ -n "$bin" ] && break
	if [ -f "$c" ] && [ -x "$c" ]; then
		bin=$c
	fi
done
if [ -z "$bin" ]; then
	echo "asyncbench.sh: no redisbench binary (make bench/redisbench)" >&2
	exit 1
fi

. "$here/redis-up.sh"
redis_init asyncbench.sh 'asyncbench.XXXXXX'
redis_up 10 redis_rand_port
echo "asyncbench.sh: $(redis-server --version | cut -d' ' -f1-3) on 127.0.0.1:$REDIS_PORT; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

peer=
if command -v node >/dev/null 2>&1 && [ -d "$here/peer/node_modules/rate-limiter-flexible" ]; then
	peer="--peer $here/peer/peer.js"
else
	echo "asyncbench.sh: no node or no bench/peer/node_modules: the peer is not run (sh bench/peer/run.sh installs it)" >&2
fi
# shellcheck disable=SC2086 # $peer is two words or none
"$bin" async "$@" $peer --port "$REDIS_PORT"
