-- Atomic snapshot of one group for MetadataStore::Load (SPEC R2.1, core/liveness.h).
-- KEYS[1] metadata hash   KEYS[2] liveness sorted set (member -> deadline ms)
-- ARGV[1] writeToken of the caller's cached aggregate ('' = none)
-- ARGV[2] byte length of that cached aggregate (a cheap guard against hand edits that
--         keep the token)
-- ARGV[3] now (ms): liveness entries with deadline <= now are returned
-- ARGV[4] member count of the cached aggregate, or -1: when ZCARD differs from it the
--         whole liveness set is returned (the caller then knows the map is complete);
--         'all' always returns the whole set
-- Reply: {0} when the hash does not exist, else
--   {1, revision, writeToken, schemaVersion, layoutVersion, aggregate, liveness, zcard,
--    aggregateLen, full}
-- Missing fields come back as nil; aggregate is nil also when the cached copy is current.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0}
end
local f = redis.call('HMGET', KEYS[1], 'revision', 'writeToken', 'schemaVersion', 'layoutVersion')
local len = redis.call('HSTRLEN', KEYS[1], 'aggregate')
local agg = false
if f[2] == false or f[2] ~= ARGV[1] or tostring(len) ~= ARGV[2] then
  agg = redis.call('HGET', KEYS[1], 'aggregate')
end
local card = redis.call('ZCARD', KEYS[2])
local expected = tonumber(ARGV[4])
local live
local full = 0
if ARGV[4] == 'all' or (expected ~= nil and expected >= 0 and card ~= expected) then
  live = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  full = 1
else
  live = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[3], 'WITHSCORES')
end
return {1, f[1], f[2], f[3], f[4], agg, live, card, len, full}
