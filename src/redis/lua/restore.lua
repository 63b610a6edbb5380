-- Operator restore (SPEC L2): replaces whatever is stored. The revision continues above
-- any stored one so a CAS prepared against the old hash cannot apply to the new one.
-- KEYS[1] metadata hash   KEYS[2] liveness sorted set
-- ARGV[1] aggregate JSON  ARGV[2] schemaVersion  ARGV[3] layoutVersion
-- ARGV[4] updatedAt (ms)  ARGV[5] writeToken
-- Reply: the new revision.
-- A revision that is not an integer below 2^53 - 1 (corrupt: no coordinator can have
-- loaded it, so no CAS is prepared against it) is not continued: the restore starts at 1.
local rev = 0
if redis.call('TYPE', KEYS[1]).ok == 'hash' then
  local stored = tonumber(redis.call('HGET', KEYS[1], 'revision') or '0')
  if stored ~= nil and stored > 0 and stored < 9007199254740991 and stored == math.floor(stored) then
    rev = stored
  end
end
rev = rev + 1
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'aggregate', ARGV[1], 'revision', string.format('%d', rev),
           'schemaVersion', ARGV[2], 'layoutVersion', ARGV[3], 'updatedAt', ARGV[4],
           'writeToken', ARGV[5])
return rev
