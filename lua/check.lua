-- check.lua -- the one script a check runs: every rule of a request whose
-- keys share a slot, decided and charged atomically, all-or-nothing.
--
-- KEYS[i]  the state key of rule i: rl:{<client key>}:<rule id>
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

local algos = {
  [0] = {sliding_window, sliding_window_load, sliding_window_save, sliding_window_refund},
  [1] = {token_bucket, token_bucket_load, token_bucket_save, token_bucket_refund},
  [2] = {fixed_window, fixed_window_load, fixed_window_save, fixed_window_refund},
  [3] = {gcra, gcra_load, gcra_save, gcra_refund},
}

local function params(base)
  return {algo = tonumber(ARGV[base + 1]), limit = tonumber(ARGV[base + 2]),
          burst = tonumber(ARGV[base + 3]), w = tonumber(ARGV[base + 4]),
          p = tonumber(ARGV[base + 5]), q = tonumber(ARGV[base + 6])}
end

local function load(key, ap)
  local value = redis.call('GET', key)
  if not value then return {a = 0, b = 0, c = 0} end
  local exp = redis.call('PEXPIRETIME', key)
  return algos[ap.algo][2](ap, value, exp)
end

local function save(key, ap, st)
  local value, exp = algos[ap.algo][3](ap, st)
  redis.call('SET', key, value, 'PXAT', str(exp))
end

local function refund(now)
  for i = 1, #KEYS do
    local base = 2 + (i - 1) * 8
    local ap = params(base)
    local cost, at = tonumber(ARGV[base + 7]), tonumber(ARGV[base + 8])
    if redis.call('EXISTS', KEYS[i]) == 1 then
      local st = load(KEYS[i], ap)
      algos[ap.algo][4](ap, st, cost, idiv(at, ap.w))
      save(KEYS[i], ap, st)
    end
  end
  return #KEYS
end

local now = rl_now()
if ARGV[2] == 'r' then return refund(now) end

local out, todo, all = {}, {}, true
for i = 1, #KEYS do
  local base = 2 + (i - 1) * 8
  local ap = params(base)
  local cost, soft = tonumber(ARGV[base + 7]), ARGV[base + 8] == '1'
  local st, d = load(KEYS[i], ap), {}
  algos[ap.algo][1](ap, st, now, cost, d)
  if not d.allowed and not soft then all = false end
  if d.allowed and d.changed then todo[#todo + 1] = {KEYS[i], ap, st} end
  out[#out + 1] = d.allowed and 1 or 0
  out[#out + 1] = d.remaining
  out[#out + 1] = d.reset
  out[#out + 1] = d.retry
end
if all then
  for _, k in ipairs(todo) do save(k[1], k[2], k[3]) end
end
out[#out + 1] = now
return out
