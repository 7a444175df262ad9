-- create.lua stores a new session hash with its expiry, unless the id is
-- taken.
--
-- KEYS[1] session key
-- ARGV[1] token hash, ARGV[2] user id, ARGV[3] creation time (Unix ms),
-- ARGV[4] TTL in ms
--
-- Returns 1, or 0 when the key exists.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'tok', ARGV[1], 'uid', ARGV[2], 'ct', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
