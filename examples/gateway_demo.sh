#!/bin/sh
# gateway_demo.sh -- three examples/gateway processes sharing one limit.
# It starts a redis-server on a free loopback port and three gateways on
# it, one rule (100 requests per API key per hour on /api/**), then sends
# 300 requests with one API key round-robin across the three with curl:
# 100 are admitted in all, not 100 per gateway.  It prints each gateway's
# counts, what each gateway's /metrics says, and a 429 as a client sees it.
#
# Without redis-server it tries a store the three processes can share on
# one host (shm://, where the library has it), else runs them on
# memory://, says so, and each gateway then admits 100 on its own.
#
#   gateway_demo.sh BUILDDIR      (make gateway-demo)
set -u
build=${1:-.}
here=$(dirname "$0")
GATEWAY="$build/examples/gateway"
dir=$(mktemp -d)
. "$here/gateway_lib.sh"
trap gw_cleanup EXIT
trap 'exit 1' INT TERM

[ -x "$GATEWAY" ] || {
    echo "gateway_demo: $GATEWAY is not built (it needs libmicrohttpd and libcurl)" >&2
    exit 1
}
gw_rules "$dir/rules.json"
# A check waits at most timeout_ms for the store (5 ms by default, then
# the rule's failure mode decides): on a busy shared machine give Redis
# 1 s, so that every one of the 300 is Redis's decision.
common="--rules $dir/rules.json --set timeout_ms=1000"

if command -v redis-server >/dev/null 2>&1 && gw_redis_start; then
    store="redis://127.0.0.1:$redis_port/0"
    echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$redis_port"
    expect=100
elif gw_shm="rl-gateway-demo-$$" &&
     gw_start probe --store "shm://$gw_shm" $common 2>/dev/null; then
    store="shm://$gw_shm"
    echo "redis-server is not installed: the three gateways share $store"
    echo "(the limit holds across the processes of this host)"
    expect=100
else
    store="memory://"
    echo "redis-server is not installed and this build has no shared store:"
    echo "the gateways run on memory://, each with its own limit, so each"
    echo "admits up to 100 and the three up to 300."
    expect=300
fi
ports=""
for g in 1 2 3; do
    gw_start "gw$g" --store "$store" $common || exit 1
    ports="$ports $gw_port"
done
echo "three gateways on ports$ports, store $store"
echo "rule api-per-key: 100 requests per X-API-Key per hour on /api/**"
echo
echo "300 requests, round-robin: curl -H 'X-API-Key: demo-key' http://127.0.0.1:PORT/api/orders"
# shellcheck disable=SC2086
gw_drive 300 demo-key $ports

echo
printf '%-8s %-6s %9s %9s %18s\n' gateway port admitted rejected "its /metrics a/d"
all_ok=0 all_429=0 g=0
for port in $ports; do
    g=$(( g + 1 ))
    ok=$(gw_count "$g" 200)
    no=$(gw_count "$g" 429)
    all_ok=$(( all_ok + ok ))
    all_429=$(( all_429 + no ))
    m="$(gw_metric "$port" ratelimit_rule_allowed_total)/$(gw_metric "$port" ratelimit_rule_denied_total)"
    printf '%-8s %-6s %9s %9s %18s\n' "$g" "$port" "$ok" "$no" "$m"
done
printf '%-8s %-6s %9s %9s\n' all "" "$all_ok" "$all_429"
echo
echo "$all_ok admitted of 300 across the three gateways (the rule's limit: 100;"
echo "expected here: $expect)"

if first=$(gw_first 429); then
    echo
    echo "The first 429 a client got (request $first), headers and body:"
    echo
    tr -d '\r' <"$dir/answer.$first" | sed 's/^/    /'
    echo
fi
[ "$all_ok" -eq "$expect" ]
