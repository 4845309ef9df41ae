-- check.lua -- the one script a check runs.  It decides a batch of
-- requests: each request's rules are decided and charged atomically,
-- all-or-nothing; the requests are independent of each other (one script
-- call carries every request that queued up while the previous call was
-- out, so Redis runs one script, and reads the clock once, for many).
--
-- KEYS     one per rule of every request, in order: the state key
--          rl:{<client key>}:<rule id>:<shape> (plain layout), or the base
--          name rlc:{<bucket>}:<rule id>:<shape> (compact layout: the state
--          is field <field> of the hash <base>:<epoch>; see compact.lua)
-- ARGV[1]  "0" (the test build alone reads a time here)
-- ARGV[2]  "c": check and charge;  "r": refund charges made by a "c";
--          "C": as "c", for a Redis Cluster batch whose requests may lie in
--          many slots of this node: KEYS is empty and each key's name is a
--          10th value after its 9 (Redis only routes by declared keys, and
--          refuses declared keys of different slots).  A request whose keys
--          this node does not serve now (a stale slot map, a migration) is
--          left undone: its ops answer allowed = -1, and the caller sends it
--          again on its own, with its keys declared, to learn where to go.
-- ARGV[3]  the number of requests; then for each request the number of
--          its keys, followed by 9 values per key:
--   algorithm (0 sliding_window, 1 token_bucket, 2 fixed_window, 3 gcra),
--   limit, burst, window ms, p, q (one unit per p/q ms), cost,
--   "c": soft ("1": mode log, a denial vetoes nothing)
--   "r": the time the charge was made at (ms)
--   field: "" for the plain layout, else the client's field in the compact
--          layout (a decimal integer below 2^31)
-- Returns for "c": per key {allowed, remaining, reset ms, retry ms}, then
-- the time used; for "r": the number of keys refunded.
-- State expires by itself when it is fresh again; nothing needs a cleanup
-- job.

local apply = {[0] = sliding_window, token_bucket, fixed_window, gcra}
local load = {[0] = sliding_window_load, token_bucket_load, fixed_window_load, gcra_load}
local save = {[0] = sliding_window_save, token_bucket_save, fixed_window_save, gcra_save}
local refund = {[0] = sliding_window_refund, token_bucket_refund, fixed_window_refund, gcra_refund}
local cread = {[0] = sliding_window_cread, token_bucket_cread, fixed_window_cread, gcra_cread}
local cwrite = {[0] = sliding_window_cwrite, token_bucket_cwrite, fixed_window_cwrite, gcra_cwrite}
local crefund = {[0] = window_crefund, bucket_crefund, window_crefund, bucket_crefund}

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
local K, stride, cross = KEYS, 9, ARGV[2] == 'C'

if cross then -- the key names follow each key's 9 values
  K, stride = {}, 10
  local a, j = 4, 0
  for r = 1, nreq do
    local k = tonumber(ARGV[a])
    a = a + 1
    for i = 1, k do
      j = j + 1
      K[j] = ARGV[a + 9]
      a = a + 10
    end
  end
end

if ARGV[2] == 'r' then
  for r = 1, nreq do
    local k = tonumber(ARGV[arg])
    arg = arg + 1
    for i = 1, k do
      local algo, burst, w = tonumber(ARGV[arg]), tonumber(ARGV[arg + 2]), tonumber(ARGV[arg + 3])
      local p, q, cost = tonumber(ARGV[arg + 4]), tonumber(ARGV[arg + 5]), tonumber(ARGV[arg + 6])
      local field = ARGV[arg + 8]
      if cost > 0 then
        if field ~= '' then
          crefund[algo](K[key], field, burst, w, p, q, cost, tonumber(ARGV[arg + 7]), now)
        elseif call('EXISTS', K[key]) == 1 then
          local a, b, c = read(K[key], algo, burst, w, p, q)
          a, b, c = refund[algo](burst, w, p, q, a, b, c, cost, idiv(tonumber(ARGV[arg + 7]), w))
          write(K[key], algo, burst, w, p, q, a, b, c)
        end
      end
      key, arg = key + 1, arg + stride
    end
  end
  return key - 1
end

-- One op's state; in a cluster batch, false when this node cannot serve
-- the key (every read comes before any write of its request, so a request
-- stopped here has written nothing).
local function load_state(plain, kname, field, algo, burst, w, p, q)
  if not cross then
    if plain then return true, read(kname, algo, burst, w, p, q) end
    return true, cread[algo](kname, field, burst, w, p, q, now)
  end
  if plain then return pcall(read, kname, algo, burst, w, p, q) end
  return pcall(cread[algo], kname, field, burst, w, p, q, now)
end

local out, pending, n = {}, {}, 0
-- A batch's keys mostly share their rule, so its six numbers are parsed
-- again only when their strings change: Lua 5.1 interns every string, so
-- the comparisons are pointer tests, and tonumber (strtod) was a fifth of
-- a check's time in Redis.
local ra, rl, rb, rw, rp, rq, algo, limit, burst, w, p, q
for r = 1, nreq do
  local k = tonumber(ARGV[arg])
  local all, npending, here, first = true, 0, true, n
  arg = arg + 1
  for i = 1, k do
    local sa, sl, sb, sw, sp, sq = ARGV[arg], ARGV[arg + 1], ARGV[arg + 2], ARGV[arg + 3], ARGV[arg + 4], ARGV[arg + 5]
    if sa ~= ra or sl ~= rl or sb ~= rb or sw ~= rw or sp ~= rp or sq ~= rq then
      ra, rl, rb, rw, rp, rq = sa, sl, sb, sw, sp, sq
      algo, limit, burst = tonumber(sa), tonumber(sl), tonumber(sb)
      w, p, q = tonumber(sw), tonumber(sp), tonumber(sq)
    end
    local cost, field = tonumber(ARGV[arg + 6]), ARGV[arg + 8]
    local plain = field == ''
    local ok, changed, remaining, reset, retry, a, b, c = false, false, 0, 0, 0
    if here then here, a, b, c = load_state(plain, K[key], field, algo, burst, w, p, q) end
    if here then
      ok, changed, remaining, reset, retry, a, b, c =
        apply[algo](limit, burst, w, p, q, a, b, c, now, cost)
      if not ok and ARGV[arg + 7] ~= '1' then all = false end
      if ok and changed then
        if k ~= 1 then -- held back until every rule of the request passed
          npending = npending + 1
          pending[npending] = {key, algo, burst, w, p, q, a, b, c, not plain and field}
        elseif plain then -- one rule: nothing to hold back, write now
          write(K[key], algo, burst, w, p, q, a, b, c)
        else
          cwrite[algo](K[key], field, burst, w, p, q, a, b, c, now)
        end
      end
    end
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = ok and 1 or 0, remaining, reset, retry
    n = n + 4
    key, arg = key + 1, arg + stride
  end
  if not here then -- not this node's: undone, say so
    for t = first + 1, n, 4 do out[t] = -1 end
  elseif all then
    for t = 1, npending do
      local x = pending[t]
      if x[10] then
        cwrite[x[2]](K[x[1]], x[10], x[3], x[4], x[5], x[6], x[7], x[8], x[9], now)
      else
        write(K[x[1]], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9])
      end
    end
  end
end
out[n + 1] = now
return out
