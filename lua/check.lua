-- check.lua -- the one script a check runs.  It decides a batch of
-- requests: each request's rules are decided and charged atomically,
-- all-or-nothing; the requests are independent of each other (one script
-- call carries every request that queued up while the previous call was
-- out, so Redis runs one script, and reads the clock once, for many).
--
-- KEYS     the state keys of every request's rules, in order:
--          rl:{<client key>}:<rule id>:<shape>
-- ARGV[1]  "0" (the test build alone reads a time here)
-- ARGV[2]  "c": check and charge;  "r": refund charges made by a "c"
-- ARGV[3]  the number of requests; then for each request the number of
--          its keys, followed by 8 values per key:
--   algorithm (0 sliding_window, 1 token_bucket, 2 fixed_window, 3 gcra),
--   limit, burst, window ms, p, q (one unit per p/q ms), cost,
--   "c": soft ("1": mode log, a denial vetoes nothing)
--   "r": the time the charge was made at (ms)
-- Returns for "c": per key {allowed, remaining, reset ms, retry ms}, then
-- the time used; for "r": the number of keys refunded.
-- State keys expire by themselves when their state is fresh again; nothing
-- needs a cleanup job.

local apply = {[0] = sliding_window, token_bucket, fixed_window, gcra}
local load = {[0] = sliding_window_load, token_bucket_load, fixed_window_load, gcra_load}
local save = {[0] = sliding_window_save, token_bucket_save, fixed_window_save, gcra_save}
local refund = {[0] = sliding_window_refund, token_bucket_refund, fixed_window_refund, gcra_refund}

-- State of KEYS[i] as (a, b, c); all zero when the key does not exist.
local function read(key, algo, burst, w, p, q)
  local value = call('GET', key)
  if not value then return 0, 0, 0 end
  return load[algo](burst, w, p, q, value, call('PEXPIRETIME', key))
end

local function write(key, algo, burst, w, p, q, a, b, c)
  local value, exp = save[algo](burst, w, p, q, a, b, c)
  call('SET', key, value, 'PXAT', str(exp))
end

local now = rl_now()
local nreq = tonumber(ARGV[3])
local key, arg = 1, 4

if ARGV[2] == 'r' then
  for r = 1, nreq do
    local k = tonumber(ARGV[arg])
    arg = arg + 1
    for i = 1, k do
      local algo, burst, w = tonumber(ARGV[arg]), tonumber(ARGV[arg + 2]), tonumber(ARGV[arg + 3])
      local p, q, cost = tonumber(ARGV[arg + 4]), tonumber(ARGV[arg + 5]), tonumber(ARGV[arg + 6])
      if cost > 0 and call('EXISTS', KEYS[key]) == 1 then
        local a, b, c = read(KEYS[key], algo, burst, w, p, q)
        a, b, c = refund[algo](burst, w, p, q, a, b, c, cost, idiv(tonumber(ARGV[arg + 7]), w))
        write(KEYS[key], algo, burst, w, p, q, a, b, c)
      end
      key, arg = key + 1, arg + 9
    end
  end
  return key - 1
end

local out, pending, n = {}, {}, 0
for r = 1, nreq do
  local k = tonumber(ARGV[arg])
  local all, npending = true, 0
  arg = arg + 1
  for i = 1, k do
    local algo, limit, burst = tonumber(ARGV[arg]), tonumber(ARGV[arg + 1]), tonumber(ARGV[arg + 2])
    local w, p, q = tonumber(ARGV[arg + 3]), tonumber(ARGV[arg + 4]), tonumber(ARGV[arg + 5])
    local cost = tonumber(ARGV[arg + 6])
    local a, b, c = read(KEYS[key], algo, burst, w, p, q)
    local ok, changed, remaining, reset, retry
    ok, changed, remaining, reset, retry, a, b, c =
      apply[algo](limit, burst, w, p, q, a, b, c, now, cost)
    if not ok and ARGV[arg + 7] ~= '1' then all = false end
    if ok and changed then
      if k == 1 then -- one rule: nothing to hold back, write now
        write(KEYS[key], algo, burst, w, p, q, a, b, c)
      else
        npending = npending + 1
        pending[npending] = {key, algo, burst, w, p, q, a, b, c}
      end
    end
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = ok and 1 or 0, remaining, reset, retry
    n = n + 4
    key, arg = key + 1, arg + 9
  end
  if all then
    for t = 1, npending do
      local x = pending[t]
      write(KEYS[x[1]], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9])
    end
  end
end
out[n + 1] = now
return out
