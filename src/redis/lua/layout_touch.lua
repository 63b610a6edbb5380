-- A replication barrier for a stream's layout (SPEC RS2, MetadataStore::ConfirmLayout):
-- while the layout is at revision ARGV[1], rewrite its informational `updatedAt` (ARGV[2])
-- so that this connection has a write a `WAIT` right after it can count; everything written
-- to the hash before it is replicated with it. Nothing else changes.
-- KEYS[1] redis-stream:coord:{P}:layout
-- Reply: 1 touched; 0 the revision moved (or the hash is gone).
if redis.call('HGET', KEYS[1], 'revision') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'updatedAt', ARGV[2])
return 1
