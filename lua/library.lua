-- library.lua -- the head of the Redis function library (Redis 7.0
-- FUNCTION LOAD), in parts.lua's place.  The library is the same files as
-- the EVAL script, but its load runs once per server, not once per call:
-- every definition (common.lua .. compact.lua, check.lua's part above its
-- "per call" line) is made then, every optional part included, and the
-- function's callback holds only what a call must do (settle.lua, the
-- rest of check.lua).  lua/embed.sh --library wraps that part; the
-- library's first line and RL_FUNCTION, the function's name (both naming
-- the library text's SHA-1), are put before this by the connector
-- (src/redis/redis_connector.c).

local compact_layout, converts = true, true
