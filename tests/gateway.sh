#!/bin/sh
# gateway.sh -- examples/gateway end to end, with real servers: a private
# redis-server, gateway processes, curl as the client.
#   - three gateways on one Redis, 300 requests round-robin on one API key
#     under a rule of 100 per hour: exactly 100 admitted, 200 refused 429;
#   - a 429 carries Retry-After, X-RateLimit-*, the IETF pair and the JSON
#     body, its numbers agreeing;
#   - each gateway's /metrics parses (Prometheus's own parser where
#     Debian's python3-prometheus-client is installed) and its counts are
#     what its clients saw;
#   - a gateway passes admitted requests on to its --upstream (here
#     another gateway) and answers 502 when that fails; --metrics off
#     serves no metrics;
#   - a huge path or header is refused (414 / 431 / 400) and the gateway
#     goes on serving;
#   - bad command lines exit non-zero with a message.
# Run by `make check` from the build directory.  Exit 0: pass, 1: fail,
# 77: skip (no redis-server or curl).
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
top_builddir=${top_builddir:-.}
. "$top_srcdir/tests/lib.sh"
GATEWAY=${GATEWAY:-$top_builddir/examples/gateway}
PYTHON=${PROM_PYTHON:-/usr/bin/python3}

for tool in redis-server redis-cli curl; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "SKIP: no $tool"
        exit 77
    }
done
dir=$(mktemp -d) || exit 1
. "$top_srcdir/examples/gateway_lib.sh"
trap gw_cleanup EXIT
trap 'exit 1' INT TERM

# ---- bad command lines ---------------------------------------------------
# Each must exit non-zero, print a line starting "gateway:" and not listen.
bad_args() {
    "$GATEWAY" "$@" >/dev/null 2>"$dir/bad.err"
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q '^gateway: ' "$dir/bad.err"; then
        pass "refused ($rc): $*: $(head -n 1 "$dir/bad.err")"
    else
        fail "gateway $*: exit $rc, stderr: $(cat "$dir/bad.err")"
    fi
}
gw_rules "$dir/rules.json"
bad_args
bad_args --listen
bad_args --listen abc
bad_args --listen 70000
bad_args --listen 300.1.1.1:80
bad_args --listen 0 --bogus
bad_args --listen 0 extra
bad_args --listen 0 --metrics maybe
bad_args --listen 0 --upstream ftp://127.0.0.1/
bad_args --listen 0 --upstream 'http://127.0.0.1:1/?q=1'
bad_args --listen 0 --store nosuch://x
bad_args --listen 0 --set timeout_ms=0
bad_args --listen 0 --set nosuchoption=1
bad_args --listen 0 --set novalue
bad_args --listen 0 --rules "$dir/no-such-file.json"
if "$GATEWAY" --help | grep -q 'X-API-Key'; then
    pass "--help says where the dimensions come from"
else
    fail "--help"
fi

# ---- three gateways, one Redis, one limit ----------------------------------
gw_redis_start || { echo "FAIL: no redis-server would start"; exit 1; }
store="redis://127.0.0.1:$redis_port/0"
# timeout_ms=1000: every one of the 300 must be Redis's decision, not the
# failure mode's after the 5 ms default on a busy machine.
ports=""
for g in 1 2 3; do
    gw_start "gw$g" --store "$store" --rules "$dir/rules.json" \
        --set timeout_ms=1000 || { fail "gateway $g would not start"; exit 1; }
    ports="$ports $gw_port"
done
# shellcheck disable=SC2086
gw_drive 300 test-key $ports
all_ok=0 all_429=0 g=0
for port in $ports; do
    g=$(( g + 1 ))
    ok=$(gw_count "$g" 200)
    no=$(gw_count "$g" 429)
    all_ok=$(( all_ok + ok ))
    all_429=$(( all_429 + no ))
    m_ok=$(gw_metric "$port" ratelimit_rule_allowed_total)
    m_no=$(gw_metric "$port" ratelimit_rule_denied_total)
    m_all=$(gw_metric "$port" ratelimit_rule_checks_total)
    if [ "$m_ok" = "$ok" ] && [ "$m_no" = "$no" ] &&
       [ "$m_all" = $(( ok + no )) ] && [ $(( ok + no )) -eq 100 ]; then
        pass "gateway $g: $ok admitted, $no refused; /metrics agrees"
    else
        fail "gateway $g: curl saw $ok/$no of 100, /metrics $m_ok/$m_no/$m_all"
    fi
done
if [ "$all_ok" -eq 100 ] && [ "$all_429" -eq 200 ]; then
    pass "300 requests across three gateways: 100 admitted, 200 refused"
else
    fail "300 requests: $all_ok admitted, $all_429 refused (want 100, 200)"
fi
if [ "$(gw_first 429)" = 101 ]; then
    pass "the first 100 were admitted, the 101st refused"
else
    fail "the first 429 was request $(gw_first 429), not 101"
fi

# ---- a 429 as the client sees it ------------------------------------------
a="$dir/answer.$(gw_first 429)"
tr -d '\r' <"$a" >"$dir/429.txt"
hdr() { sed -n "s/^$1: //p" "$dir/429.txt"; }
retry=$(hdr Retry-After)
body=$(tail -n 1 "$dir/429.txt")
if [ -n "$retry" ] && [ "$retry" -ge 1 ] &&
   [ "$(hdr X-RateLimit-Limit)" = 100 ] &&
   [ "$(hdr X-RateLimit-Remaining)" = 0 ] &&
   [ "$(hdr X-RateLimit-Reset)" -gt "$(date +%s)" ] &&
   [ "$(hdr Content-Type)" = application/json ] &&
   [ "$body" = "{\"error\":\"rate_limited\",\"retryAfter\":$retry}" ] &&
   hdr RateLimit-Policy | grep -q '^"api-per-key";q=100;w=3600$' &&
   hdr RateLimit | grep -q '^"api-per-key";r=0;t=[0-9]*$'; then
    pass "429: Retry-After $retry, X-RateLimit-*, RateLimit-Policy, RateLimit, $body"
else
    fail "429 answer:"
    cat "$dir/429.txt"
fi
a="$dir/answer.1"
if tr -d '\r' <"$a" | grep -q '^X-RateLimit-Remaining: 99$' &&
   ! grep -q '^Retry-After' "$a"; then
    pass "an admitted answer carries X-RateLimit-* and no Retry-After"
else
    fail "admitted answer:"
    cat "$a"
fi

# ---- /metrics parses ---------------------------------------------------------
port1=$(echo "$ports" | awk '{print $1}')
curl -s --max-time 10 -o "$dir/metrics.txt" \
    -w '%{http_code} %{content_type}\n' "http://127.0.0.1:$port1/metrics" \
    >"$dir/metrics.head"
if grep -q '^200 text/plain; version=0.0.4' "$dir/metrics.head" &&
   awk '/^#/ || /^$/ { next }
        !/^[a-z_:]+(\{[^}]*\})? [-+0-9.e]+$|^[a-z_:]+(\{[^}]*\})? (\+Inf|NaN)$/ {
            bad = 1; print "bad line: " $0 }
        END { exit bad }' "$dir/metrics.txt"; then
    pass "/metrics: 200, text 0.0.4, every sample line well formed"
else
    fail "/metrics: $(cat "$dir/metrics.head")"
fi
if "$PYTHON" -c 'import prometheus_client.parser' 2>/dev/null; then
    if "$PYTHON" - "$dir/metrics.txt" "$(gw_count 1 200)" <<'EOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
want = int(sys.argv[2])
got = [s.value for f in text_string_to_metric_families(open(sys.argv[1]).read())
       for s in f.samples
       if s.name == "ratelimit_rule_allowed_total" and s.labels == {"rule": "api-per-key"}]
sys.exit(0 if got == [want] else print("allowed_total", got, "want", want) or 1)
EOF
    then
        pass "/metrics read by prometheus_client: allowed_total as counted"
    else
        fail "/metrics by prometheus_client"
    fi
else
    echo "SKIP: $PYTHON has no prometheus_client: the parser's reading"
fi

# ---- an upstream, and --metrics off ------------------------------------------
gw_start front --store "$store" --rules "$dir/rules.json" \
    --set timeout_ms=1000 --upstream "http://127.0.0.1:$port1" ||
    fail "a gateway with an upstream would not start"
front=$gw_port
# Gateway 1 answers the front's request with its canned 200; the rule
# counts it twice (once at each), so a fresh key.
out=$(curl -s --max-time 10 -H 'X-API-Key: fresh' "http://127.0.0.1:$front/api/orders?x=1")
if [ "$out" = OK ] && [ "$(gw_metric "$port1" ratelimit_rule_allowed_total)" = \
     $(( $(gw_count 1 200) + 1 )) ]; then
    pass "passed upstream: the upstream's answer, and its own check there"
else
    fail "through the upstream: '$out'"
fi
gw_start quiet --store memory:// --metrics off ||
    fail "a gateway with --metrics off would not start"
if [ "$(curl -s --max-time 10 "http://127.0.0.1:$gw_port/metrics")" = OK ]; then
    pass "--metrics off: /metrics is an ordinary path (the canned 200)"
else
    fail "--metrics off still serves metrics"
fi
gw_start deadend --store memory:// --upstream "http://127.0.0.1:$redis_port" \
    || fail "a gateway with a dead upstream would not start"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 15 \
    "http://127.0.0.1:$gw_port/anything")
# A Redis port speaks no HTTP: the exchange fails, 502.
if [ "$code" = 502 ]; then
    pass "an upstream that speaks no HTTP: 502"
else
    fail "upstream failure answered $code, not 502"
fi

# ---- the store away: 503, not 429, and one line on stderr ----------------
code_of() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
cat >"$dir/closed.json" <<'EOF2'
{"rules": [{"rule_id": "login", "dimension": "api_key",
            "match": {"endpoint": "/login"}, "limit": 5,
            "window_seconds": 60, "failure_mode": "closed"}]}
EOF2
gw_start closed --store "$store" --rules "$dir/closed.json" \
    --set timeout_ms=100 || fail "a gateway with a closed rule would not start"
kill -STOP "$redis_pid"
codes=""
for i in 1 2 3; do
    codes="$codes $(code_of -H 'X-API-Key: k' "http://127.0.0.1:$gw_port/login")"
done
kill -CONT "$redis_pid"
lines=$(grep -c 'the store is unavailable: rule "login" fails closed' \
    "$dir/closed.log")
if [ "$codes" = " 503 503 503" ] && [ "$lines" -ge 1 ] && [ "$lines" -le 2 ]; then
    pass "Redis stopped: a closed rule answers 503 (not 429), $lines line(s) on stderr for 3"
else
    fail "Redis stopped: closed rule answered$codes, $lines stderr lines"
fi

# ---- per-value rules (issue 25 s3): an override and an allow-list ----------
cat >"$dir/values.json" <<'EOF2'
{"rules": [{"rule_id": "key", "dimension": "api_key",
            "match": {"endpoint": "/v"}, "limit": 2, "window_seconds": 60},
           {"rule_id": "partner", "dimension": "api_key",
            "match": {"endpoint": "/v", "value": "partner-*"}, "limit": 4,
            "window_seconds": 60},
           {"rule_id": "vip", "dimension": "api_key",
            "match": {"endpoint": "/v", "value": ["vip-1", "vip-2"]},
            "unlimited": true}]}
EOF2
gw_start values --store "$store" --rules "$dir/values.json" ||
    fail "a gateway with per-value rules would not start"
got=""
for key in plain partner-a vip-2; do
    got="$got $key:"
    for i in 1 2 3 4 5; do
        got="$got$(code_of -H "X-API-Key: $key" "http://127.0.0.1:$gw_port/v")"
        [ "$i" = 5 ] || got="$got,"
    done
done
if [ "$got" = " plain:200,200,429,429,429 partner-a:200,200,200,200,429 vip-2:200,200,200,200,200" ]; then
    pass "per-value rules: 2 a key, a partner 4, the allow-list unlimited"
else
    fail "per-value rules answered$got"
fi

# ---- huge requests ---------------------------------------------------------------
long() { head -c "$1" /dev/zero | tr '\0' a; }
c1=$(code_of "http://127.0.0.1:$port1/api/$(long 100000)")
c2=$(code_of -H "X-Junk: $(long 100000)" "http://127.0.0.1:$port1/api/orders")
c3=$(code_of "http://127.0.0.1:$port1/$(long 3000)")
c4=$(code_of -H "X-API-Key: $(long 1000)" "http://127.0.0.1:$port1/api/orders")
c5=$(code_of -H 'X-API-Key: after' "http://127.0.0.1:$port1/api/orders")
case "$c1 $c2" in
    "414 431" | "000 "* | *" 000") ok=1 ;;
    *) ok=0 ;;
esac
if [ "$ok" = 1 ] && [ "$c3" = 414 ] && [ "$c4" = 400 ] && [ "$c5" = 200 ]; then
    pass "100 kB path $c1, 100 kB header $c2, 3 kB path $c3, 1 kB key $c4; then $c5"
else
    fail "huge requests: $c1 $c2 $c3 $c4, then $c5"
fi
for p in $gw_pids; do
    kill -0 "$p" 2>/dev/null || fail "gateway $p died"
done
summary
