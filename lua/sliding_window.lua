-- sliding_window.lua -- the sliding window counter: this window's count plus
-- the previous one's, weighted by how much of it still overlaps:
--   estimate = prev * (W - elapsed) / W + curr   (kept scaled by W)
-- Same steps as sliding_window() in src/algo.c.  State: a = window index,
-- b = current count, c = previous count.  In Redis the key holds both counts
-- in one integer, prev * 10^10 + curr (counts are at most 10^9), and expires
-- when both windows have passed, at (a + 2) * W, from which a is recovered.

local function sliding_wait(prev, room, w, e)
  local e2 = 0
  if prev > 0 then e2 = w - idiv(room * w, prev) end
  return e2 - e
end

local function sliding_window(ap, st, now, cost, d)
  local w = ap.w
  local idx = idiv(now, w)
  local e = now - idx * w
  local prev, curr, cap = 0, 0, ap.limit * w
  if st.a > idx then idx = st.a; e = 0 end
  if st.a == idx then curr = st.b; prev = st.c
  elseif st.a == idx - 1 then prev = st.b end
  local est = prev * (w - e) + curr * w
  if cost > ap.limit then
    deny(d, w)
  elseif est + cost * w <= cap then
    curr = curr + cost
    est = est + cost * w
    d.allowed = true
    d.changed = cost > 0
    d.retry = 0
    if d.changed then st.a = idx; st.b = curr; st.c = prev end
  elseif curr + cost <= ap.limit then
    deny(d, sliding_wait(prev, ap.limit - curr - cost, w, e))
  else
    deny(d, (w - e) + sliding_wait(curr, ap.limit - cost, w, 0))
  end
  if est >= cap then d.remaining = 0 else d.remaining = idiv(cap - est, w) end
  d.reset = (idx + 1) * w
  d.expires = (idx + 2) * w
end

local function sliding_window_load(ap, value, exp)
  local prev, curr = 0, tonumber(value)
  if #value > 10 then
    prev = tonumber(string.sub(value, 1, -11))
    curr = tonumber(string.sub(value, -10))
  end
  return {a = idiv(exp, ap.w) - 2, b = curr, c = prev}
end

local function sliding_window_save(ap, st)
  local value = str(st.b)
  if st.c > 0 then value = str(st.c) .. string.format('%010d', st.b) end
  return value, (st.a + 2) * ap.w
end

local function sliding_window_refund(ap, st, cost, idx)
  if st.a == idx then st.b = math.max(0, st.b - cost)
  elseif st.a == idx + 1 then st.c = math.max(0, st.c - cost) end
end
