-- sliding_log.lua -- the sliding log: one time per admitted unit, exact.
-- Same steps as algo_log_apply(), algo_log_commit() and algo_log_refund()
-- in src/base/algo.c (src/base/algo.h has the rule).  State: a = the log, a string
-- of 6-byte big-endian times in ms, oldest first (6 bytes reach the year
-- 10889; 6 x limit bytes at most, limit <= RL_LOG_LIMIT_MAX); 0 when the
-- client has none; b and c unused.  check.lua reads the value as it is
-- (no PEXPIRETIME: the times say when it expires).  The key expires when its newest time
-- leaves the window.  A check reads one position per step of a binary
-- search (the first time still counting) and, when it charges, writes
-- the log cut at that point with the charge's times appended: its Lua
-- work does not grow with the log.

local LOG_B = 6 -- bytes per time

local function log_time(s, i) -- the i-th time (1-based)
  return (struct.unpack('>I6', s, (i - 1) * LOG_B + 1))
end

-- The first (1-based) of the n times t in s with t + w > bound, n + 1 if
-- none (s is sorted).
local function log_search(s, n, bound, w)
  local lo, hi = 1, n + 1
  while lo < hi do
    local mid = lo + idiv(hi - lo, 2)
    if log_time(s, mid) + w > bound then hi = mid else lo = mid + 1 end
  end
  return lo
end

local function sliding_log(limit, burst, w, p, q, a, b, c, now, cost)
  local s = a
  if s == 0 then s = '' end
  local n = #s / LOG_B
  if n > 0 then -- clock went back: stay at the newest time seen
    local newest = log_time(s, n)
    if newest > now then now = newest end
  end
  local first = log_search(s, n, now, w)
  local live = n - first + 1
  local ok, changed, retry = false, false, 0
  if cost > limit then
    retry = w
  elseif live + cost <= limit then
    live = live + cost
    ok, changed = true, cost > 0
  else
    retry = at_least_1(log_time(s, first + live + cost - limit - 1) + w - now)
  end
  local remaining, reset = 0, now
  if live < limit then remaining = limit - live end
  if first <= n then reset = log_time(s, first) + w
  elseif changed then reset = now + w end
  if changed then
    s = string.sub(s, (first - 1) * LOG_B + 1) ..
        string.rep(struct.pack('>I6', now), cost)
  end
  return ok, changed, remaining, reset, retry, s, 0, 0
end

-- An empty log (all refunded) is saved as expired: SET ... PXAT 1
-- deletes the key.
local function sliding_log_save(burst, w, p, q, a, b, c)
  if a == 0 or #a == 0 then return '', 1 end
  return a, log_time(a, #a / LOG_B) + w
end

-- Remove the `cost` oldest times at or after `at`, the charge's time.
local function sliding_log_refund(burst, w, p, q, a, b, c, cost, idx, at)
  local n = #a / LOG_B
  local i = log_search(a, n, at - 1, 0) -- the first time >= at
  local k = n - i + 1
  if k > cost then k = cost end
  return string.sub(a, 1, (i - 1) * LOG_B) ..
         string.sub(a, (i - 1 + k) * LOG_B + 1), b, c
end
