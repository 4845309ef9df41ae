-- rulesbench.lua -- wrk script for bench/rulesbench.sh.
--
--   RULESBENCH_MODE=get|put RULESBENCH_TOKEN=... RULESBENCH_OUT=FILE \
--   RULESBENCH_RULES=N wrk ... -s rulesbench.lua URL
--
-- (The environment, not wrk's "-- args": done() runs in the main Lua
-- state, which never sees init()'s arguments.)
-- MODE "get": the request wrk was given (URL's path), unchanged.
-- MODE "put": PUT /v1/rules/rNNN with a new limit each time, cycling over
--   the N rules the script loaded (so the set keeps its size), with the
--   bearer TOKEN.
-- At the end, one JSON object is appended to FILE: requests, duration,
-- socket and status errors, latency p50 / p99 / mean (microseconds).

local mode = os.getenv("RULESBENCH_MODE") or "get"
local token = os.getenv("RULESBENCH_TOKEN") or ""
local out = os.getenv("RULESBENCH_OUT") or "/dev/stdout"
local rules = tonumber(os.getenv("RULESBENCH_RULES") or "100")
local threads = 0
local n = 0

function setup(thread)
   thread:set("tid", threads)
   threads = threads + 1
end

function init(args)
   n = (tid or 0) * 7919
end

function request()
   if mode ~= "put" then
      return wrk.request()
   end
   n = n + 1
   local path = string.format("/v1/rules/r%03d", n % rules)
   local body = string.format(
      '{"dimension":"user","limit":%d,"windowSeconds":60}', 100 + n % 1000)
   return wrk.format("PUT", path, {
      ["Authorization"] = "Bearer " .. token,
      ["Content-Type"] = "application/json"}, body)
end

function done(summary, latency, requests)
   local e = summary.errors
   local f = assert(io.open(out, "a"))
   f:write(string.format(
      '{"requests":%d,"duration_us":%d,"socket_errors":%d,' ..
      '"status_errors":%d,"p50_us":%d,"p99_us":%d,"mean_us":%.1f}\n',
      summary.requests, summary.duration,
      e.connect + e.read + e.write + e.timeout, e.status,
      latency:percentile(50), latency:percentile(99), latency.mean))
   f:close()
end
