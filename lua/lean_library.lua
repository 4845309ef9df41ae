-- lean_library.lua -- the function library's lean function (lean.lua),
-- RL_FUNCTION .. "_l": one declared key, one argument.  Its own callback
-- sets common.lua's per-call locals when no call of the main function has
-- yet (they are the same functions every time).  Made at FUNCTION LOAD,
-- after lean.lua; the EVAL script reaches lean.lua through check.lua's
-- mode "l" instead.

redis.register_function{function_name = RL_FUNCTION .. '_l',
  callback = function(KEYS, ARGV)
    if not call then
      floor, format, tonumber, call = math.floor, string.format, _G.tonumber, redis.call
    end
    return lean_check(KEYS[1], ARGV[1], rl_now())
  end}
