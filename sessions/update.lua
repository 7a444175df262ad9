-- update.lua sets and deletes fields of an existing session hash; it never
-- creates one (that would be a session without token or expiry).
--
-- KEYS[1] session key
-- ARGV[1] n, the number of field/value pairs to set
-- ARGV[2 .. 2n+1] the pairs; the rest are fields to delete
--
-- Returns 1, or 0 when the session does not exist.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local n = tonumber(ARGV[1])
if n > 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 2, 2 * n + 1))
end
if #ARGV > 2 * n + 1 then
  redis.call('HDEL', KEYS[1], unpack(ARGV, 2 * n + 2, #ARGV))
end
return 1
