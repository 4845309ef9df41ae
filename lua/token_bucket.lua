-- token_bucket.lua -- a bucket of `burst` tokens refilled at limit/window.
-- Same steps as token_bucket() in src/algo.c.  State: a = level in units of
-- 1/p token, b = time of the last refill (ms).  In Redis the key holds the
-- level and expires when the bucket is full again, at
--   b + ceil((burst*p - a) / q),
-- so b is recovered exactly from the expiry and nothing else is stored.

local function token_bucket(ap, st, now, cost, d)
  local cap, level, t = ap.burst * ap.p, st.a, st.b
  if now > t then
    local fill_ms = ceil_div(cap - level, ap.q)
    if now - t >= fill_ms then level = cap else level = level + (now - t) * ap.q end
    t = now
  end
  if cost > ap.burst then
    deny(d, ap.w)
  elseif level >= cost * ap.p then
    level = level - cost * ap.p
    d.allowed = true
    d.changed = cost > 0
    d.retry = 0
    if d.changed then st.a = level; st.b = t end
  else
    deny(d, ceil_div(cost * ap.p - level, ap.q))
  end
  d.remaining = idiv(level, ap.p)
  d.reset = t + ceil_div(cap - level, ap.q)
  d.expires = d.reset
end

local function token_bucket_load(ap, value, exp)
  local level = tonumber(value)
  return {a = level, b = exp - ceil_div(ap.burst * ap.p - level, ap.q), c = 0}
end

local function token_bucket_save(ap, st)
  return str(st.a), st.b + ceil_div(ap.burst * ap.p - st.a, ap.q)
end

local function token_bucket_refund(ap, st, cost)
  st.a = math.min(ap.burst * ap.p, st.a + cost * ap.p)
end
