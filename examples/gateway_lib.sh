# gateway_lib.sh -- what examples/gateway_demo.sh and tests/gateway.sh
# share: a private redis-server on a free loopback port, gateways started
# on free ports (each writes its port to a file), 300 requests sent
# round-robin with curl, and the clean-up.  Sourced with these set:
#   GATEWAY  the examples/gateway binary
#   dir      a scratch directory (removed by gw_cleanup)
#   gw_shm   (optional) a shm:// region's name, unlinked by gw_cleanup
# Plain POSIX sh; every process started here is stopped by its pid.

gw_pids=""
redis_pid=""

gw_cleanup() {
    for p in $gw_pids; do kill "$p" 2>/dev/null; done
    for p in $gw_pids; do wait "$p" 2>/dev/null; done
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null
        wait "$redis_pid" 2>/dev/null
    fi
    gw_pids="" redis_pid=""
    # a shm:// region outlives its processes (ratelimit(3)): remove it
    [ -n "${gw_shm:-}" ] && rm -f "/dev/shm/$gw_shm"
    rm -rf "$dir"
}

# gw_redis_start: a redis-server on a free loopback port; sets redis_port.
# Returns 1 when none would start.
gw_redis_start() {
    for try in 1 2 3 4 5 6 7 8; do
        redis_port=$(( 20000 + ($$ * 7 + try * 7919) % 30000 ))
        redis-server --port "$redis_port" --bind 127.0.0.1 --save '' \
            --appendonly no --dir "$dir" --logfile "$dir/redis.log" \
            --daemonize no &
        redis_pid=$!
        for i in $(seq 50); do
            redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return 0
            kill -0 "$redis_pid" 2>/dev/null || break
            sleep 0.05
        done
        kill "$redis_pid" 2>/dev/null
        wait "$redis_pid" 2>/dev/null
        redis_pid=""
    done
    return 1
}

# gw_start NAME ARGS...: a gateway on a free loopback port, its log in
# $dir/NAME.log; sets gw_port (call it in the script's own shell, not in
# a subshell, so that gw_cleanup knows its pid).  Returns 1 (the log on stderr) when it
# exits instead of listening.
gw_start() {
    name=$1
    shift
    rm -f "$dir/$name.port"
    # stdout too away from the caller's: a $(...) would wait for it.
    "$GATEWAY" --listen 127.0.0.1:0 --port-file "$dir/$name.port" "$@" \
        >/dev/null 2>"$dir/$name.log" &
    pid=$!
    for i in $(seq 200); do
        if [ -s "$dir/$name.port" ]; then
            gw_pids="$gw_pids $pid"
            gw_port=$(cat "$dir/$name.port")
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    cat "$dir/$name.log" >&2
    return 1
}

# gw_drive N KEY PORT...: N requests to /api/orders with X-API-Key KEY,
# round-robin over the ports; each answer (status line, headers, body) in
# $dir/answer.I, its status code appended to $dir/codes.J (J: the
# gateway's place, 1..).
gw_drive() {
    n=$1 key=$2
    shift 2
    i=0
    while [ "$i" -lt "$n" ]; do
        j=$(( i % $# + 1 ))
        eval "port=\${$j}"
        i=$(( i + 1 ))
        curl -s -i --max-time 10 -H "X-API-Key: $key" \
            -o "$dir/answer.$i" "http://127.0.0.1:$port/api/orders"
        code=$(sed -n '1s/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p' "$dir/answer.$i")
        echo "${code:-000}" >>"$dir/codes.$j"
    done
}

# gw_count J CODE: how many of gateway J's answers had status CODE.
gw_count() {
    grep -c "^$2\$" "$dir/codes.$1" 2>/dev/null || true
}

# gw_first CODE: the number of the first answer with status CODE.
gw_first() {
    i=1
    while [ -f "$dir/answer.$i" ]; do
        if head -n 1 "$dir/answer.$i" | grep -q "^HTTP/[0-9.]* $1 "; then
            echo "$i"
            return 0
        fi
        i=$(( i + 1 ))
    done
    return 1
}

# gw_metric PORT NAME: the value of the sample NAME{rule="api-per-key"}
# in the gateway's /metrics (empty when absent).
gw_metric() {
    curl -s --max-time 10 "http://127.0.0.1:$1/metrics" |
        awk -v want="$2{rule=\"api-per-key\"}" '$1 == want { print $2 }'
}

# The rule of the demo and the test: 100 requests per API key per hour on
# /api/**, a sliding window (no window edge can refill it mid-run).
gw_rules() {
    cat >"$1" <<'EOF'
{
  "version": 1,
  "rules": [
    {
      "rule_id": "api-per-key",
      "dimension": "api_key",
      "match": { "endpoint": "/api/**" },
      "limit": 100,
      "window_seconds": 3600,
      "algorithm": "sliding_window"
    }
  ]
}
EOF
}
