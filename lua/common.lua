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
