-- token_bucket.lua -- a bucket of `burst` tokens refilled at limit/window.
-- Same steps as token_bucket() in src/base/algo.c.  State: a = level in units of
-- 1/p token, b = time of the last refill (ms).  In Redis the key holds the
-- level and expires when the bucket is full again, at
--   b + ceil((burst*p - a) / q),
-- so b is recovered exactly from the expiry and nothing else is stored.
--
-- Every algorithm: (limit, burst, w, p, q, a, b, c, now, cost) ->
--   allowed, changed, remaining, reset, retry, a, b, c  (the new state)

-- The level refilled from (level, t) up to now, capped at cap, and its time
-- (now, or t if later: a clock gone back, or a debt's refill time to come);
-- algo_bucket_refill() in src/base/algo.c.  settle.lua's debts use it too.
local function token_bucket_refill(cap, q, level, t, now)
  if level > cap then level = cap end
  if now > t then
    if now - t >= ceil_div(cap - level, q) then return cap, now end
    return level + (now - t) * q, now
  end
  return level, t
end

local function token_bucket(limit, burst, w, p, q, a, b, c, now, cost)
  local cap = burst * p
  local level, t = token_bucket_refill(cap, q, a, b, now)
  local ok, changed, retry = false, false, 0
  if cost > burst then
    retry = w
  elseif level >= cost * p then
    level = level - cost * p
    ok, changed = true, cost > 0
    if changed then a, b = level, t end
  else
    retry = at_least_1(ceil_div(cost * p - level, q))
  end
  return ok, changed, idiv(level, p), t + ceil_div(cap - level, q), retry, a, b, c
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

local function token_bucket_refund(burst, w, p, q, a, b, c, cost, idx)
  local level = a + cost * p
  if level > burst * p then level = burst * p end
  return level, b, c
end
