-- gcra.lua -- the generic cell rate algorithm: one theoretical arrival time.
-- Same steps as gcra() in src/algo.c.  State: a = TAT in ms, b = its
-- fraction in 1/q ms.  In Redis the key holds the fraction and expires at
-- the TAT rounded up, which is exactly when the state becomes fresh again.

local function gcra(ap, st, now, cost, d)
  local cap, tat, t = ap.burst * ap.p, st.a, now
  local span = idiv(cap, ap.q) + 1
  if tat - t > span then t = tat - span end
  local debt = 0
  if tat > t or (tat == t and st.b > 0) then debt = (tat - t) * ap.q + st.b end
  if cost > ap.burst then
    deny(d, ap.w)
  elseif debt + cost * ap.p <= cap then
    debt = debt + cost * ap.p
    d.allowed = true
    d.changed = cost > 0
    d.retry = 0
    if d.changed then
      st.a = t + idiv(debt, ap.q)
      st.b = debt - idiv(debt, ap.q) * ap.q
    end
  else
    deny(d, ceil_div(debt + cost * ap.p - cap, ap.q))
  end
  if debt >= cap then d.remaining = 0 else d.remaining = idiv(cap - debt, ap.p) end
  d.reset = t + ceil_div(debt, ap.q)
  d.expires = d.reset
end

local function gcra_load(ap, value, exp)
  local frac = tonumber(value)
  if frac > 0 then return {a = exp - 1, b = frac, c = 0} end
  return {a = exp, b = 0, c = 0}
end

local function gcra_save(ap, st)
  if st.b > 0 then return str(st.b), st.a + 1 end
  return '0', st.a
end

local function gcra_refund(ap, st, cost)
  local units = st.a * ap.q + st.b - cost * ap.p
  st.a = idiv(units, ap.q)
  st.b = units - st.a * ap.q
end
