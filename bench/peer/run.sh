#!/bin/sh
# run.sh -- run the rate-limiter-flexible peer benchmark against a private,
# throw-away redis-server on a free loopback port.
#
#   sh bench/peer/run.sh [peer.js options...]     e.g. --json, --seconds 10
#
# Starts redis-server (no persistence: save "", appendonly no) bound to
# 127.0.0.1 in a temporary directory, installs the pinned npm packages into
# bench/peer/node_modules if they are missing (npm ci from the lock file),
# runs peer.js against the server with the given options, and stops the
# server on exit, whatever happens.  Exits non-zero when any step fails.
# Needs node (>= 20), npm, redis-server and redis-cli.  Not part of
# `make check`: it takes about half a minute and needs the npm registry the
# first time.
set -eu

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)

for tool in node npm redis-server redis-cli; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "run.sh: $tool not found" >&2
		exit 1
	fi
done

. "$here/../redis-up.sh"
redis_init run.sh 'rlf-peer.XXXXXX'

# ---- the npm packages (pinned in package.json and package-lock.json) -------
if [ ! -d "$here/node_modules/rate-limiter-flexible" ] || [ ! -d "$here/node_modules/ioredis" ]; then
	echo "run.sh: installing npm packages in $here" >&2
	if [ -f "$here/package-lock.json" ]; then
		(cd "$here" && npm ci --no-audit --no-fund) >&2
	else
		(cd "$here" && npm install --no-audit --no-fund) >&2
	fi
fi

# ---- a private redis-server on a free loopback port -------------------------
free_port() {
	node -e '
const s = require("net").createServer();
s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => console.log(p)); });'
}

redis_up 5 free_port
echo "run.sh: redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') pid $REDIS_PID on 127.0.0.1:$REDIS_PORT" >&2

# ---- the benchmark -----------------------------------------------------------
node "$here/peer.js" --host 127.0.0.1 --port "$REDIS_PORT" "$@"
