-- token_bucket.lua -- a bucket of `burst` tokens refilled at limit/window.
-- Same steps as token_bucket() in src/base/algo.c.  State: a = level in
-- units of 1/p token at b, the time of the last charge (ms); the level at
-- any now, also one before b, is a + (now - b) * q, within [-cap, cap]:
-- GCRA's rule (a token bucket on a clock gone back refills nothing for
-- the stepped time), so the whole state is one time, when the bucket is
-- full again.  In Redis the key holds a level and expires then, at
--   b + ceil((burst*p - a) / q),
-- so b is recovered exactly from the expiry and nothing else is stored.
-- The lean path (lean.lua, q = 1) writes every state as level 0 at that
-- time less a bucket's refill: value "0", the same expiry.
--
-- Every algorithm: (limit, burst, w, p, q, a, b, c, now, cost) ->
--   allowed, changed, remaining, reset, retry, a, b, c  (the new state)

-- The level at now from `level` at t, capped at cap (a level saved under
-- other numbers is capped first), at least -cap; for a now before t (a
-- clock gone back, a debt's refill time to come) that much lower: GCRA's
-- rule, a clock gone back refills nothing for the stepped time.  Each
-- test keeps (now - t) * q exact.  algo_bucket_refill() in
-- src/base/algo.c; settle.lua's debts and convert.lua use it too.
local function token_bucket_refill(cap, q, level, t, now)
  if level > cap then level = cap elseif level < -cap then level = -cap end
  if now >= t then
    if now - t >= ceil_div(cap - level, q) then return cap end
    return level + (now - t) * q
  end
  if t - now >= ceil_div(level + cap, q) then return -cap end
  return level - (t - now) * q
end

local function token_bucket(limit, burst, w, p, q, a, b, c, now, cost)
  local cap = burst * p
  local level = token_bucket_refill(cap, q, a, b, now)
  local ok, changed, retry = false, false, 0
  if cost > burst then
    retry = w
  elseif level >= cost * p then
    level = level - cost * p
    ok, changed = true, cost > 0
    if changed then a, b = level, now end
  else
    retry = at_least_1(ceil_div(cost * p - level, q))
  end
  local left = 0
  if level > 0 then left = idiv(level, p) end
  return ok, changed, left, now + ceil_div(cap - level, q), retry, a, b, c
end

local function token_bucket_load(burst, w, p, q, value, exp)
  -- A level saved under another limit or burst may pass this bucket's size;
  -- token_bucket() caps it, as the C code does.  "+ 0": one strtod, where
  -- tonumber makes two; a value no number fails here as it did below.
  local level = value + 0
  local full = level
  if full > burst * p then full = burst * p end
  return level, exp - ceil_div(burst * p - full, q), 0
end

local function token_bucket_save(burst, w, p, q, a, b, c)
  return format('%d', a), b + ceil_div(burst * p - a, q)
end

-- A refund, taken at now: the level then (token_bucket_refill) plus
-- cost, capped at the bucket; below empty it stays a refill time to come
-- (settle.c's bucket_normal).  At now, not at b: the lean "0" form and a
-- level of the same state end alike, also on a clock gone back.  The
-- window index and the charge's time are unused (_idx, _at): check.lua's
-- refund table calls every algorithm's refund alike, now after them.
local function token_bucket_refund(burst, w, p, q, a, b, c, cost, _idx, _at, now)
  local cap = burst * p
  local level = token_bucket_refill(cap, q, a, b, now) + cost * p
  if level > cap then level = cap end
  if level >= 0 then return level, now, c end
  return 0, now + ceil_div(-level, q), c
end
