-- check.lua -- the one script a check runs.  It decides a batch of
-- requests: each request's rules are decided and charged atomically,
-- all-or-nothing; the requests are independent of each other (one script
-- call carries every request that queued up while the previous call was
-- out, so Redis runs one script, and reads the clock once, for many).
--
-- KEYS     one per rule of every request, in order: the state key
--          rl:{<client key>}:<rule id>:<shape> (plain layout), or the base
--          name rlc:{<bucket>}:<rule id>:<shape> (compact layout: the state
--          is field <field> of the hash <base>:<epoch>; see compact.lua)
-- ARGV[1]  "0" (the test build alone reads a time here)
-- ARGV[2]  "c": check and charge;  "r": refund charges made by a "c";
--          "C": as "c", for a Redis Cluster batch whose requests may lie in
--          many slots of this node: KEYS is empty and each key's name is a
--          5th value after its 4 (Redis only routes by declared keys, and
--          refuses declared keys of different slots).  A request whose keys
--          this node does not serve now (a stale slot map, a migration) is
--          left undone: its ops answer 0 (below), and the caller sends it
--          again on its own, with its keys declared, to learn where to go.
-- ARGV[3]  the index in ARGV of the requests' part, after the table of the
--          rules the batch's keys use (each sent once), which begins at
--          ARGV[4]; negated when a rule of the table carries replaced
--          shapes (only then does the script make the functions that
--          convert; convert.lua).  Per rule:
--            algorithm (0 sliding_window, 1 token_bucket, 2 fixed_window,
--            3 gcra, 4 sliding_log: plain layout only), limit, burst,
--            window ms, p, q (one unit per p/q ms), the number of
--            shapes it replaced that may still hold state
--            ("r": always 0), and when that is not 0: its shape (the key
--            name's last part: "s60", "t60:100:20"), then for each of
--            those shapes (newest first) algorithm, limit, burst, window
--            ms, p, q, shape, and the time it was replaced at (ms)
-- then     the number of requests; then for each request the number of
--          its keys, followed by 4 values per key (or, mode "c" only, the
--          number negated, "-k", followed by 2 values per key, its rule's
--          index and cost: soft "0" and field "" implied; a batch of
--          plain checks sends 3 values per check, not 5):
--   the index in ARGV of its rule's first value,
--   cost,
--   "c": soft ("1": mode log, a denial vetoes nothing); a negative
--        number -m: a lease of cost units, or as many as are left but at
--        least m (lease() below); its answer's allowed is the units
--        charged
--   "r": the time the charge was made at (ms)
--   field: "" for the plain layout, else the client's field in the compact
--          layout (a decimal integer below 2^31)
-- Returns for "c": {the keys' answers, the time used}: the answers one
-- string, 24 bytes a key, three little-endian doubles (struct.pack's
-- 'd'; Lua's own numbers, so exact): the verdict, remaining, reset ms.
-- The verdict is 1 (allowed; a lease: the units charged, >= 1), -retry ms
-- (denied; retry >= 1), or 0 (not this node's: "C" above).  One string
-- instead of 4 integers a key: Redis turns each element of a returned
-- table into a reply of its own, which cost more than the packing.  The
-- layout is a private contract between a limiter and the script it loaded
-- (src/redis/redis_script.c reads it; the function's name is the library's
-- SHA-1, so a limiter only ever calls the version it carries).
-- For "r": the number of keys refunded.
-- State expires by itself when it is fresh again; nothing needs a cleanup
-- job.
--
-- A rule whose shape changed (its algorithm, its window, or a bucket's
-- limit or burst) names its state anew, so no state is read in another
-- shape's units.  A client with no state under the current shape is
-- looked up under the shapes the rule replaced, newest first, by the same
-- name with the shape replaced (same hash tag: same slot); a state found
-- there is converted (convert.lua) as at the time of the change and
-- decided on, and when the request's charges are kept the new state is
-- written and the old one deleted (a denial writes and deletes nothing:
-- the next request converts it again, alike).  Only the keys of changed
-- rules pay for this, and only on a miss.

local apply = {[0] = sliding_window, token_bucket, fixed_window, gcra, sliding_log}
local load = {[0] = sliding_window_load, token_bucket_load, fixed_window_load, gcra_load}
local save = {[0] = sliding_window_save, token_bucket_save, fixed_window_save, gcra_save, sliding_log_save}
local refund = {[0] = sliding_window_refund, token_bucket_refund, fixed_window_refund, gcra_refund, sliding_log_refund}
local cread, cwrite, crefund
if compact_layout then
  cread = {[0] = sliding_window_cread, token_bucket_cread, fixed_window_cread, gcra_cread}
  cwrite = {[0] = sliding_window_cwrite, token_bucket_cwrite, fixed_window_cwrite, gcra_cwrite}
  crefund = {[0] = window_crefund, token_bucket_crefund, window_crefund, bucket_crefund}
end

-- State of a plain key as (a, b, c, found); all zero when it does not
-- exist.
local function read(key, algo, burst, w, p, q)
  local value = call('GET', key)
  if not value then return 0, 0, 0, false end
  if algo == 4 then return value, 0, 0, true end -- a log: no expiry needed
  local a, b, c = load[algo](burst, w, p, q, value, call('PEXPIRETIME', key))
  return a, b, c, true
end

-- The last expiry time written and its decimal string: the keys of a
-- window rule mostly expire at one time (their window's end), so most
-- SETs reuse the string instead of a format() each.  (A pure mapping:
-- the function library keeps it across calls.)
local last_exp, last_pxat = -1, '-1'

-- The numbers of a call's answer (3 a key; see the head), in a table the
-- function library keeps across calls: it grows to the largest batch once
-- instead of growing, rehashing, and going to the garbage each call (only
-- its first n entries are read).
local answers = {}

-- struct.pack's format for n doubles ('<' and n d's), made once per n
-- (a function library keeps them; a call's n is its keys times 3, or
-- ANSWER_CHUNK).
local ANSWER_CHUNK, doubles = 240, {}
local function doubles_fmt(n)
  local f = doubles[n]
  if not f then f = '<' .. string.rep('d', n); doubles[n] = f end
  return f
end

local function write(key, algo, burst, w, p, q, a, b, c)
  local value, exp = save[algo](burst, w, p, q, a, b, c)
  if exp ~= last_exp then last_exp, last_pxat = exp, format('%d', exp) end
  call('SET', key, value, 'PXAT', last_pxat)
end

-- What a call sets before it runs the functions below (they are made
-- once, in the function library, and see each call's through these):
-- its time, the names it wrote (a batch's prefetch), and its migrate().
local now, dirty, migrate

-- The state of one op under its rule: its own, or migrate()'s.  In a
-- cluster batch it runs under pcall: a key this node cannot serve raises
-- (every read comes before any write of its request, so a request
-- stopped there has written nothing).
local function load_op(kname, field, algo, limit, burst, w, p, q, moved, ri)
  local a, b, c, found
  if field == '' then a, b, c, found = read(kname, algo, burst, w, p, q)
  else a, b, c, found = cread[algo](kname, field, burst, w, p, q, now) end
  if found or not moved then return a, b, c end
  return migrate(kname, field, algo, limit, burst, w, p, q, ri)
end

-- Write a charged state (and delete the state it was converted from).
-- (The main loop below inlines the plain layout's common cases of
-- load_op() and store(): a Lua function call costs about what a division
-- and a comparison do.)
local function store(kname, field, sa, sb, sw, sp, sq, a, b, c, old)
  if field == '' then
    write(kname, sa, sb, sw, sp, sq, a, b, c)
    if old then call('DEL', old[1]) end
    if dirty then
      dirty[kname] = true
      if old then dirty[old[1]] = true end
    end
  elseif not old then
    cwrite[sa](kname, field, sb, sw, sp, sq, a, b, c, now)
  else
    compact_move(kname, field, sa, sb, sw, sp, sq, a, b, c, old[1], old[2], old[3], old[4], old[5], old[6], now)
  end
end

-- A lease (src/lease.h): charge `want` units, or when fewer are left as
-- many as are, but at least `least` (the request's own cost; below that
-- the answer is the request's own denial).  ok is the units charged
-- (a number) instead of true.
local function lease(algo, limit, burst, w, p, q, a, b, c, want, least)
  local ok, changed, remaining, reset, retry, na, nb, nc =
    apply[algo](limit, burst, w, p, q, a, b, c, now, want)
  if ok then return want, changed, remaining, reset, retry, na, nb, nc end
  local take = remaining
  if take > least then
    ok, changed, remaining, reset, retry, na, nb, nc =
      apply[algo](limit, burst, w, p, q, a, b, c, now, take)
    if ok then return take, changed, remaining, reset, retry, na, nb, nc end
  end
  ok, changed, remaining, reset, retry, na, nb, nc =
    apply[algo](limit, burst, w, p, q, a, b, c, now, least)
  return ok and least, changed, remaining, reset, retry, na, nb, nc
end

-- ---- per call ----
-- (The line above ends what the function library makes once, at load:
-- lua/embed.sh --library puts the rest, and settle.lua, in its callback.)

-- "l": the lean path (lean.lua), one key, its argument in ARGV[3] (the
-- time read off the key unless a test gives one); "L": a batch of lean
-- checks, KEYS[i]'s argument in ARGV[2 + i]
if ARGV[2] == 'l' then
  return lean_check(KEYS[1], ARGV[3], ARGV[1] ~= '0' and rl_now() or nil)
end
if ARGV[2] == 'L' then return lean_batch(KEYS, ARGV, 3, rl_now()) end
now, dirty, migrate = rl_now(), nil, nil
local cross = ARGV[2] == 'C'
local arg = argnum(ARGV[3])
local converting = arg < 0 -- the table has replaced shapes
if converting then arg = -arg end
local nreq = argnum(ARGV[arg])
local key = 1
local K, stride = KEYS, 4
arg = arg + 1
-- the first key names a field (a short request, "-k", names none)
local compact = string.byte(ARGV[arg] or '') ~= 45 and ARGV[arg + 4] ~= ''

if cross then -- the key names follow each key's 4 values
  K, stride = {}, 5
  local a, j = arg, 0
  for r = 1, nreq do
    local k = tonumber(ARGV[a])
    a = a + 1
    for i = 1, k do
      j = j + 1
      K[j] = ARGV[a + 4]
      a = a + 5
    end
  end
end

-- Each key names its rule by the index in ARGV of the rule's first value;
-- the numbers are parsed again only when the next key's rule differs (Lua
-- 5.1 interns strings, so the test is a pointer comparison): a batch's
-- keys mostly share their rule, and tonumber (strtod) is a good part of a
-- check's time in Redis.
local cur, ri, algo, limit, burst, w, p, q, moved
local pack = struct.pack

if ARGV[2] == 'r' then
  for r = 1, nreq do
    local k = tonumber(ARGV[arg])
    arg = arg + 1
    for i = 1, k do
      if ARGV[arg] ~= cur then
        cur = ARGV[arg]
        ri = tonumber(cur)
        algo, burst = tonumber(ARGV[ri]), tonumber(ARGV[ri + 2])
        w, p, q = tonumber(ARGV[ri + 3]), tonumber(ARGV[ri + 4]), tonumber(ARGV[ri + 5])
      end
      local cost, field = tonumber(ARGV[arg + 1]), ARGV[arg + 3]
      if cost > 0 then
        if field ~= '' then
          crefund[algo](K[key], field, burst, w, p, q, cost, tonumber(ARGV[arg + 2]), now)
        else
          local a, b, c, found = read(K[key], algo, burst, w, p, q)
          if found then
            local at = tonumber(ARGV[arg + 2])
            a, b, c = refund[algo](burst, w, p, q, a, b, c, cost, idiv(at, w), at, now)
            write(K[key], algo, burst, w, p, q, a, b, c)
          end
        end
      end
      key, arg = key + 1, arg + stride
    end
  end
  return key - 1
end

-- A client with no state under its rule's current shape (the rule at
-- ARGV[ri], which replaced shapes): the newest state under one of those,
-- converted, and what names that old state (to be deleted when the new
-- one is written); else the least the newest of them may have held
-- (convert_unknown), or fresh.
if converting then migrate = function(kname, field, algo, limit, burst, w, p, q, ri)
  local x = ri + 8
  local stem = string.sub(kname, 1, #kname - #ARGV[ri + 7])
  for j = 1, tonumber(ARGV[ri + 6]) do
    local fa, fl, fb = tonumber(ARGV[x]), tonumber(ARGV[x + 1]), tonumber(ARGV[x + 2])
    local fw, fp, fq = tonumber(ARGV[x + 3]), tonumber(ARGV[x + 4]), tonumber(ARGV[x + 5])
    local old = stem .. ARGV[x + 6]
    local a, b, c, found
    if fa == 4 or algo == 4 then -- a log converts to nothing: left to expire
    elseif field == '' then a, b, c, found = read(old, fa, fb, fw, fp, fq)
    else a, b, c, found = cread[fa](old, field, fb, fw, fp, fq, now) end
    if found then
      a, b, c = convert(fa, fl, fb, fw, fp, fq, a, b, c, algo, limit, burst, w, p, q, tonumber(ARGV[x + 7]), now)
      return a, b, c, {old, fa, fb, fw, fp, fq}
    end
    x = x + 8
  end
  -- none: what the newest replaced shape may have held before it expired,
  -- at worst (convert_unknown)
  -- (written as a converted state: compact_move puts a window's previous
  -- count in its own hash; the old names it deletes hold nothing)
  x = ri + 8
  local fa = tonumber(ARGV[x])
  if tonumber(ARGV[ri + 6]) > 0 and (fa == 1 or fa == 3) then
    local fb, fw = tonumber(ARGV[x + 2]), tonumber(ARGV[x + 3])
    local fp, fq = tonumber(ARGV[x + 4]), tonumber(ARGV[x + 5])
    local a, b, c = convert_unknown(fa, tonumber(ARGV[x + 1]), fb, fw, fp,
      fq, algo, limit, burst, w, p, q, tonumber(ARGV[x + 7]), now)
    return a, b, c, {stem .. ARGV[x + 6], fa, fb, fw, fp, fq}
  end
  return 0, 0, 0
end end

-- The plain layout on one server (keys declared): every key's value is
-- read up front, by one MGET per PREFETCH keys instead of a GET each (a
-- redis.call costs more than the command it runs); vals[i] is KEYS[i]'s
-- value, false for none.  A name this call writes or deletes is marked
-- dirty, and read again by a GET when a later request of the batch names
-- it too.  A user whose ACL lacks +mget (set up before 1.1) is not
-- refused: the MGET's error sends every key back to its own GET.
local PREFETCH = 1000
local vals
if not cross and #KEYS > 1 and not compact then
  vals, dirty = {}, {}
  for i = 1, #KEYS, PREFETCH do
    local j = i + PREFETCH - 1
    if j > #KEYS then j = #KEYS end
    local part = redis.pcall('MGET', unpack(KEYS, i, j))
    if part.err then vals, dirty = nil, nil break end
    for t = 1, #part do vals[i + t - 1] = part[t] end
  end
end

-- Costs and key counts repeat too (mostly "1"): parsed when they change.
local out, pending, n, ks, k, cs, cost, short = answers, {}, 0
for r = 1, nreq do
  if ARGV[arg] ~= ks then
    ks = ARGV[arg]; k = argnum(ks)
    short = k < 0 -- "-k": 2 values per key
    if short then k = -k end
  end
  local all, npending, here, first = true, 0, true, n
  local step = short and 2 or stride
  arg = arg + 1
  for i = 1, k do
    if ARGV[arg] ~= cur then
      cur = ARGV[arg]
      ri = argnum(cur)
      algo, limit, burst = argnum(ARGV[ri]), argnum(ARGV[ri + 1]), argnum(ARGV[ri + 2])
      w, p, q = argnum(ARGV[ri + 3]), argnum(ARGV[ri + 4]), argnum(ARGV[ri + 5])
      moved = ARGV[ri + 6] ~= '0'
    end
    if ARGV[arg + 1] ~= cs then cs = ARGV[arg + 1]; cost = argnum(cs) end
    local field, soft = '', '0'
    if not short then field, soft = ARGV[arg + 3], ARGV[arg + 2] end
    local ok, changed, remaining, reset, retry, a, b, c, old = false, false, 0, 0, 0
    local pxt, ob, oc -- a plain value's expiry, and its b and c, when read
    if not here then
    elseif cross then
      here, a, b, c, old = pcall(load_op, K[key], field, algo, limit, burst, w, p, q, moved, ri)
    elseif field == '' and not moved then -- load_op's common case, inline
      local value
      if vals and not dirty[K[key]] then value = vals[key]
      else value = call('GET', K[key]) end
      if algo == 4 then -- a sliding log: the value is its state
        a, b, c = value or 0, 0, 0
      elseif value then
        pxt = call('PEXPIRETIME', K[key])
        a, b, c = load[algo](burst, w, p, q, value, pxt)
        ob, oc = b, c
      else
        a, b, c = 0, 0, 0
      end
    else
      a, b, c, old = load_op(K[key], field, algo, limit, burst, w, p, q, moved, ri)
    end
    if here then
      if soft == '0' or soft == '1' then
        ok, changed, remaining, reset, retry, a, b, c =
          apply[algo](limit, burst, w, p, q, a, b, c, now, cost)
      else -- a lease: "-least"
        ok, changed, remaining, reset, retry, a, b, c =
          lease(algo, limit, burst, w, p, q, a, b, c, cost, -tonumber(soft))
      end
      if not ok and soft ~= '1' then all = false end
      if ok and changed then
        if k ~= 1 then -- held back until every rule of the request passed
          npending = npending + 1
          pending[npending] = {K[key], field, algo, burst, w, p, q, a, b, c, old}
        elseif pxt and (algo == 0 or algo == 2) and b == ob + cost and
               c == oc and oc < 900000000 and pxt == (a + 2 - algo / 2) * w
               and type(redis.pcall('INCRBY', K[key], cost)) == 'number' then
          -- a window charged in its own window: its integer (count;
          -- sliding: prev * 10^10 + curr, within int64 below 9 * 10^8)
          -- plus the cost, its expiry kept: what save() and SET ... PXAT
          -- would write, for less (lean.lua); refused (an ACL user without
          -- +incrby, as set up before): the SET below
          if dirty then dirty[K[key]] = true end
        elseif field == '' and not old then -- one rule: write now (store()
          local value, exp = save[algo](burst, w, p, q, a, b, c) -- inline)
          if exp ~= last_exp then last_exp, last_pxat = exp, format('%d', exp) end
          call('SET', K[key], value, 'PXAT', last_pxat)
          if dirty then dirty[K[key]] = true end
        else
          store(K[key], field, algo, burst, w, p, q, a, b, c, old)
        end
      end
    end
    out[n + 1], out[n + 2], out[n + 3] = ok == true and 1 or ok or -retry, remaining, reset
    n = n + 3
    key, arg = key + 1, arg + step
  end
  if not here then -- not this node's: undone, say so
    for t = first + 1, n, 3 do out[t] = 0 end
  elseif all then
    for t = 1, npending do
      local x = pending[t]
      store(x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11])
    end
  end
end
-- The answers packed ANSWER_CHUNK numbers a struct.pack (its arguments
-- on Lua's stack, well below its limit): one call per chunk, not per key;
-- one chunk (most calls) makes no table of parts.
if n <= ANSWER_CHUNK then return {pack(doubles_fmt(n), unpack(out, 1, n)), now} end
local parts = {}
for i = 1, n, ANSWER_CHUNK do
  local j = i + ANSWER_CHUNK - 1
  if j > n then j = n end
  parts[#parts + 1] = pack(doubles_fmt(j - i + 1), unpack(out, i, j))
end
return {table.concat(parts), now}
