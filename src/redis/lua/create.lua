-- Creates a group hash at revision 1 only if it does not exist (MetadataStore::Create).
-- KEYS[1] metadata hash   KEYS[2] liveness sorted set
-- ARGV[1] aggregate JSON  ARGV[2] schemaVersion  ARGV[3] layoutVersion
-- ARGV[4] updatedAt (ms)  ARGV[5] writeToken
-- Reply: 1 created, 0 the hash exists. Liveness starts empty: deadlines left behind by a
-- deleted group of the same name must not leak into the new one.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'aggregate', ARGV[1], 'revision', '1', 'schemaVersion', ARGV[2],
           'layoutVersion', ARGV[3], 'updatedAt', ARGV[4], 'writeToken', ARGV[5])
return 1
