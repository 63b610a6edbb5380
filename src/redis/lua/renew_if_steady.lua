-- Steady heartbeat renewal (issue 14; core/store.h RenewIfSteady): the locked
-- load-decide-CAS cycle of a batch of steady heartbeats, run at one instant. The caller
-- decided against its cached aggregate and an empty, partial liveness map; this checks
-- that a Load now would return exactly those (load.lua), and that no section is running.
-- KEYS[1] metadata hash   KEYS[2] liveness sorted set   KEYS[3] the group mutex
-- ARGV[1] revision   ARGV[2] writeToken   ARGV[3] aggregate byte length
-- ARGV[4] schemaVersion   ARGV[5] layoutVersion   ARGV[6] member count of the aggregate
-- ARGV[7] now (ms): no deadline may be <= now
-- ARGV[8..] pairs (member, deadline ms) to raise (a deadline is never lowered)
-- Reply: 1 renewed; 0 something differs (nothing written: take the locked path).
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 0
end
local f = redis.call('HMGET', KEYS[1], 'revision', 'writeToken', 'schemaVersion', 'layoutVersion')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] or f[3] ~= ARGV[4] or f[4] ~= ARGV[5] then
  return 0
end
if redis.call('HSTRLEN', KEYS[1], 'aggregate') ~= tonumber(ARGV[3]) then
  return 0
end
if redis.call('TYPE', KEYS[2]).ok ~= 'zset' then
  return 0
end
if redis.call('ZCARD', KEYS[2]) ~= tonumber(ARGV[6]) then
  return 0
end
if #redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[7], 'LIMIT', 0, 1) > 0 then
  return 0
end
-- As compare_and_set.lua (a script cannot call another): a deadline only moves forward.
local i = 8
while i < #ARGV do
  local current = redis.call('ZSCORE', KEYS[2], ARGV[i])
  if current == false or tonumber(current) < tonumber(ARGV[i + 1]) then
    redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i])
  end
  i = i + 2
end
return 1
