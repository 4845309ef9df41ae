-- settle.lua -- rl_settle() inside Redis: ARGV[2] "s" refunds, "d"
-- charges a debt, for one reservation's charges, each at most once.  The
-- steps are src/base/settle.c's.  Its arguments are check.lua's "r" layout
-- (ARGV[3] the index of the requests' part after the table of rules, one
-- request, 4 values per key: the rule's index, cost, the charge's time,
-- field), and KEYS holds the n state keys, then for each its marker
-- rl:{<its hash tag>}:~r:<charge id>:<reservation id> (same slot).  Per key:
-- settled only while the charge can still count (its time plus the rule's
-- state life) and when SET NX makes its marker, alive that long; then its
-- state is changed.  Returns the number of keys settled now.

if ARGV[2] == 's' or ARGV[2] == 'd' then
  local now, debt = rl_now(), ARGV[2] == 'd'
  local ld = {[0] = sliding_window_load, token_bucket_load, fixed_window_load, gcra_load}
  local sv = {[0] = sliding_window_save, token_bucket_save, fixed_window_save, gcra_save}
  local cr, cw, crf -- the compact layout's (check.lua makes its own later)
  if compact_layout then
    cr = {[0] = sliding_window_cread, token_bucket_cread, fixed_window_cread, gcra_cread}
    cw = {[0] = sliding_window_cwrite, token_bucket_cwrite, fixed_window_cwrite, gcra_cwrite}
    crf = {[0] = window_crefund, bucket_crefund, window_crefund, bucket_crefund}
  end

  -- The longest a state stays unlike a fresh one (algo_state_life_ms).
  local function state_life(algo, burst, w, p, q)
    if algo == 1 or algo == 3 then return ceil_div(burst * p, q) + 1 end
    if algo == 2 then return w end
    return 2 * w
  end

  -- A bucket's (level, refill time) from its level at now, avail: below
  -- empty, a refill time in the future (settle.c's bucket_normal).
  local function bucket_normal(burst, p, q, now, avail)
    local cap = burst * p
    if avail > cap then avail = cap end
    if avail < -cap then avail = -cap end
    if avail >= 0 then return avail, now, 0 end
    return 0, now + ceil_div(-avail, q), 0
  end

  local function bucket_debt(burst, w, p, q, a, b, c, now, cost)
    local avail = token_bucket_refill(burst * p, q, a, b, now) - cost * p
    return bucket_normal(burst, p, q, now, avail)
  end

  -- A bucket's refund, at now: one in debt (refill time after now) pays it first.
  local function bucket_refund(burst, w, p, q, a, b, c, cost, idx)
    return token_bucket_refund(burst, w, p, q, a, b, c, cost, idx, 0, now)
  end
  local rf = {[0] = sliding_window_refund, bucket_refund, fixed_window_refund, gcra_refund}

  local function gcra_debt(burst, w, p, q, a, b, c, now, cost)
    local cap = burst * p
    local span, debt, frac = idiv(cap, q) + 1, 0, b
    if frac >= q then frac = q - 1 end
    if a - now > 2 * span then debt = 2 * cap
    elseif a > now or (a == now and frac > 0) then debt = (a - now) * q + frac end
    debt = debt + cost * p
    if debt > 2 * cap then debt = 2 * cap end
    local ms = idiv(debt, q)
    return now + ms, debt - ms * q, 0
  end

  local function window_debt(algo, limit, w, a, b, c, now, cost)
    local idx, curr, prev = idiv(now, w), 0, 0
    if a > idx then idx = a end
    if a == idx then curr, prev = b, c
    elseif a == idx - 1 and algo == 0 then prev = b end
    curr = curr + cost
    if curr > limit then curr = limit end
    if algo ~= 0 then prev = 0 end
    return idx, curr, prev
  end

  local function charge(algo, limit, burst, w, p, q, a, b, c, cost)
    local most = burst -- a debt of more is never kept: bounds the maths
    if most == 0 then most = limit end
    if cost > most then cost = most end
    if algo == 1 then return bucket_debt(burst, w, p, q, a, b, c, now, cost) end
    if algo == 3 then return gcra_debt(burst, w, p, q, a, b, c, now, cost) end
    return window_debt(algo, limit, w, a, b, c, now, cost)
  end

  -- One key: its state changed (a refund only when it exists).
  local function settle_one(kname, field, algo, limit, burst, w, p, q, cost, at)
    local a, b, c, found
    if field ~= '' then
      if not debt and algo ~= 1 then
        crf[algo](kname, field, burst, w, p, q, cost, at, now)
        return
      end
      a, b, c, found = cr[algo](kname, field, burst, w, p, q, now)
      if debt then a, b, c = charge(algo, limit, burst, w, p, q, a, b, c, cost)
      elseif found then -- a bucket's refund, at now
        a, b, c = bucket_refund(burst, w, p, q, a, b, c, cost, 0)
      else
        return
      end
      cw[algo](kname, field, burst, w, p, q, a, b, c, now)
      return
    end
    local value = call('GET', kname)
    if value then
      a, b, c = ld[algo](burst, w, p, q, value, call('PEXPIRETIME', kname))
    elseif debt then
      a, b, c = 0, 0, 0
    else
      return
    end
    if debt then a, b, c = charge(algo, limit, burst, w, p, q, a, b, c, cost)
    else a, b, c = rf[algo](burst, w, p, q, a, b, c, cost, idiv(at, w)) end
    local v, exp = sv[algo](burst, w, p, q, a, b, c) -- exp is part of the state
    call('SET', kname, v, 'PXAT', str(exp))
  end

  local arg = tonumber(ARGV[3])
  local n = tonumber(ARGV[arg + 1])
  local settled = 0
  arg = arg + 2
  for i = 1, n do
    local ri = tonumber(ARGV[arg])
    local algo, limit, burst = tonumber(ARGV[ri]), tonumber(ARGV[ri + 1]), tonumber(ARGV[ri + 2])
    local w, p, q = tonumber(ARGV[ri + 3]), tonumber(ARGV[ri + 4]), tonumber(ARGV[ri + 5])
    local cost, at = tonumber(ARGV[arg + 1]), tonumber(ARGV[arg + 2])
    local untl = at + state_life(algo, burst, w, p, q)
    if now <= untl and call('SET', KEYS[n + i], '1', 'NX', 'PXAT', str(untl)) then
      settle_one(KEYS[i], ARGV[arg + 3], algo, limit, burst, w, p, q, cost, at)
      settled = settled + 1
    end
    arg = arg + 4
  end
  return settled
end
