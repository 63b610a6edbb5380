-- Deletes a group's hash and liveness set if the revision matches (MetadataStore::Delete).
-- The mutex key is left alone: its holder releases it, or it expires.
-- KEYS[1] metadata hash   KEYS[2] liveness sorted set
-- ARGV[1] expected revision
-- Reply: {1} deleted; {0, storedRevision} conflict; {-1} no hash.
local stored = redis.call('HGET', KEYS[1], 'revision')
if stored == false then
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return {-1}
  end
  return redis.error_reply('RSC_UNREADABLE metadata hash has no revision field')
end
local rev = tonumber(stored)
if rev == nil then
  return redis.error_reply('RSC_UNREADABLE revision field is not an integer')
end
if rev ~= tonumber(ARGV[1]) then
  return {0, rev}
end
redis.call('DEL', KEYS[1], KEYS[2])
return {1}
