-- parts.lua -- which optional parts an EVAL of the script makes.  A script
-- builds its functions on every call, and most calls need neither of these:
-- the compact layout's (compact.lua), made only when this call's first key
-- names a field (check.lua: the 4th value of the first key, after the
-- requests' count and the first request's key count; a key count "-k"
-- names a short request, which has no field), and the conversions
-- (convert.lua, compact.lua's compact_move), made only when ARGV[3] is
-- negative (a rule of the table carries replaced shapes).  The function
-- library makes every part once, at load: library.lua stands in for this
-- file there.

local compact_layout, converts
if ARGV[2] ~= 'l' and ARGV[2] ~= 'L' then -- the lean path (lean.lua): neither
  local reqs = tonumber(ARGV[3])
  converts = reqs < 0
  if reqs < 0 then reqs = -reqs end
  compact_layout = string.byte(ARGV[reqs + 1] or '') ~= 45 and ARGV[reqs + 5] ~= ''
end
