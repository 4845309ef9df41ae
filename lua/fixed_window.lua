-- fixed_window.lua -- one counter per window aligned to the epoch.
-- Same steps as fixed_window() in src/algo.c.  State: a = window index,
-- b = count.  In Redis the key holds the count and expires at the window's
-- end, (a + 1) * W, from which a is recovered.

local function fixed_window(ap, st, now, cost, d)
  local w = ap.w
  local idx = idiv(now, w)
  if st.a > idx then idx = st.a end
  local count = 0
  if st.a == idx then count = st.b end
  if cost > ap.limit then
    deny(d, w)
  elseif count + cost <= ap.limit then
    count = count + cost
    d.allowed = true
    d.changed = cost > 0
    d.retry = 0
    if d.changed then st.a = idx; st.b = count end
  else
    deny(d, (idx + 1) * w - now)
  end
  d.remaining = ap.limit - count
  d.reset = (idx + 1) * w
  d.expires = d.reset
end

local function fixed_window_load(ap, value, exp)
  return {a = idiv(exp, ap.w) - 1, b = tonumber(value), c = 0}
end

local function fixed_window_save(ap, st)
  return str(st.b), (st.a + 1) * ap.w
end

local function fixed_window_refund(ap, st, cost, idx)
  if st.a == idx then st.b = math.max(0, st.b - cost) end
end
