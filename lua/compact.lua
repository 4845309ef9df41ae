-- compact.lua -- the compact state layout: the clients of one rule share a
-- few small hashes instead of one key each (about 113-129 bytes of Redis
-- memory per tracked client and rule in the plain layout; one listpack
-- entry of a dozen bytes or so here).
--
-- Identity and collisions.  A client is named by a short hash of its key:
-- 16 bits pick the bucket in the key name,
-- rlc:{<bucket>}:<rule>:<shape> (the shape names limit and burst for the
-- buckets, whose stored times are in units of the rate; the bucket is in
-- the hash tag, so it picks the cluster slot), 31 bits are the field
-- inside the hash: 47 bits in all.  Among N tracked clients of one rule
-- about N^2 / 2^48 pairs share
-- state: 0.004 pairs for a million clients, 0.36 for ten million.  Two
-- clients that share state are limited as one client: every charge of
-- either counts against the one state, so the two together, and so each of
-- them, never pass more than the rule lets one client pass (per window for
-- the windows, burst plus refill over any interval for the buckets).  A
-- collision is therefore never more lenient in total, only stricter: each
-- gets what the other leaves.  It is not true request by request, though:
-- a request denied because of the other client's traffic leaves room that
-- a later request of the same client may then get where, alone, it would
-- have been refused (a bucket with 0.9 token instead of 0 after a denial).
-- The bound above is the guarantee; "never more lenient per decision" is
-- not.  (Buckets of more than 128 clients of a rule in one epoch turn
-- their hash from a listpack into a hash table: still correct, larger.)
--
-- Layout.  Time is cut into epochs of E ms; the state of field f in epoch
-- e lives in the hash  base .. ':' .. e  (base = KEYS[i]; same hash tag, so
-- same slot).  A hash expires as a whole: its expiry is set by the write
-- that creates a field in it (HSET answers 1), to when every state it holds
-- is stale; no job prunes anything, and a stale epoch is never read.
--
--   fixed window    E = W; hash e = window e; value = count.  Expires at
--                   (e + 1) * W.  Read: hash idx only.
--   sliding window  E = W; hash e holds window e's count; the previous
--                   count is hash e - 1's.  Expires at (e + 2) * W.
--   token bucket,   E = L = ceil(burst * p / q) + 2 ms, longer than any
--   GCRA            state stays not-fresh after its last charge.  Both
--                   states are one "virtual time" in 1/q ms, stored less
--                   e * L * q (0 when that is negative: a fresh state):
--                     token bucket  F = b*q + (burst*p - a), the time at
--                       which the bucket is full again; the level at `now`
--                       is cap - max(0, F - now*q);
--                     GCRA  U = a*q + b, the TAT.
--                   (Only a refund can take it below the epoch's start.)
--                   Written into the current epoch's hash; read from it or
--                   else from the previous one.  Expires at (e + 2) * L.
--
-- Equivalence with the plain layout (and src/base/algo.c).  Counts and GCRA's
-- U are stored exactly.  The token bucket's (level, last refill) pair
-- (a, b) becomes one number F; it is read back as the state with the
-- earliest refill time t = ceil((F - cap) / q) and level t*q + cap - F
-- (0 <= level < q): at any now it reads exactly the level the original
-- has (GCRA's rule, token_bucket.lua: the level moves with the clock, a
-- clock gone back before b included), so every decision is the same.
-- Only a clock that went back into an earlier epoch (window, for the
-- windows) reads that epoch's hash, not the newer state that the plain
-- layout would keep using: more lenient, by at most what was charged
-- since, in the epochs the clock went back over.
-- Redis TIME rarely goes back, and then by little.
--
-- Rule changes.  A bucket's value is in 1/q ms from the start of an epoch
-- of L ms, both derived from limit, burst and window, so its base name
-- (src/redis/redis_key.c: the rule's shape) names the limit and the burst beside
-- the algorithm and the window: old values are never read in new units
-- (which could make a bucket look full, or empty for up to 2L).  Window
-- counts have no units: a changed limit applies to them at once.  A
-- client whose state is under a shape the rule replaced is carried over
-- by check.lua: read here with the old shape's numbers from the old base
-- name (same hash tag, same field), converted (convert.lua), written to
-- the new base and dropped from the old hashes (compact_move) when
-- charged.
--
-- A stored value is less than 2*L*q <= 2*burst*p + 6*q (a state's F or U
-- is less than 2L ms past the start of the epoch it is written in, with a
-- clock that does not go back), within a double's exact range like the
-- algorithms' own debt + cost*p.

-- Made only when parts.lua says this call uses the compact layout (the
-- function library, library.lua, makes them once, at load).
local hname, hput, life, vread, vwrite
local fixed_window_cread, fixed_window_cwrite, window_crefund
local sliding_window_cread, sliding_window_cwrite
local token_bucket_cread, token_bucket_cwrite, bucket_crefund, token_bucket_crefund
local gcra_cread, gcra_cwrite
if compact_layout then

function hname(base, e)
  return base .. ':' .. str(e)
end

-- HSET, and when it created the field, the hash's expiry: the first write
-- of any client into an epoch sets it, later ones set the same time again.
function hput(hash, field, value, exp)
  if call('HSET', hash, field, str(value)) == 1 then
    call('PEXPIREAT', hash, str(exp))
  end
end

-- Windows -----------------------------------------------------------------

function fixed_window_cread(base, field, burst, w, p, q, now)
  local idx = idiv(now, w)
  local v = call('HGET', hname(base, idx), field)
  if v then return idx, tonumber(v), 0, true end
  return 0, 0, 0, false
end

function fixed_window_cwrite(base, field, burst, w, p, q, a, b, c, now)
  hput(hname(base, a), field, b, (a + 1) * w)
end

function sliding_window_cread(base, field, burst, w, p, q, now)
  local idx = idiv(now, w)
  local cur = call('HGET', hname(base, idx), field)
  local prev = call('HGET', hname(base, idx - 1), field)
  if cur then return idx, tonumber(cur), prev and tonumber(prev) or 0, true end
  if prev then return idx - 1, tonumber(prev), 0, true end
  return 0, 0, 0, false
end

-- c, the previous window's count, already lives in its own hash.
function sliding_window_cwrite(base, field, burst, w, p, q, a, b, c, now)
  hput(hname(base, a), field, b, (a + 2) * w)
end

-- Both windows: take the cost back from the window it was charged in.
function window_crefund(base, field, burst, w, p, q, cost, at, now)
  local hash = hname(base, idiv(at, w))
  local v = call('HGET', hash, field)
  if v then
    v = tonumber(v) - cost
    if v < 0 then v = 0 end
    call('HSET', hash, field, str(v))
  end
end

-- Buckets -----------------------------------------------------------------

function life(burst, p, q)
  return ceil_div(burst * p, q) + 2
end

-- The virtual time of `field` relative to its epoch's start, that start
-- (ms) and the hash holding it; nil when neither the current epoch nor the
-- previous one has it (the state is fresh).
function vread(base, field, now, l)
  local e = idiv(now, l)
  local hash = hname(base, e)
  local v = call('HGET', hash, field)
  if not v then
    e = e - 1
    hash = hname(base, e)
    v = call('HGET', hash, field)
    if not v then return nil end
  end
  return tonumber(v), e * l, hash
end

-- Store a virtual time given relative to the current epoch's start.  It
-- is never negative here: a charged state's refill time (token bucket) or
-- TAT (GCRA) is never before now.
function vwrite(base, field, now, l, v)
  local e = idiv(now, l)
  hput(hname(base, e), field, v, (e + 2) * l)
end

-- GCRA's refund: take cost*p off the virtual time, in the hash it was
-- read from; below that epoch's start (0) the state is fresh, and is kept
-- as 0.  (A token bucket's: token_bucket_crefund, below.)
function bucket_crefund(base, field, burst, w, p, q, cost, at, now)
  local v, start, hash = vread(base, field, now, life(burst, p, q))
  if v then
    v = v - cost * p
    if v < 0 then v = 0 end
    call('HSET', hash, field, str(v))
  end
end

-- A token bucket's refund, taken at now as token_bucket_refund takes it:
-- read, refunded, written in now's epoch (not only the virtual time less
-- cost*p: full is full at now, so its two forms of a state end alike).
function token_bucket_crefund(base, field, burst, w, p, q, cost, at, now)
  local a, b, c, found = token_bucket_cread(base, field, burst, w, p, q, now)
  if found then
    a, b, c = token_bucket_refund(burst, w, p, q, a, b, c, cost, 0, at, now)
    token_bucket_cwrite(base, field, burst, w, p, q, a, b, c, now)
  end
end

function token_bucket_cread(base, field, burst, w, p, q, now)
  local cap = burst * p
  local v, start = vread(base, field, now, life(burst, p, q))
  if not v then return 0, 0, 0, false end
  -- t = ceil((v - cap) / q), where v - cap may be negative: shifted by k
  -- whole ms so ceil_div sees a number >= 0.
  local k = ceil_div(cap, q)
  local t = ceil_div(v + k * q - cap, q) - k
  return t * q + cap - v, start + t, 0, true
end

function token_bucket_cwrite(base, field, burst, w, p, q, a, b, c, now)
  local l = life(burst, p, q)
  vwrite(base, field, now, l, (b - idiv(now, l) * l) * q + burst * p - a)
end

function gcra_cread(base, field, burst, w, p, q, now)
  local v, start = vread(base, field, now, life(burst, p, q))
  if not v then return 0, 0, 0, false end
  local ms = idiv(v, q)
  return start + ms, v - ms * q, 0, true
end

function gcra_cwrite(base, field, burst, w, p, q, a, b, c, now)
  local l = life(burst, p, q)
  vwrite(base, field, now, l, (a - idiv(now, l) * l) * q + b)
end

-- Moves ---------------------------------------------------------------------

-- A state carried over from a shape the rule replaced (check.lua): write
-- it under the new shape, base, and take the client's field out of the
-- hashes a read of the old shape, obase, looks at (its current and
-- previous epoch).  A sliding window's previous count, if any, lives in
-- no hash of the new shape yet: it goes into the previous window's.
-- (Made only for a call that may convert: see convert.lua.)

end -- compact_layout

local compact_move
if converts and compact_layout then compact_move = function(base, field, algo, burst, w, p, q, a, b, c,
                                         obase, oalgo, oburst, ow, op, oq, now)
  if algo == 0 then
    if c > 0 then hput(hname(base, a - 1), field, c, (a + 1) * w) end
    sliding_window_cwrite(base, field, burst, w, p, q, a, b, c, now)
  elseif algo == 1 then
    token_bucket_cwrite(base, field, burst, w, p, q, a, b, c, now)
  elseif algo == 2 then
    fixed_window_cwrite(base, field, burst, w, p, q, a, b, c, now)
  else
    gcra_cwrite(base, field, burst, w, p, q, a, b, c, now)
  end
  local e = ow -- the old shape's epoch: its window, or a bucket's life
  if oalgo == 1 or oalgo == 3 then e = life(oburst, op, oq) end
  e = idiv(now, e)
  call('HDEL', hname(obase, e), field)
  call('HDEL', hname(obase, e - 1), field)
end end
