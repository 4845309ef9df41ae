-- common.lua -- helpers every libratelimit script shares.
--
-- Redis runs Lua 5.1, where every number is a double.  The C library keeps
-- all quantities below 2^52 (rule validation guarantees it), where doubles
-- hold integers exactly; these helpers keep the arithmetic exact too:
-- integer division that never rounds across an integer, and numbers turned
-- into strings without the "%.14g" exponent form Lua would otherwise use.

local function idiv(a, b) -- floor(a / b) for integers a >= 0, b > 0
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function ceil_div(a, b)
  local q = idiv(a, b)
  if q * b < a then q = q + 1 end
  return q
end

local function str(x)
  return string.format('%d', x)
end

local function deny(d, retry)
  d.allowed = false
  d.changed = false
  if retry > 0 then d.retry = retry else d.retry = 1 end
end
