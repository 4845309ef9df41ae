#!lua flags=allow-cross-slot-keys
-- common.lua -- helpers every libratelimit script shares.  The line above,
-- first in the concatenated script, lets one call touch keys of many slots
-- of one Redis Cluster node (check.lua's "C" mode): batches per master.
-- (The function library drops it: its function carries the same flag.)
--
-- Redis runs Lua 5.1, where every number is a double.  The C library keeps
-- all quantities below 2^52 (rule validation guarantees it), where doubles
-- hold integers exactly; these helpers keep the arithmetic exact too:
-- integer division that never rounds across an integer, and numbers turned
-- into strings without the "%.14g" exponent form Lua would otherwise use.
--
-- The algorithms take and return plain numbers, never tables: a script
-- runs on every check, and allocations are most of what Lua costs here.

local floor, format, tonumber, call -- set below

-- floor(a / b) for integers a >= 0, b > 0.  (a - a % b) / b is
-- floor(a / b) without a call to math.floor (Lua computes a % b as
-- a - floor(a / b) * b, exactly below 2^53): a function call is most of
-- what a division costs here, and a check makes several.
local function idiv(a, b)
  local q = (a - a % b) / b
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function ceil_div(a, b) -- idiv's steps, inline: one call, not two
  local q = (a - a % b) / b
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  if q * b < a then q = q + 1 end
  return q
end

local function str(x)
  return format('%d', x)
end

-- str(x) and tonumber(s) for a count, kept for the small ones (a format()
-- or a strtod costs about what the rest of a key's Lua does, and a
-- window's counts are mostly small): the integers 0 .. DECS - 1 and their
-- decimal strings (nothing else: "05" or " 5" is parsed each time), made
-- once each (by a function library once per server, not per call).
local DECS, decs, nums = 1024, {}, {}
local function dec(x)
  local s = decs[x]
  if s then return s end
  s = format('%d', x)
  if x >= 0 and x < DECS then decs[x], nums[s] = s, x end
  return s
end

local function num(s)
  local x = nums[s]
  if x then return x end
  x = tonumber(s)
  if x and x >= 0 and x < DECS and x % 1 == 0 then dec(x) end
  return x
end

-- tonumber(s) for the decimal numbers a call's ARGV carries (the rule
-- table's numbers, the request counts, costs, indices), remembered by
-- their string: a limiter sends the same few again and again, a table
-- lookup of an interned string costs a tenth of a strtod, and a function
-- library keeps the memo across calls.  Bounded: it starts over after
-- ARGS_MEMO different strings.
local ARGS_MEMO, args_memo, args_count = 4096, {}, 0
local function argnum(s)
  local x = args_memo[s]
  if x then return x end
  x = tonumber(s)
  if args_count >= ARGS_MEMO then args_memo, args_count = {}, 0 end
  if x then args_memo[s], args_count = x, args_count + 1 end
  return x
end

-- A denial's retry time is at least 1 ms.
local function at_least_1(retry)
  if retry > 0 then return retry end
  return 1
end

-- The globals every script uses, kept in locals (a local is read faster).
-- A function library may read no globals at load (Redis gives its load an
-- environment of its own): there this is the first thing a call does.
-- ---- per call ----
floor, format, tonumber, call = math.floor, string.format, _G.tonumber, redis.call
