-- fence.lua moves a room to a new epoch when its history ends below what
-- the caller saw in the same epoch: messages acknowledged before a Redis
-- failover that the promoted replica never received (see append.lua).
-- Otherwise it changes nothing. A bump is announced on the room's channel
-- by an empty publication, as append.lua does.
--
-- KEYS[1] seq key, KEYS[2] epoch key, KEYS[3] here key
-- ARGV[1] the epoch the caller knows the room by
-- ARGV[2] the newest seq the caller saw in that epoch
-- ARGV[3] a fresh epoch
-- ARGV[4] TTL of the room's keys in ms
-- ARGV[5] the room's pub/sub channel
-- ARGV[6] '1' to publish with SPUBLISH (Redis Cluster), else PUBLISH
--
-- Returns {epoch, last seq, bumped (0 or 1)}; epoch '' when the room has
-- no history.

local epoch = redis.call('GET', KEYS[2])
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if not epoch then
  return {'', last, 0}
end
if epoch == ARGV[1] and last < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  -- The new epoch is this server's own (see append.lua).
  redis.set_repl(redis.REPL_NONE)
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
  redis.set_repl(redis.REPL_ALL)
  if ARGV[6] == '1' then
    redis.call('SPUBLISH', ARGV[5], '')
  else
    redis.call('PUBLISH', ARGV[5], '')
  end
  return {ARGV[3], last, 1}
end
return {epoch, last, 0}
