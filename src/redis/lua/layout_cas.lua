-- Compare-and-set of a stream's layout hash (SPEC D1, MetadataStore::CompareAndSetLayout).
-- KEYS[1] redis-stream:coord:{P}:layout
-- ARGV[1] expected revision; 0 = create, only if the hash does not exist
-- ARGV[2] layout JSON  ARGV[3] schemaVersion  ARGV[4] updatedAt (ms)
-- Reply: {1, newRevision} applied; {0, storedRevision} conflict (0: no hash).
-- Like compare_and_set.lua, nothing is written before every check passed.
local stored = redis.call('HGET', KEYS[1], 'revision')
local rev = 0
if stored == false then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('RSC_UNREADABLE layout hash has no revision field')
  end
else
  rev = tonumber(stored)
  if rev == nil or rev ~= math.floor(rev) or rev < 1 then
    return redis.error_reply('RSC_UNREADABLE layout revision field is not a positive integer')
  end
end
if rev ~= tonumber(ARGV[1]) then
  return {0, rev}
end
local new_rev = rev + 1
redis.call('HSET', KEYS[1], 'layout', ARGV[2], 'revision', string.format('%d', new_rev),
           'schemaVersion', ARGV[3], 'updatedAt', ARGV[4])
return {1, new_rev}
