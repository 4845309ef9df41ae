-- gcra.lua -- the generic cell rate algorithm: one theoretical arrival time.
-- Same steps as gcra() in src/base/algo.c.  State: a = TAT in ms, b = its
-- fraction in 1/q ms.  In Redis the key holds the fraction and expires at
-- the TAT rounded up, which is exactly when the state becomes fresh again.

local function gcra(limit, burst, w, p, q, a, b, c, now, cost)
  local cap, tat, t = burst * p, a, now
  if b >= q then b = q - 1 end -- saved under another limit: see token_bucket
  local span = idiv(cap, q) + 1
  if tat - t > span then t = tat - span end
  local debt = 0
  if tat > t or (tat == t and b > 0) then debt = (tat - t) * q + b end
  local ok, changed, retry = false, false, 0
  if cost > burst then
    retry = w
  elseif debt + cost * p <= cap then
    debt = debt + cost * p
    ok, changed = true, cost > 0
    if changed then
      a = t + idiv(debt, q)
      b = debt - idiv(debt, q) * q
    end
  else
    retry = at_least_1(ceil_div(debt + cost * p - cap, q))
  end
  local remaining = 0
  if debt < cap then remaining = idiv(cap - debt, p) end
  return ok, changed, remaining, t + ceil_div(debt, q), retry, a, b, c
end

local function gcra_load(burst, w, p, q, value, exp)
  local frac = num(value)
  if frac > 0 then return exp - 1, frac, 0 end
  return exp, 0, 0
end

local function gcra_save(burst, w, p, q, a, b, c)
  if b > 0 then return format('%d', b), a + 1 end
  return '0', a
end

-- TAT - cost*p/q, kept exact: a*q itself may pass 2^53 (a is a time in
-- ms, q up to 10^9), so whole ms are borrowed from a instead.
local function gcra_refund(burst, w, p, q, a, b, c, cost, idx)
  local owed = cost * p - b
  if owed <= 0 then return a, -owed, c end
  local ms = ceil_div(owed, q)
  return a - ms, ms * q - owed, c
end
