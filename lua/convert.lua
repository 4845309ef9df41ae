-- convert.lua -- a client's level carried across a rule change: the same
-- steps, in the same exact integers, as algo_convert() in src/base/algo.c,
-- whose comment (and src/base/algo.h's) has the decision table:
--
--   from \ to   bucket                          window
--   bucket      whole tokens available, at      used = from's burst - whole
--               most to's burst                 tokens available
--   window      available = to's burst - used,  used = the window's estimate
--               at least 0                      (sliding: prev*(W-e)/W +
--                                               curr, rounded up; fixed:
--                                               the count)
--
-- The level is taken as at the change (the time the rule was replaced, or
-- now if earlier), so a client denied again and again is converted alike
-- each time and the new numbers apply from the change on; it is taken from
-- what of the state still counts at now (a sliding window written before
-- now's window drops its previous count, which compact.lua no longer
-- has).  A window gets `used`, at most to's limit, as the count of the
-- window holding that time (sliding: curr = used, prev = 0); a bucket's
-- level is placed at that time and refills at to's rate from there, even
-- when the old rule would have refilled it by now; a window state whose
-- windows have passed by now gives a fresh one.  The same units (same algorithm and window; for the
-- buckets also limit and burst) keep the state as it is.  check.lua calls it when a client has no
-- state under a rule's current shape but has one under a shape the rule
-- replaced.

-- Made only when parts.lua says this call may convert (the function
-- library, library.lua, makes it once, at load).
local place, convert_unknown

-- The state (a, b, c) kept under (falgo, flimit, fburst, fw, fp, fq) as a
-- state under (algo, limit, burst, w, p, q): the level as at the change,
-- min(since, now); a window state passed by now gives a fresh one (0, 0, 0).
local convert
if converts then convert = function(falgo, flimit, fburst, fw, fp, fq, a, b, c,
                                    algo, limit, burst, w, p, q, since, now)
  local fbucket, bucket = falgo == 1 or falgo == 3, algo == 1 or algo == 3
  -- a log is no level: into or out of sliding_log starts fresh (algo.c)
  if falgo == 4 or algo == 4 then return 0, 0, 0 end
  if falgo == algo and fw == w and
     (not bucket or (flimit == limit and fburst == burst)) then
    return a, b, c
  end

  -- Whole tokens available (buckets) or units used (windows) under the
  -- old numbers at `at`, and the time that level holds at (`at`, or the
  -- state's own time if later).
  local function level_at(at)
    if falgo == 1 then -- token bucket: a = level in 1/p token, b = its time
      local cap, level = fburst * fp, a
      if level > cap then level = cap end
      -- its earliest form, as compact.lua keeps it (see src/base/algo.c),
      -- taken at its own time when that is after `at`
      local whole = idiv(level, fq)
      local t = b - whole
      level = level - whole * fq
      if at <= t then return idiv(level, fp), t end
      return idiv(token_bucket_refill(cap, fq, level, t, at), fp), at
    elseif falgo == 3 then -- GCRA: a = TAT ms, b = its fraction in 1/q ms
      local cap, t, frac = fburst * fp, at, b
      local span = idiv(cap, fq) + 1
      if frac >= fq then frac = fq - 1 end
      if a - at > span then t = a - span end
      local debt = 0
      if a > t or (a == t and frac > 0) then debt = (a - t) * fq + frac end
      if debt >= cap then return 0, t end
      return idiv(cap - debt, fp), t
    elseif falgo == 2 then -- fixed window: a = window, b = count
      local idx, t = idiv(at, fw), at
      if a > idx then idx = a; t = idx * fw end
      if a == idx then return b, t end
      return 0, t
    end
    -- sliding window: a = window, b = its count, c = the previous one's
    local idx = idiv(at, fw)
    local e = at - idx * fw
    if a > idx then idx = a; e = 0 end
    local prev, curr = 0, 0
    if a == idx then curr = b; prev = c
    elseif a == idx - 1 then prev = b end
    return ceil_div(prev * (fw - e) + curr * fw, fw), idx * fw + e
  end

  -- What of the state still counts at now (src/base/algo.c, live_at): a
  -- sliding window last written before now's window loses its previous
  -- count, whose hash the compact layout let expire when now's window
  -- began (compact.lua reads it as 0 then).
  if falgo == 0 and a < idiv(now, fw) then c = 0 end
  local at = since
  if now < at then at = now end
  -- windows passed by now count nothing; a bucket the old rule has
  -- refilled by now is taken as expired (convert_unknown), as every store
  -- may have let it expire
  local fresh = 0
  if fbucket then fresh = fburst end
  if level_at(now) == fresh then
    if fbucket then
      return convert_unknown(falgo, flimit, fburst, fw, fp, fq, algo, limit,
                             burst, w, p, q, since, now)
    end
    return 0, 0, 0
  end
  local level, t = level_at(at)
  return place(fbucket, fburst, level, t, algo, bucket, limit, burst, w, p, q)
end

-- convert_unknown: algo_convert_unknown() in src/algo.c.  A client with no
-- state under any shape of a bucket rule that changed at `since`: an old
-- state it had expired by now, which it does once the old rule refilled
-- it, so at the change it held at least fburst - the tokens the old rate
-- gives in (now - since), rounded up, at least 0: that level is placed.
convert_unknown = function(falgo, flimit, fburst, fw, fp, fq,
                           algo, limit, burst, w, p, q, since, now)
  local fbucket, bucket = falgo == 1 or falgo == 3, algo == 1 or algo == 3
  if not fbucket or algo == 4 or (falgo == algo and fw == w and
     flimit == limit and fburst == burst) then
    return 0, 0, 0
  end
  local at = since
  if now < at then at = now end
  local d, cap, level = now - at, fburst * fp, 0
  if d < ceil_div(cap, fq) then level = fburst - ceil_div(d * fq, fp) end
  if level < 0 then level = 0 end
  return place(true, fburst, level, at, algo, bucket, limit, burst, w, p, q)
end end

-- A level under the old numbers at t (whole tokens available for a
-- bucket, units used for a window) as a state under the new ones: the
-- table above (place() in src/algo.c).
if converts then place = function(fbucket, fburst, level, t, algo, bucket,
                                  limit, burst, w, p, q)
  local used = level
  if fbucket then used = fburst - level end
  if bucket then
    local avail = level
    if not fbucket then avail = burst - used end
    if avail < 0 then avail = 0 elseif avail > burst then avail = burst end
    if algo == 1 then return avail * p, t, 0 end
    local debt = (burst - avail) * p
    local ms = idiv(debt, q)
    return t + ms, debt - ms * q, 0
  end
  if used > limit then used = limit end
  return idiv(t, w), used, 0
end end
