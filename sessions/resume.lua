-- resume.lua authorizes a resume and only then changes the session: it
-- checks that the session exists, that the token and the user match and
-- that the attempt is not stale, before any write; then it records the
-- attempt, rotates the token and refreshes the expiry. A refused resume
-- changes nothing. Rotation: the new token becomes current ('tok') and the
-- presented one is kept as 'ptok' until the new one is used, for a client
-- that never received the Welcome carrying it (see Store.Resume).
-- The compare is on SHA-256 hashes of the tokens, so its timing tells an
-- attacker nothing about a token.
--
-- KEYS[1] session key
-- ARGV[1] hash of the presented token, ARGV[2] user id, ARGV[3] TTL in
-- ms, ARGV[4] client instance ("" for no ordering), ARGV[5] attempt (0 for
-- no ordering), ARGV[6] hash of the new token
--
-- Returns the session hash (HGETALL, flat) after the change, or an integer:
-- 0 when the session does not exist, -1 for a stale attempt, -2 for a token
-- mismatch, -3 for another user's session.

local cur = redis.call('HMGET', KEYS[1], 'tok', 'uid', 'ai', 'an', 'ptok')
if not cur[1] then
  return 0
end
if cur[1] ~= ARGV[1] and cur[5] ~= ARGV[1] then
  return -2
end
if cur[2] ~= ARGV[2] then
  return -3
end
local attempt = tonumber(ARGV[5])
local ordered = ARGV[4] ~= '' and attempt > 0
if ordered and cur[3] == ARGV[4] and tonumber(cur[4]) >= attempt then
  return -1
end
if ordered then
  redis.call('HSET', KEYS[1], 'ai', ARGV[4], 'an', ARGV[5])
end
redis.call('HSET', KEYS[1], 'tok', ARGV[6], 'ptok', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('HGETALL', KEYS[1])
