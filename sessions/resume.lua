-- resume.lua refreshes a session's expiry and records which resume attempt
-- holds it, refusing an attempt of the same client instance that is not
-- newer than the one recorded (a slow attempt its client gave up on). The
-- caller has already checked the token.
--
-- KEYS[1] session key
-- ARGV[1] TTL in ms, ARGV[2] client instance ("" for no ordering),
-- ARGV[3] attempt (0 for no ordering)
--
-- Returns 1, 0 when the session does not exist, -1 for a stale attempt.

if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local attempt = tonumber(ARGV[3])
if ARGV[2] ~= '' and attempt > 0 then
  local cur = redis.call('HMGET', KEYS[1], 'ai', 'an')
  if cur[1] == ARGV[2] and tonumber(cur[2]) >= attempt then
    return -1
  end
  redis.call('HSET', KEYS[1], 'ai', ARGV[2], 'an', ARGV[3])
end
return 1
