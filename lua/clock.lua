-- clock.lua -- the time every decision is made at: Redis TIME, in ms, so
-- all servers of a fleet agree on windows and refills whatever their own
-- clocks say.  (Test builds of the library use clock_test.lua instead.)

local function rl_now()
  local t = call('TIME')
  local s, u = t[1] + 0, t[2] + 0 -- "+ 0": a string to its number, no call
  return s * 1000 + (u - u % 1000) / 1000
end
