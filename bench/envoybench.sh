#!/bin/sh
# envoybench.sh -- ratelimit-envoy's ShouldRateLimit calls/s and p99 at 64
# calls in flight on shm://, beside grpc.health.v1.Health/Check of the same
# server in the same run (the reference: gRPC's own cost, no check).
#
#   sh bench/envoybench.sh [PATH/TO/ratelimit-envoy] [--rounds N] [--calls N]
#       [--store URI] [--threads N]
#
# h2load (nghttp2-client) replays one prebuilt gRPC frame per method (4
# connections x 16 streams, one thread); each round runs the health check
# then the limit check; the medians of the rounds are printed with their
# ratio (target: >= 0.7x).  p99 from h2load's per-request log.  One
# descriptor (domain bench, k=v) under a limit no call reaches, so every
# call is a full check that passes.  --store: another store than a
# private shm:// region (e.g. redis://127.0.0.1:6379); --threads: the
# service's workers (default 2; each waits for its store call, so on Redis
# the calls in flight at the store are at most this).  Prints the load.
set -eu
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
tmp=$(mktemp -d "${TMPDIR:-/tmp}/envoybench.XXXXXX")
shm=rl-envoybench-$$
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; rm -f /dev/shm/$shm' EXIT INT TERM
printf 'domain: bench\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n' > "$tmp/bench.yaml"
# RateLimitRequest{domain: "bench", descriptors: [{entries: [{k, v}]}]}
# and an empty HealthCheckRequest, each behind gRPC's 5-byte prefix
printf '\000\000\000\000\021\012\005bench\022\010\012\006\012\001k\022\001v' > "$tmp/rls.bin"
printf '\000\000\000\000\000' > "$tmp/health.bin"
"$bin" -c "$tmp/bench.yaml" -l 127.0.0.1:0 -t "$threads" -o "store=${store:-shm://$shm}" > "$tmp/out" 2> "$tmp/err" &
pid=$!
for _ in $(seq 100); do grep -q port "$tmp/out" && break; sleep 0.05; done
port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$tmp/out")
[ -n "$port" ] || { cat "$tmp/err" >&2; exit 1; }
url=http://127.0.0.1:$port
if command -v curl >/dev/null; then # the frame is a check that passes
	curl -s --http2-prior-knowledge -H 'content-type: application/grpc' \
	    -H 'te: trailers' --data-binary @"$tmp/rls.bin" -D - -o /dev/null \
	    "$url/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" |
	    grep -qi '^grpc-status: 0' || { echo "envoybench: the check failed" >&2; exit 1; }
fi
# one h2load run: "calls/s p99_us"
run() {
	h2load -n "$calls" -c 4 -m 16 -t 1 -H 'content-type: application/grpc' \
	    -H 'te: trailers' -d "$tmp/$2" --log-file "$tmp/log" "$url/$1" > "$tmp/h2" 2>&1
	grep -q "$calls succeeded, 0 failed" "$tmp/h2" || { cat "$tmp/h2" >&2; exit 1; }
	rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' "$tmp/h2")
	p99=$(cut -f3 "$tmp/log" | sort -n | awk '{v[NR]=$1} END {print v[int(NR*0.99)]}')
	echo "$rps $p99"
}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
: > "$tmp/health.r"; : > "$tmp/rls.r"
for r in $(seq "$rounds"); do
	run grpc.health.v1.Health/Check health.bin >> "$tmp/health.r"
	run envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit rls.bin >> "$tmp/rls.r"
	echo "round $r: health $(tail -1 "$tmp/health.r"), check $(tail -1 "$tmp/rls.r") (calls/s p99_us)"
done
hr=$(cut -d' ' -f1 "$tmp/health.r" | median); hp=$(cut -d' ' -f2 "$tmp/health.r" | median)
cr=$(cut -d' ' -f1 "$tmp/rls.r" | median); cp=$(cut -d' ' -f2 "$tmp/rls.r" | median)
echo "load: $(uptime | sed 's/.*load average: //')"
printf '%-28s %12s %10s\n' "64 in flight, ${store:-shm://}" "calls/s" "p99 us"
printf '%-28s %12.0f %10s\n' "Health/Check (reference)" "$hr" "$hp"
printf '%-28s %12.0f %10s\n' "ShouldRateLimit" "$cr" "$cp"
awk -v c="$cr" -v h="$hr" 'BEGIN {printf "ratio: %.2fx the health check (target >= 0.7x)\n", c / h}'
