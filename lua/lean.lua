-- lean.lua -- the lean path: one-rule checks on plain-layout keys (what
-- most checks of a fleet are: one connection rarely has two checks to
-- send at once, and a batch is mostly such checks), decided with as few
-- Redis calls and Lua steps as the algorithm allows.  check.lua's general
-- path carries a rule table, per key four values, multi-rule
-- all-or-nothing, both layouts, conversions and leases; a lone call paid
-- for all of it (~14 ARGV values at ~0.9k instructions each, a table
-- returned, PEXPIRETIME).  Here a check is one key and one argument,
-- "algo:limit:burst:window:p:q:cost[:1]" (src/redis/redis_script.c sends it
-- only for a request of one hard or soft charge, no lease, no replaced
-- shape in force, the plain layout, no sliding log), parsed once per
-- distinct string (a limiter sends the same few again and again) into
-- the algorithm's function and its numbers.  A lone check's answer is one
-- string, four little-endian doubles: verdict (1 allowed, -retry ms
-- denied), remaining, reset ms, the time used (a string: a table
-- returned costs Redis ~7k instructions more); a batch's is the general
-- path's, {three doubles an op, the time}.
--
-- The state is the plain layout's, byte for byte (the _load and _save of
-- each algorithm file): what the general path and every earlier version
-- of the script wrote is read here, and what is written here they read,
-- so limiters of two versions may share keys during a rolling deploy.
-- Only what changes is written:
-- - the windows are integer-native: their value is an integer (a fixed
--   window's count; a sliding window's prev * 10^10 + curr) whose expiry
--   says the window, so a charge in the state's own window is INCRBY,
--   which keeps the expiry, and needs no GET: the charge is made first,
--   the state before it read back from INCRBY's answer and the expiry,
--   the algorithm's maths run on that state (fixed_window()'s and
--   sliding_window()'s steps, written inline; check_lua_lean tests them),
--   and then whatever differs from save()'s result put right (a denial:
--   INCRBY -cost; a state INCRBY made: its expiry; a new window: SET ...
--   PXAT);
-- - a GCRA whose q is 1 (a whole number of ms per unit: the rate divides
--   the window) keeps its whole state in the expiry (the value, the TAT's
--   fraction, is always "0"): PEXPIREAT moves it, nothing is read but the
--   expiry;
-- - a token bucket whose q is 1 keeps its whole state in the expiry too
--   (GCRA's rule: the level at now is the capacity less the time to
--   full, whatever the value, also on a clock gone back): SET "0" PXAT
--   writes it, nothing is read but the expiry (lean_bucket says why "0"
--   and not PEXPIREAT alone);
--   the rolling-deploy rule: where no limiter before 1.1.0 shares the
--   keys (option redis_oldest_limiter 1.1, an argument ending ":1"), a
--   live key's charge is PEXPIREAT alone, a new key's SET "0" PXAT; a
--   fleet that may still run 1.0.x limiters keeps the default (1.0)
--   until the last of them is gone, and may switch after;
-- - the other buckets (q > 1) take the general steps: GET, the expiry,
--   SET ... PXAT.
-- What is stored is save()'s result in every case (the q = 1 token
-- bucket: the same state in its level-0 form, or with ":1" its expiry
-- under whatever level >= 0 the key held: the same state to every reader
-- since 1.1.0), all within the one atomic call.
--
-- The time: Redis's own clock, in ms.  A lone check of a key whose state
-- lives reads it off the key: PEXPIRETIME - PTTL (both integers Redis
-- computes from its clock; the state's expiry is read anyway) instead of
-- TIME (an array of two strings, and their conversion: ~9k instructions).
-- A key without an expiry (new) or at it (PTTL 0 is clamped) reads TIME,
-- as does an ACL user set up without +pttl (refused, not failed).  A
-- batch reads TIME once for all its checks.

-- The key's expiry (-2: no key, -1: none) and the time: `now` when given
-- (a batch's, or the test build's), else Redis's clock as above.
local function lean_clock(key, now)
  if now then return call('PEXPIRETIME', key), now end
  local d = redis.pcall('PTTL', key)
  if d == -1 or d == -2 then return d, rl_now() end
  if type(d) == 'number' and d > 0 then
    local exp = call('PEXPIRETIME', key)
    return exp, exp - d
  end
  return call('PEXPIRETIME', key), rl_now() -- at it, or no +pttl
end

-- The general steps on one key, as check.lua's: read (value, expiry),
-- decide, write when charged.  The buckets with q > 1, and every path
-- below where its shortcut cannot serve (no charge, a cost over the
-- limit, counts whose integer would pass 2^53 in Lua's doubles or int64
-- in Redis).  A function returns the op's answer, four numbers.
local lean_load = {[0] = sliding_window_load, token_bucket_load, fixed_window_load, gcra_load}
local lean_apply = {[0] = sliding_window, token_bucket, fixed_window, gcra}
local lean_save = {[0] = sliding_window_save, token_bucket_save, fixed_window_save, gcra_save}

local function lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  local value = call('GET', key)
  local a, b, c = 0, 0, 0
  if value then
    local exp
    exp, now = lean_clock(key, now)
    a, b, c = lean_load[algo](burst, w, p, q, value, exp)
  elseif not now then
    now = rl_now()
  end
  local ok, changed, remaining, reset, retry
  ok, changed, remaining, reset, retry, a, b, c =
    lean_apply[algo](limit, burst, w, p, q, a, b, c, now, cost)
  if ok and changed then
    local v, exp = lean_save[algo](burst, w, p, q, a, b, c)
    call('SET', key, v, 'PXAT', format('%d', exp))
  end
  if ok then return 1, remaining, reset, now end
  return -retry, remaining, reset, now
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
  local exp
  exp, now = lean_clock(key, now)
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
    return -retry, limit - count, reset, now
  end
  if exp ~= reset then -- INCRBY made the key, or counted a passed window
    if count + cost == n then call('PEXPIREAT', key, format('%d', reset))
    else call('SET', key, dec(count + cost), 'PXAT', format('%d', reset)) end
  end
  return 1, limit - count - cost, reset, now
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
  local exp
  exp, now = lean_clock(key, now)
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
    return -retry, left, reset, now
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
  return 1, left, reset, now
end

-- GCRA, q = 1: the TAT is the expiry (gcra_load with the fraction 0,
-- which it always is: q = 1 leaves none; gcra() would clamp any to 0
-- too), gcra()'s maths inline, PEXPIREAT to the new TAT (or SET "0" for
-- a new key).
local function lean_gcra1(key, algo, limit, burst, w, p, q, cost, now)
  if q ~= 1 or cost < 1 or cost > burst then
    return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  end
  local exp
  exp, now = lean_clock(key, now)
  if exp == -1 then -- no expiry: not a state this path wrote
    return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
  end
  local cap, tat, t, debt = burst * p, exp, now, 0
  if exp < 0 then tat = 0 end
  if tat - t > cap + 1 then t = tat - cap - 1 end
  if tat > t then debt = tat - t end
  local need, left = debt + cost * p, 0
  if need > cap then
    if debt < cap then left = idiv(cap - debt, p) end
    return -(need - cap), left, t + debt, now
  end
  if exp < 0 then call('SET', key, '0', 'PXAT', format('%d', t + need))
  else call('PEXPIREAT', key, format('%d', t + need)) end
  if need < cap then left = idiv(cap - need, p) end
  return 1, left, t + need, now
end

-- The token bucket, q = 1: its whole state is the expiry, exp, when it
-- is full again (token_bucket()'s rule: the level at now is cap - (exp -
-- now), at most cap, at least -cap, also when the state's own time is
-- ahead: a clock gone back refills nothing for the stepped time, a debt
-- reads below empty).  token_bucket()'s maths inline; the charge is
-- written as SET "0" PXAT the new exp: nothing is read but the expiry,
-- and the value says level 0 at exp - cap, the same state in
-- token_bucket_load's reading.  A limiter of an earlier version sharing
-- the key (a rolling deploy) reads that value as its level held at exp -
-- cap: exactly cap - (exp - now) from then on, 0 before (never more than
-- this path gives).  PEXPIREAT alone would leave the value an earlier
-- version read as a level held: more than this path gives.
-- lean_bucket(true) is the function for a fleet whose oldest limiter is
-- 1.1.0 or later (option redis_oldest_limiter 1.1, the argument's ":1"):
-- a live key's charge is PEXPIREAT alone (every reader since 1.1.0 reads
-- a q = 1 bucket's level from its expiry, whatever its value: what the
-- value is, "0" or a level >= 0 the general path, a refund or RL.CHECK
-- wrote, token_bucket_load's b moves with it; none writes a level below
-- 0: a debt is 0 with a later expiry), a new key still SET "0".
local function lean_bucket(expiry_only)
  return function(key, algo, limit, burst, w, p, q, cost, now)
    if q ~= 1 or cost < 1 or cost > burst then
      return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
    end
    local exp
    exp, now = lean_clock(key, now)
    if exp == -1 then -- no expiry: not a state this path wrote
      return lean_rw(key, algo, limit, burst, w, p, q, cost, now)
    end
    local cap = burst * p
    local level = cap
    if exp > now then
      level = cap - (exp - now)
      if level < -cap then level = -cap end
    end
    local need, left = cost * p, 0
    if level < need then
      if level > 0 then left = idiv(level, p) end
      return -(need - level), left, now + cap - level, now
    end
    level = level - need
    local full = now + cap - level
    if expiry_only and exp >= 0 then call('PEXPIREAT', key, format('%d', full))
    else call('SET', key, '0', 'PXAT', format('%d', full)) end
    return 1, idiv(level, p), full, now
  end
end

-- The functions by the argument's algorithm, and by its tail: none (the
-- default, option redis_oldest_limiter 1.0) or ":1" (1.1).
local function lean_table(expiry_only)
  return {[0] = lean_sliding, lean_bucket(expiry_only), lean_fixed, lean_gcra1}
end
local lean_fns = {[''] = lean_table(false), [':1'] = lean_table(true)}

-- The argument's numbers by its string, {function, algo, limit, burst, w,
-- p, q, cost}; bounded as argnum's memo.  A string that is not seven
-- decimal integers and a tail lean_fns knows, or names no algorithm
-- here, is refused.
local LEAN_MEMO, lean_memo, lean_count = 4096, {}, 0
local function lean_args(s)
  local x = lean_memo[s]
  if x then return x end
  local a, l, b, w, p, q, c, t = string.match(s,
    '^(%d+):(%d+):(%d+):(%d+):(%d+):(%d+):(%d+)(.*)$')
  local fn = lean_fns[t]
  a = tonumber(a)
  if not a or not fn or not fn[a] then
    return error('ERR libratelimit: bad lean argument')
  end
  x = {fn[a], a, tonumber(l), tonumber(b), tonumber(w), tonumber(p),
       tonumber(q), tonumber(c)}
  if lean_count >= LEAN_MEMO then lean_memo, lean_count = {}, 0 end
  lean_memo[s], lean_count = x, lean_count + 1
  return x
end

-- One lean check of `key` (check.lua's mode "l", the function library's
-- function RL_FUNCTION .. "_l"); `now` nil but in the test build.
local function lean_check(key, packed, now)
  local x = lean_args(packed)
  return struct.pack('<dddd', x[1](key, x[2], x[3], x[4], x[5], x[6], x[7], x[8], now))
end

-- A batch of lean checks (check.lua's mode "L", the function library's
-- RL_FUNCTION .. "_b"): KEYS[i] with ARGV[first + i - 1], each its own
-- request (in order: a key named twice sees the first check's charge), at
-- one time.  The answer as the general path's: {three doubles an op in
-- one string, now}; its numbers in a table kept across calls, packed
-- LEAN_CHUNK a struct.pack (well within Lua's stack).
local LEAN_CHUNK, lean_out, lean_fmt = 240, {}, {}
local function lean_pack(n, i)
  local f = lean_fmt[n]
  if not f then f = '<' .. string.rep('d', n); lean_fmt[n] = f end
  return struct.pack(f, unpack(lean_out, i, i + n - 1))
end

local function lean_batch(K, A, first, now)
  local out, n = lean_out, 0
  for i = 1, #K do
    local x = lean_args(A[first + i - 1])
    out[n + 1], out[n + 2], out[n + 3] =
      x[1](K[i], x[2], x[3], x[4], x[5], x[6], x[7], x[8], now)
    n = n + 3
  end
  if n <= LEAN_CHUNK then return {lean_pack(n, 1), now} end
  local parts = {}
  for i = 1, n, LEAN_CHUNK do
    local m = n - i + 1
    if m > LEAN_CHUNK then m = LEAN_CHUNK end
    parts[#parts + 1] = lean_pack(m, i)
  end
  return {table.concat(parts), now}
end
