#!/bin/sh
# logshape.sh -- why the sliding log is one packed string in Redis, not a
# sorted set: both shapes on one private redis-server.  What it runs:
# docs/BENCHMARKS.md, "How each bench measures".
#
#   sh bench/logshape.sh [--json] [KEYS]
set -eu
json=0
[ "${1:-}" = --json ] && { json=1; shift; }
keys=${1:-5000}
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
. "$here/redis-up.sh"
redis_init logshape.sh 'logshape.XXXXXX'
redis_up 10 redis_rand_port
port=$REDIS_PORT
cli() { redis-cli -p "$port" "$@"; }

packed='local key, limit, w = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call("GET", key) or ""
local n = #s / 6
local lo, hi = 1, n + 1
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  if struct.unpack(">I6", s, (mid - 1) * 6 + 1) + w > now then hi = mid else lo = mid + 1 end
end
local live = n - lo + 1
if live + 1 > limit then return 0 end
local reset = now + w
if lo <= n then reset = struct.unpack(">I6", s, (lo - 1) * 6 + 1) + w end
s = string.sub(s, (lo - 1) * 6 + 1) .. struct.pack(">I6", now)
redis.call("SET", key, s, "PXAT", string.format("%d", now + w))
return reset'
zset='local key, limit, w = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", key, "-inf", now - w)
local live = redis.call("ZCARD", key)
if live + 1 > limit then return 0 end
local reset = now + w
local oldest = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
if oldest[2] then reset = tonumber(oldest[2]) + w end
redis.call("ZADD", key, now, string.format("%d:%d", now, live))
redis.call("PEXPIRE", key, w)
return reset'

used() { cli info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }
usec() { cli info commandstats | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p'; }

run() { # shape script times -> "bytes usec"
    cli flushall >/dev/null
    sha=$(cli script load "$2")
    before=$(used)
    cli config resetstat >/dev/null
    redis-benchmark -p "$port" -c 16 -P 16 -n $((keys * $3)) -r "$keys" -q \
        evalsha "$sha" 1 "log:__rand_int__" 1000 86400000 >/dev/null
    n=$(cli dbsize)
    after=$(used)
    echo "$(( (after - before) / n )) $(usec)"
}

for times in 10 100; do
    set -- $(run packed "$packed" $times)
    pb=$1 pu=$2
    set -- $(run zset "$zset" $times)
    zb=$1 zu=$2
    if [ $json = 1 ]; then
        printf '{"figure":"log_bytes_per_client_%s","value":%s,"unit":"B","ref":%s,"ref_name":"sorted_set","clients":%s}\n' \
            "$times" "$pb" "$zb" "$keys"
        printf '{"figure":"log_usec_per_check_%s","value":%s,"unit":"us","ref":%s,"ref_name":"sorted_set","clients":%s}\n' \
            "$times" "$pu" "$zu" "$keys"
    else
        printf '%-28s %8s B   sorted set %8s B\n' "bytes per client, ~$times times" "$pb" "$zb"
        printf '%-28s %8s us  sorted set %8s us\n' "Redis CPU per check" "$pu" "$zu"
    fi
done
