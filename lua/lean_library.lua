-- lean_library.lua -- the function library's lean functions (lean.lua):
-- RL_FUNCTION .. "_l", one declared key and one argument (a lone check),
-- and RL_FUNCTION .. "_b", n declared keys and n arguments (a batch of
-- one-rule checks).  Their callbacks set common.lua's per-call locals
-- when no call of the main function has yet (they are the same functions
-- every time).  Made at FUNCTION LOAD, after lean.lua; the EVAL script
-- reaches lean.lua through check.lua's modes "l" and "L" instead.

local function lean_locals()
  floor, format, tonumber, call = math.floor, string.format, _G.tonumber, redis.call
end

redis.register_function{function_name = RL_FUNCTION .. '_l',
  callback = function(KEYS, ARGV)
    if not call then lean_locals() end
    return lean_check(KEYS[1], ARGV[1], nil)
  end}

redis.register_function{function_name = RL_FUNCTION .. '_b',
  callback = function(KEYS, ARGV)
    if not call then lean_locals() end
    return lean_batch(KEYS, ARGV, 1, rl_now())
  end}
