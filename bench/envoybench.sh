#!/bin/sh
# envoybench.sh -- ratelimit-envoy's ShouldRateLimit calls/s and p99 at 64
# calls in flight on shm:// and on Redis, beside grpc.health.v1.Health/Check
# of the same server in the same run (the reference: gRPC's own cost, no
# check).
#
#   sh bench/envoybench.sh [PATH/TO/ratelimit-envoy] [--rounds N] [--calls N]
#       [--store URI] [--threads N]
#
# Method: docs/BENCHMARKS.md, "How each bench measures".
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-./tools/ratelimit-envoy/ratelimit-envoy}
[ $# -gt 0 ] && shift
rounds=3 calls=100000 store= threads=2
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=$2; shift 2 ;;
	--calls) calls=$2; shift 2 ;;
	--store) store=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	*) echo "usage: $0 [BIN] [--rounds N] [--calls N] [--store URI] [--threads N]" >&2; exit 2 ;;
	esac
done
command -v h2load >/dev/null || { echo "envoybench: needs h2load (nghttp2-client)" >&2; exit 1; }
. "$here/redis-up.sh"
redis_init envoybench.sh 'envoybench.XXXXXX'
tmp=$REDIS_DIR shm=rl-envoybench-$$ pids=
trap 'for p in $pids; do kill "$p" 2>/dev/null; done; rm -f /dev/shm/$shm; redis_cleanup' EXIT
stores="shm://$shm"
if command -v redis-server >/dev/null; then
	redis_up 10 redis_rand_port
	stores="$stores redis://127.0.0.1:$REDIS_PORT"
fi
[ -n "$store" ] && stores="$stores $store"
printf 'domain: bench\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n' > "$tmp/bench.yaml"
# RateLimitRequest{domain: "bench", descriptors: [{entries: [{k, v}]}]}
# and an empty HealthCheckRequest, each behind gRPC's 5-byte prefix
printf '\000\000\000\000\021\012\005bench\022\010\012\006\012\001k\022\001v' > "$tmp/rls.bin"
printf '\000\000\000\000\000' > "$tmp/health.bin"
# start one service per store: its URL in $tmp/url.N
n=0
for s in $stores; do
	n=$((n + 1))
	"$bin" -c "$tmp/bench.yaml" -l 127.0.0.1:0 -t "$threads" -o "store=$s" > "$tmp/out.$n" 2> "$tmp/err.$n" &
	pids="$pids $!"
	for _ in $(seq 100); do grep -qs port "$tmp/out.$n" && break; sleep 0.05; done
	port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$tmp/out.$n")
	[ -n "$port" ] || { cat "$tmp/err.$n" >&2; exit 1; }
	echo "http://127.0.0.1:$port" > "$tmp/url.$n"
	if command -v curl >/dev/null; then # the frame is a check that passes
		curl -s --http2-prior-knowledge -H 'content-type: application/grpc' \
		    -H 'te: trailers' --data-binary @"$tmp/rls.bin" -D - -o /dev/null \
		    "$(cat "$tmp/url.$n")/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" |
		    grep -qi '^grpc-status: 0' || { echo "envoybench: the check failed on $s" >&2; exit 1; }
	fi
done
# one h2load run against service $1: "calls/s p99_us"
run() {
	h2load -n "$calls" -c 4 -m 16 -t 1 -H 'content-type: application/grpc' \
	    -H 'te: trailers' -d "$tmp/$3" --log-file "$tmp/log" "$(cat "$tmp/url.$1")/$2" > "$tmp/h2" 2>&1
	grep -q "$calls succeeded, 0 failed" "$tmp/h2" || { cat "$tmp/h2" >&2; exit 1; }
	rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$tmp/h2")
	p99=$(cut -f3 "$tmp/log" | sort -n | awk '{v[NR]=$1} END {print v[int(NR*0.99)]}')
	echo "$rps $p99"
}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for r in $(seq "$rounds"); do
	run 1 grpc.health.v1.Health/Check health.bin >> "$tmp/r.0"
	line="round $r: health $(tail -1 "$tmp/r.0")"
	for i in $(seq "$n"); do
		run "$i" envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit rls.bin >> "$tmp/r.$i"
		line="$line, check $i $(tail -1 "$tmp/r.$i")"
	done
	echo "$line (calls/s p99_us)"
done
echo "load: $(uptime | sed 's/.*load average: //'); $threads threads, $rounds rounds of $calls calls, medians"
printf '%-40s %12s %10s %8s\n' "64 in flight" "calls/s" "p99 us" "ratio"
hr=$(cut -d' ' -f1 "$tmp/r.0" | median)
i=0
for s in Health/Check $stores; do
	[ "$i" = 0 ] && what="Health/Check (reference)" || what="ShouldRateLimit, ${s%%://*}://"
	cr=$(cut -d' ' -f1 "$tmp/r.$i" | median); cp=$(cut -d' ' -f2 "$tmp/r.$i" | median)
	awk -v w="$what" -v c="$cr" -v p="$cp" -v h="$hr" 'BEGIN {printf "%-40s %12.0f %10s %7.2fx\n", w, c, p, c / h}'
	i=$((i + 1))
done
echo "(target: ShouldRateLimit on shm:// >= 0.7x the health check)"
