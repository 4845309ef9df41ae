-- clock_test.lua -- for the library's own tests only: ARGV[1], when not
-- "0", is the time in ms, so a test can drive the Lua maths through the
-- same (time, cost) sequences as the C maths.  Never part of the installed
-- library's script.

local function rl_now()
  if ARGV[1] ~= '0' then return tonumber(ARGV[1]) end
  local t = call('TIME')
  local s, u = t[1] + 0, t[2] + 0
  return s * 1000 + (u - u % 1000) / 1000
end
