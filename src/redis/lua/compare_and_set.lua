-- Compare-and-set of one group (SPEC R2.6): check the revision, then write everything.
-- The key is never created here: a vanished hash is a conflict (SPEC L1).
-- KEYS[1] metadata hash   KEYS[2] liveness sorted set
-- ARGV[1] expected revision
-- ARGV[2] '1' to write the aggregate (revision + 1), '0' for a liveness-only write
-- ARGV[3] aggregate JSON  ARGV[4] schemaVersion  ARGV[5] layoutVersion
-- ARGV[6] updatedAt (ms)  ARGV[7] writeToken
-- ARGV[8] SHA-1 of the aggregate bytes the caller decided on ('' = unknown, not checked):
--         an aggregate edited outside the coordinator is never overwritten (SPEC L3)
-- ARGV[9] n = liveness entries to set, then n pairs (member, deadline ms), then pairs
--         (member, bound) to remove. A set never lowers a stored deadline. A removal with
--         a bound holds only while the stored deadline is at most the bound ('-1': only
--         while there is none); otherwise nothing is written and the reply is a conflict:
--         the member was renewed after the caller's load (liveness writes keep the
--         revision; simulator seed 93000387). An empty bound removes unconditionally.
-- Reply: {1, newRevision} applied; {0, storedRevision} conflict ({0, -1}: no hash).
-- Everything is validated before the first write: a script that fails halfway is not
-- rolled back by Redis.
local stored = redis.call('HGET', KEYS[1], 'revision')
if stored == false then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return redis.error_reply('RSC_UNREADABLE metadata hash has no revision field')
  end
  return {0, -1}
end
local rev = tonumber(stored)
if rev == nil or rev ~= math.floor(rev) then
  return redis.error_reply('RSC_UNREADABLE revision field is not an integer')
end
if rev ~= tonumber(ARGV[1]) then
  return {0, rev}
end
local n = tonumber(ARGV[9])
if n == nil or n < 0 or 9 + 2 * n > #ARGV or (#ARGV - 9 - 2 * n) % 2 ~= 0 then
  return redis.error_reply('ERR compare_and_set: bad liveness argument count')
end
local live_type = redis.call('TYPE', KEYS[2]).ok
if live_type ~= 'none' and live_type ~= 'zset' then
  return redis.error_reply('RSC_UNREADABLE liveness key is a ' .. live_type .. ', not a sorted set')
end
local r = 10 + 2 * n
while r < #ARGV do
  if ARGV[r + 1] ~= '' then
    local current = redis.call('ZSCORE', KEYS[2], ARGV[r])
    local bound = tonumber(ARGV[r + 1])
    if current ~= false and (bound < 0 or tonumber(current) > bound) then
      return {0, rev}
    end
  end
  r = r + 2
end
if ARGV[2] == '1' and ARGV[8] ~= '' then
  local current = redis.call('HGET', KEYS[1], 'aggregate') or ''
  if redis.sha1hex(current) ~= ARGV[8] then
    return redis.error_reply('RSC_UNREADABLE aggregate was changed outside the coordinator ' ..
                             '(same revision and writeToken); not overwriting it')
  end
end
local new_rev = rev
if ARGV[2] == '1' then
  new_rev = rev + 1
  redis.call('HSET', KEYS[1], 'aggregate', ARGV[3], 'revision', string.format('%d', new_rev),
             'schemaVersion', ARGV[4], 'layoutVersion', ARGV[5], 'updatedAt', ARGV[6],
             'writeToken', ARGV[7])
end
-- A deadline only ever moves forward: a section that read the clock before a long pause
-- (its mutex expired meanwhile) must not shorten a lease a later heartbeat extended —
-- liveness-only writes do not bump the revision, so the check above cannot catch that
-- (found by the simulator, seed 137). Not ZADD GT: that needs Redis 6.2.
local i = 10
for _ = 1, n do
  local current = redis.call('ZSCORE', KEYS[2], ARGV[i])
  if current == false or tonumber(current) < tonumber(ARGV[i + 1]) then
    redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i])
  end
  i = i + 2
end
while i < #ARGV do
  redis.call('ZREM', KEYS[2], ARGV[i])
  i = i + 2
end
return {1, new_rev}
