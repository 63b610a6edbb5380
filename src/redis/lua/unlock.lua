-- Releases the group mutex only if it still holds our token (SPEC R2.7).
-- KEYS[1] lock key   ARGV[1] token
-- Reply: 1 released, 0 not ours (expired and possibly taken by someone else).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
