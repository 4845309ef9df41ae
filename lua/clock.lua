-- clock.lua -- the time every decision is made at: Redis TIME, in ms, so
-- all servers of a fleet agree on windows and refills whatever their own
-- clocks say.  (Test builds of the library use clock_test.lua instead.)

local function rl_now()
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
