-- sliding_window.lua -- the sliding window counter: this window's count plus
-- the previous one's, weighted by how much of it still overlaps:
--   estimate = prev * (W - elapsed) / W + curr   (kept scaled by W)
-- Same steps as sliding_window() in src/base/algo.c.  State: a = window index,
-- b = current count, c = previous count.  In Redis the key holds both counts
-- in one integer, prev * 10^10 + curr (counts are at most 10^9), and expires
-- when both windows have passed, at (a + 2) * W, from which a is recovered.

local function sliding_wait(prev, room, w, e)
  local e2 = 0
  if prev > 0 then e2 = w - idiv(room * w, prev) end
  return e2 - e
end

local function sliding_window(limit, burst, w, p, q, a, b, c, now, cost)
  local idx = idiv(now, w)
  local e = now - idx * w
  local prev, curr, cap = 0, 0, limit * w
  if a > idx then idx = a; e = 0 end
  if a == idx then curr = b; prev = c
  elseif a == idx - 1 then prev = b end
  local est = prev * (w - e) + curr * w
  local ok, changed, retry = false, false, 0
  if cost > limit then
    retry = w
  elseif est + cost * w <= cap then
    curr = curr + cost
    est = est + cost * w
    ok, changed = true, cost > 0
    if changed then a, b, c = idx, curr, prev end
  elseif curr + cost <= limit then
    retry = at_least_1(sliding_wait(prev, limit - curr - cost, w, e))
  else
    retry = at_least_1((w - e) + sliding_wait(curr, limit - cost, w, 0))
  end
  local remaining = 0
  if est < cap then remaining = idiv(cap - est, w) end
  return ok, changed, remaining, (idx + 1) * w, retry, a, b, c
end

local function sliding_window_load(burst, w, p, q, value, exp)
  if #value > 10 then
    return idiv(exp, w) - 2, tonumber(string.sub(value, -10)),
           tonumber(string.sub(value, 1, -11))
  end
  return idiv(exp, w) - 2, num(value), 0
end

local function sliding_window_save(burst, w, p, q, a, b, c)
  if c > 0 then return format('%d%010d', c, b), (a + 2) * w end
  return dec(b), (a + 2) * w
end

local function sliding_window_refund(burst, w, p, q, a, b, c, cost, idx)
  if a == idx then
    b = b - cost
    if b < 0 then b = 0 end
  elseif a == idx + 1 then
    c = c - cost
    if c < 0 then c = 0 end
  end
  return a, b, c
end
