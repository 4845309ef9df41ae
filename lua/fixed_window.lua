-- fixed_window.lua -- one counter per window aligned to the epoch.
-- Same steps as fixed_window() in src/base/algo.c.  State: a = window index,
-- b = count.  In Redis the key holds the count and expires at the window's
-- end, (a + 1) * W, from which a is recovered.

local function fixed_window(limit, burst, w, p, q, a, b, c, now, cost)
  local idx = idiv(now, w)
  if a > idx then idx = a end
  local count = 0
  if a == idx then count = b end
  local ok, changed, retry = false, false, 0
  if cost > limit then
    retry = w
  elseif count + cost <= limit then
    count = count + cost
    ok, changed = true, cost > 0
    if changed then a, b = idx, count end
  else
    retry = at_least_1((idx + 1) * w - now)
  end
  return ok, changed, limit - count, (idx + 1) * w, retry, a, b, c
end

local function fixed_window_load(burst, w, p, q, value, exp)
  return idiv(exp, w) - 1, num(value), 0
end

local function fixed_window_save(burst, w, p, q, a, b, c)
  return dec(b), (a + 1) * w
end

local function fixed_window_refund(burst, w, p, q, a, b, c, cost, idx)
  if a == idx then
    b = b - cost
    if b < 0 then b = 0 end
  end
  return a, b, c
end
