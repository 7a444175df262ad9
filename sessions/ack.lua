-- ack.lua raises a session's seq in each given room to the acked seq. Rooms
-- the session is not in (left, or never joined) are skipped, and a seq never
-- goes down: an ack is only ever "at least this far".
--
-- KEYS[1] session key
-- ARGV room, seq, room, seq, ...
--
-- Returns 1, or 0 when the session does not exist.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
for i = 1, #ARGV, 2 do
  local field = 's:' .. ARGV[i]
  local cur = redis.call('HGET', KEYS[1], field)
  if cur and tonumber(ARGV[i + 1]) > tonumber(cur) then
    redis.call('HSET', KEYS[1], field, ARGV[i + 1])
  end
end
return 1
