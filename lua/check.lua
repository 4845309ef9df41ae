-- check.lua -- the one script a check runs: every rule of a request whose
-- keys share a slot, decided and charged atomically, all-or-nothing.
--
-- KEYS[i]  the state key of rule i: rl:{<client key>}:<rule id>:<shape>
-- ARGV[1]  "0" (the test build alone reads a time here)
-- ARGV[2]  "c": check and charge;  "r": refund charges made by a "c"
-- then 8 values per key:
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
local n = #KEYS

if ARGV[2] == 'r' then
  for i = 1, n do
    local k = 2 + (i - 1) * 8
    local algo, burst, w = tonumber(ARGV[k + 1]), tonumber(ARGV[k + 3]), tonumber(ARGV[k + 4])
    local p, q, cost = tonumber(ARGV[k + 5]), tonumber(ARGV[k + 6]), tonumber(ARGV[k + 7])
    if cost > 0 and call('EXISTS', KEYS[i]) == 1 then
      local a, b, c = read(KEYS[i], algo, burst, w, p, q)
      a, b, c = refund[algo](burst, w, p, q, a, b, c, cost, idiv(tonumber(ARGV[k + 8]), w))
      write(KEYS[i], algo, burst, w, p, q, a, b, c)
    end
  end
  return n
end

local out, todo, all = {}, {}, true
for i = 1, n do
  local k = 2 + (i - 1) * 8
  local algo, limit, burst = tonumber(ARGV[k + 1]), tonumber(ARGV[k + 2]), tonumber(ARGV[k + 3])
  local w, p, q = tonumber(ARGV[k + 4]), tonumber(ARGV[k + 5]), tonumber(ARGV[k + 6])
  local cost = tonumber(ARGV[k + 7])
  local a, b, c = read(KEYS[i], algo, burst, w, p, q)
  local ok, changed, remaining, reset, retry
  ok, changed, remaining, reset, retry, a, b, c =
    apply[algo](limit, burst, w, p, q, a, b, c, now, cost)
  if not ok and ARGV[k + 8] ~= '1' then all = false end
  if ok and changed then todo[#todo + 1] = {i, algo, burst, w, p, q, a, b, c} end
  out[#out + 1] = ok and 1 or 0
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = retry
end
if all then
  for _, t in ipairs(todo) do
    write(KEYS[t[1]], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9])
  end
end
out[#out + 1] = now
return out
