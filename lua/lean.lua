-- lean.lua -- the lean path: one request of one rule on one plain-layout
-- key (what most checks of a fleet are: one connection rarely has two
-- checks to send at once), decided with as few Redis calls and Lua steps
-- as the algorithm allows.  check.lua's general path carries a rule
-- table, per key four values, multi-rule all-or-nothing, both layouts,
-- conversions and leases; a lone call paid for all of it (~14 ARGV
-- values at ~0.9k instructions each, a table returned, PEXPIRETIME).
-- Here a call is one key and one argument, "algo:limit:burst:window:p:q:
-- cost" (src/redis/redis_script.c sends it only for a request of one hard
-- or soft charge, no lease, no replaced shape in force, the plain layout,
-- no sliding log), parsed once per distinct string (a limiter sends the
-- same few again and again) into the algorithm's function and its
-- numbers.  The answer is one string, four little-endian doubles:
-- verdict (1 allowed, -retry ms denied), remaining, reset ms, the time
-- used (a string: a table returned costs Redis ~7k instructions more).
--
-- The state is the plain layout's, byte for byte (the _load and _save of
-- each algorithm file): what the general path and every earlier version
-- of the script wrote is read here, and what is written here they read.
-- The windows are integer-native: their value is an integer (a fixed
-- window's count; a sliding window's prev * 10^10 + curr) whose expiry
-- says the window, so a charge in the state's own window is INCRBY, which
-- keeps the expiry, and needs no GET: the charge is made first, the state
-- before it read back from INCRBY's answer and PEXPIRETIME, the
-- algorithm's maths run on that state (fixed_window()'s and
-- sliding_window()'s steps, written inline; check_lua twin-tests them),
-- and then whatever differs from save()'s result put right (a denial:
-- INCRBY -cost; a state INCRBY made: its expiry; a new window: SET ...
-- PXAT).  What is stored is save()'s result in every case, all within
-- the one atomic call.  The buckets keep their time in the expiry:
-- GET, PEXPIRETIME, SET ... PXAT as the general path.

-- The general steps on one key, as check.lua's: read (value, expiry),
-- decide, write when charged.  The buckets' path, and the windows' where
-- INCRBY cannot serve (no charge, a cost over the limit, counts whose
-- integer would pass 2^53 in Lua's doubles or int64 in Redis).
local lean_load = {[0] = sliding_window_load, token_bucket_load, fixed_window_load, gcra_load}
local lean_apply = {[0] = sliding_window, token_bucket, fixed_window, gcra}
local lean_save = {[0] = sliding_window_save, token_bucket_save, fixed_window_save, gcra_save}

local function lean_answer(ok, remaining, reset, retry, now)
  local verdict = 1
  if not ok then verdict = -retry end
  return struct.pack('<dddd', verdict, remaining, reset, now)
end

local function lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  local value = call('GET', key)
  local a, b, c = 0, 0, 0
  if value then
    a, b, c = lean_load[algo](burst, w, p, q, value, call('PEXPIRETIME', key))
  end
  local ok, changed, remaining, reset, retry
  ok, changed, remaining, reset, retry, a, b, c =
    lean_apply[algo](limit, burst, w, p, q, a, b, c, now, cost)
  if ok and changed then
    local v, exp = lean_save[algo](burst, w, p, q, a, b, c)
    call('SET', key, v, 'PXAT', format('%d', exp))
  end
  return lean_answer(ok, remaining, reset, retry, now)
end

-- A sliding window's integer below this (prev < 900719) is exact in a
-- double.  One whose prev passes 922337203 is no int64: INCRBY refuses it
-- (redis.pcall: the general steps then, as for an ACL user set up before
-- INCRBY was used, without +incrby; a denial's undo is INCRBY -cost, no
-- other right).  A fixed window's count is at most its limit, 10^9.
local LEAN_EXACT, E10 = 9007199254740992, 10000000000

-- The fixed window charged first: INCRBY's answer n, the expiry after it
-- (-1: the INCRBY made the key), the state as it was, fixed_window()'s
-- maths inline (a Lua call costs about what the rest of a step does): the
-- window is [start, start + w), the state's own when its expiry says a
-- later one (a clock gone back: fixed_window() takes the state's window),
-- a fresh count when an earlier one (passed, not yet expired).
local function lean_fixed(key, algo, limit, burst, w, p, q, cost, now)
  if cost < 1 or cost > limit then
    return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  end
  local n = redis.pcall('INCRBY', key, cost)
  if type(n) ~= 'number' then -- refused (an ACL without +incrby)
    return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  end
  local exp = call('PEXPIRETIME', key)
  local start, count = now - now % w, 0
  if exp >= 0 then
    if exp - w > start then start = exp - w end
    if exp - w == start then count = n - cost end
  end
  local reset = start + w
  if count + cost > limit then
    if exp >= 0 then call('INCRBY', key, -cost) else call('DEL', key) end
    local retry = reset - now
    if retry < 1 then retry = 1 end
    return struct.pack('<dddd', -retry, limit - count, reset, now)
  end
  if exp ~= reset then -- INCRBY made the key, or counted a passed window
    if count + cost == n then call('PEXPIREAT', key, format('%d', reset))
    else call('SET', key, dec(count + cost), 'PXAT', format('%d', reset)) end
  end
  return struct.pack('<dddd', 1, limit - count - cost, reset, now)
end

-- The sliding window, the same way: sliding_window()'s maths inline on
-- the state INCRBY's answer and the expiry give, [start, start + w) now's
-- window (the state's own when later), e the time into it.
local function lean_sliding(key, algo, limit, burst, w, p, q, cost, now)
  if cost < 1 or cost > limit then
    return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  end
  local n = redis.pcall('INCRBY', key, cost)
  if type(n) ~= 'number' then
    return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  end
  if n >= LEAN_EXACT then -- Lua's doubles would round it: undo, read it
    call('INCRBY', key, -cost)
    return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  end
  local exp = call('PEXPIRETIME', key)
  local e = now % w
  local start, prev, curr, own = now - e, 0, 0, false
  if exp >= 0 then
    local old, at = n - cost, exp - 2 * w -- at: the state's window, in ms
    local c = (old - old % E10) / E10
    if at > start then start, e = at, 0 end
    if at == start then curr, prev, own = old - c * E10, c, true
    elseif at == start - w then prev = old - c * E10 end
  end
  local reset, cap = start + w, limit * w
  local est = prev * (w - e) + curr * w
  if est + cost * w > cap then
    if exp >= 0 then call('INCRBY', key, -cost) else call('DEL', key) end
    local retry
    if curr + cost <= limit then retry = sliding_wait(prev, limit - curr - cost, w, e)
    else retry = (w - e) + sliding_wait(curr, limit - cost, w, 0) end
    if retry < 1 then retry = 1 end
    local left = 0
    if est < cap then left = idiv(cap - est, w) end
    return struct.pack('<dddd', -retry, left, reset, now)
  end
  curr, est = curr + cost, est + cost * w
  if not own then -- INCRBY made the key, or counted another window
    if prev == 0 and curr == n then
      call('PEXPIREAT', key, format('%d', start + 2 * w))
    else
      local v = dec(curr)
      if prev > 0 then v = format('%d%010d', prev, curr) end
      call('SET', key, v, 'PXAT', format('%d', start + 2 * w))
    end
  end
  local left, x = 0, cap - est
  if x > 0 then left = (x - x % w) / w end
  return struct.pack('<dddd', 1, left, reset, now)
end

local lean_fn = {[0] = lean_sliding, lean_rw, lean_fixed, lean_rw}

-- The argument's numbers by its string, {function, algo, limit, burst, w,
-- p, q, cost}; bounded as argnum's memo.  A string that is not seven
-- decimal integers, or names no algorithm here, is refused.
local LEAN_MEMO, lean_memo, lean_count = 4096, {}, 0
local function lean_args(s)
  local x = lean_memo[s]
  if x then return x end
  local a, l, b, w, p, q, c = string.match(s,
    '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+)$')
  a = tonumber(a)
  if not a or not lean_fn[a] then
    return error('ERR libratelimit: bad lean argument')
  end
  x = {lean_fn[a], a, tonumber(l), tonumber(b), tonumber(w), tonumber(p),
       tonumber(q), tonumber(c)}
  if lean_count >= LEAN_MEMO then lean_memo, lean_count = {}, 0 end
  lean_memo[s], lean_count = x, lean_count + 1
  return x
end

-- One lean check of `key` at `now` (check.lua's mode "l", the function
-- library's function RL_FUNCTION .. "_l").
local function lean_check(key, packed, now)
  local x = lean_args(packed)
  return x[1](key, x[2], x[3], x[4], x[5], x[6], x[7], x[8], now)
end
