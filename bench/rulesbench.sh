#!/bin/sh
# rulesbench.sh -- ratelimitd's writes/s and reads/s with p99, from wrk,
# beside GET /healthz of the same server in the same run.  What it runs and
# how to read it: docs/BENCHMARKS.md, "How each bench measures".
#
#   sh bench/rulesbench.sh [PATH/TO/ratelimitd] [--json] [--quick]
#       [--seconds N] [--connections N] [--rules N]
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
bin= json=0 secs=10 conns=8 rules=100
if [ $# -gt 0 ] && [ -f "$1" ] && [ -x "$1" ]; then
	bin=$1
	shift
fi
[ -n "$bin" ] || bin=${RATELIMITD:-./tools/ratelimitd/ratelimitd}
while [ $# -gt 0 ]; do
	case $1 in
	--json) json=1 ;;
	--quick) secs=3 ;;
	--seconds) secs=$2; shift ;;
	--connections) conns=$2; shift ;;
	--rules) rules=$2; shift ;;
	*) echo "rulesbench.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
for tool in wrk curl redis-server redis-cli; do
	command -v "$tool" >/dev/null 2>&1 ||
		{ echo "rulesbench.sh: $tool not found" >&2; exit 1; }
done
[ -x "$bin" ] || {
	echo "rulesbench.sh: no ratelimitd at $bin (make tools/ratelimitd/ratelimitd)" >&2
	exit 1
}

# ---- Redis, then ratelimitd, both stopped on exit --------------------------------
. "$here/redis-up.sh"
redis_init rulesbench.sh 'rulesbench.XXXXXX'
redis_up 10 redis_rand_port
dir=$REDIS_DIR
token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
printf 'bench:%s\n' "$token" >"$dir/tokens"
chmod 600 "$dir/tokens"
"$bin" --token-file "$dir/tokens" --db "$dir/rules.db" \
	--listen 127.0.0.1:0 --port-file "$dir/port" \
	--redis "redis://127.0.0.1:$REDIS_PORT/0" >/dev/null 2>"$dir/rld.log" &
rld_pid=$!
stop_rld() {
	kill "$rld_pid" 2>/dev/null && wait "$rld_pid" 2>/dev/null || :
}
trap 'stop_rld; redis_cleanup' EXIT
i=0
while [ ! -s "$dir/port" ] && [ "$i" -lt 100 ]; do
	kill -0 "$rld_pid" 2>/dev/null || { cat "$dir/rld.log" >&2; exit 1; }
	sleep 0.1
	i=$((i + 1))
done
port=$(cat "$dir/port")
url=http://127.0.0.1:$port

# ---- the rules -----------------------------------------------------------------
i=0
while [ "$i" -lt "$rules" ]; do
	id=$(printf 'r%03d' "$i")
	curl -sSf -o /dev/null -X PUT -H "Authorization: Bearer $token" \
		-H 'Content-Type: application/json' "$url/v1/rules/$id" \
		-d "{\"dimension\":\"api_key\",\"match\":{\"endpoint\":\"/api/$id/**\",\"tier\":\"free\"},\"limit\":100,\"windowSeconds\":60,\"algorithm\":\"token_bucket\",\"burst\":20}"
	i=$((i + 1))
done
set_bytes=$(curl -sSf "$url/v1/rules" | wc -c)

# ---- the runs --------------------------------------------------------------------
threads=2
[ "$conns" -ge 2 ] || threads=1
run() { # NAME MODE PATH
	out=$dir/$1.json
	: >"$out"
	RULESBENCH_MODE=$2 RULESBENCH_TOKEN=$token RULESBENCH_OUT=$out \
	RULESBENCH_RULES=$rules wrk -t"$threads" -c"$conns" -d"${secs}s" \
		-s "$here/rulesbench.lua" "$url$3" >"$dir/$1.wrk" 2>&1 || {
		cat "$dir/$1.wrk" >&2
		exit 1
	}
	cat "$out"
}
field() { # JSON KEY
	echo "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"
}
healthz=$(run healthz get /healthz)
read_=$(run read get /v1/rules)
write=$(run write put /v1/rules)
version=$(curl -sSf "$url/healthz")

fail=0
for r in "$healthz" "$read_" "$write"; do
	if [ "$(field "$r" socket_errors)" != 0 ] || [ "$(field "$r" status_errors)" != 0 ]; then
		fail=1
	fi
done
rate() { # JSON -> requests per second
	awk -v n="$(field "$1" requests)" -v us="$(field "$1" duration_us)" \
		'BEGIN { printf "%.0f", n / (us / 1e6) }'
}
ms() { # JSON KEY -> milliseconds
	awk -v us="$(field "$1" "$2")" 'BEGIN { printf "%.3f", us / 1000 }'
}
ratio() { # A B
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b ? a / b : 0 }'
}
h_rate=$(rate "$healthz") r_rate=$(rate "$read_") w_rate=$(rate "$write")
fs=$(stat -f -c %T "$dir" 2>/dev/null || echo '?')
wrkv=$(wrk -v 2>&1 | head -n1 | cut -d' ' -f1-2)
if [ "$json" = 1 ]; then
	echo "{\"bench\":\"rules_params\",\"rules\":$rules,\"set_bytes\":$set_bytes,\"seconds\":$secs,\"threads\":$threads,\"connections\":$conns,\"cpus\":$(nproc),\"fs\":\"$fs\",\"wrk\":\"$wrkv\",\"service\":$version}"
	for x in "healthz $h_rate $healthz" "read $r_rate $read_" "write $w_rate $write"; do
		set -- $x
		echo "{\"bench\":\"rules_$1\",\"requests_per_s\":$2,\"p50_ms\":$(ms "$3" p50_us),\"p99_ms\":$(ms "$3" p99_us),\"vs_healthz\":$(ratio "$2" "$h_rate"),\"wrk\":$3}"
	done
else
	echo "ratelimitd, $rules rules ($set_bytes bytes of set), wrk $threads threads, $conns connections, ${secs}s each, $fs, $(nproc) CPUs"
	printf '%-34s %12s %10s %10s %10s\n' run 'requests/s' 'p50 ms' 'p99 ms' 'vs healthz'
	printf '%-34s %12s %10s %10s %10s\n' 'GET /healthz (reference)' "$h_rate" "$(ms "$healthz" p50_us)" "$(ms "$healthz" p99_us)" 1.000
	printf '%-34s %12s %10s %10s %10s\n' 'GET /v1/rules (reads)' "$r_rate" "$(ms "$read_" p50_us)" "$(ms "$read_" p99_us)" "$(ratio "$r_rate" "$h_rate")"
	printf '%-34s %12s %10s %10s %10s\n' 'PUT /v1/rules/{id} (writes)' "$w_rate" "$(ms "$write" p50_us)" "$(ms "$write" p99_us)" "$(ratio "$w_rate" "$h_rate")"
	echo "after the run: $version"
fi
if [ "$fail" = 1 ]; then
	echo "rulesbench.sh: errors during a run (see the wrk lines above)" >&2
	exit 1
fi
