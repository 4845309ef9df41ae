#!/bin/sh
# gatewaybench.sh -- requests/s and p99 through examples/gateway from wrk,
# beside the same gateway with no rule in the same run.  What it runs and
# how to read it: docs/BENCHMARKS.md, "How each bench measures".
#
#   sh bench/gatewaybench.sh [PATH/TO/gateway] [--json] [--quick]
#       [--seconds N] [--connections N]
set -u

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
GATEWAY=./examples/gateway json=0 secs=5 conns=16
if [ $# -gt 0 ] && [ -f "$1" ] && [ -x "$1" ]; then
	GATEWAY=$1
	shift
fi
while [ $# -gt 0 ]; do
	case $1 in
	--json) json=1 ;;
	--quick) secs=2 ;;
	--seconds) secs=$2; shift ;;
	--connections) conns=$2; shift ;;
	*) echo "gatewaybench.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
for tool in wrk curl redis-server redis-cli; do
	command -v "$tool" >/dev/null 2>&1 ||
		{ echo "gatewaybench.sh: $tool not found" >&2; exit 1; }
done
[ -x "$GATEWAY" ] || {
	echo "gatewaybench.sh: no gateway at $GATEWAY (make examples/gateway)" >&2
	exit 1
}
dir=$(mktemp -d)
. "$here/../examples/gateway_lib.sh"
trap gw_cleanup EXIT
trap 'exit 1' INT TERM
gw_redis_start || { echo "gatewaybench.sh: no redis-server" >&2; exit 1; }

rules() { # FILE LIMIT
	printf '[{"rule_id":"bench","dimension":"api_key","match":{"endpoint":"/api/**"},"limit":%s,"window_seconds":3600,"algorithm":"sliding_window"}]\n' "$2" >"$1"
}
rules "$dir/many.json" 1000000000
rules "$dir/one.json" 1

# wrk's latency in ms from "99%  1.23ms" (us, ms or s).
ms_of() {
	awk -v p="$2" '$1 == p {
		v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
		f = (u == "us") ? 0.001 : (u == "s") ? 1000 : 1
		printf "%.3f", v * f }' "$1"
}

# run NAME EXPECTED-STATUS GATEWAY-ARGS...: sets the variable NAME to
# "rate p50 p99" (in this shell: the gateway's pid must reach gw_cleanup).
run() {
	name=$1 want=$2
	shift 2
	gw_start "$name" "$@" || exit 1
	url="http://127.0.0.1:$gw_port/api/orders"
	wrk -t1 -c"$conns" -d"${secs}s" --latency -H 'X-API-Key: k' "$url" \
		>"$dir/$name.wrk" 2>&1 || { cat "$dir/$name.wrk" >&2; exit 1; }
	if grep -q 'Socket errors' "$dir/$name.wrk"; then
		cat "$dir/$name.wrk" >&2
		exit 1
	fi
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-API-Key: k' "$url")
	if [ "$code" != "$want" ]; then
		echo "gatewaybench.sh: $name answered $code, not $want" >&2
		exit 1
	fi
	rate=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$dir/$name.wrk")
	eval "$name=\"$rate $(ms_of "$dir/$name.wrk" 50%) $(ms_of "$dir/$name.wrk" 99%)\""
}
store="redis://127.0.0.1:$redis_port/0"
run none 200 --store memory://
run memory 200 --store memory:// --rules "$dir/many.json"
run redis 200 --store "$store" --rules "$dir/many.json" --set timeout_ms=1000
run denied 429 --store "$store" --rules "$dir/one.json" --set timeout_ms=1000

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b ? a / b : 0 }'; }
ref=$(echo "$none" | cut -d' ' -f1)
wrkv=$(wrk -v 2>&1 | head -n1 | cut -d' ' -f1-2)
if [ "$json" = 1 ]; then
	echo "{\"bench\":\"gateway_params\",\"seconds\":$secs,\"connections\":$conns,\"wrk_threads\":1,\"cpus\":$(nproc),\"wrk\":\"$wrkv\"}"
fi
[ "$json" = 1 ] || {
	echo "examples/gateway under wrk: 1 thread, $conns connections, ${secs}s each, $(nproc) CPUs"
	printf '%-40s %12s %9s %9s %11s\n' run 'requests/s' 'p50 ms' 'p99 ms' 'vs no rule'
}
for x in "none|no rule, canned 200 (reference)|$none" \
	"memory|one rule, memory://|$memory" \
	"redis|one rule, Redis, admitted|$redis" \
	"denied|one rule, Redis, 429s|$denied"; do
	id=${x%%|*} rest=${x#*|}
	label=${rest%%|*} nums=${rest#*|}
	set -- $nums
	if [ "$json" = 1 ]; then
		echo "{\"bench\":\"gateway_$id\",\"requests_per_s\":$1,\"p50_ms\":$2,\"p99_ms\":$3,\"vs_no_rule\":$(ratio "$1" "$ref")}"
	else
		printf '%-40s %12s %9s %9s %11s\n' "$label" "$1" "$2" "$3" "$(ratio "$1" "$ref")"
	fi
done
