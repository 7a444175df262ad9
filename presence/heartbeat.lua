-- heartbeat.lua records that a core is alive, in Redis time so that clock
-- skew between hosts does not matter, and lists the cores that are not.
--
-- KEYS[1] the cores sorted set (core -> last heartbeat, ms)
-- ARGV[1] this core's id
-- ARGV[2] how long without a heartbeat makes a core dead, in ms
--
-- Returns {added (1 when this core was not in the set: it was swept or is
-- new), dead core ids...}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local added = redis.call('ZADD', KEYS[1], now, ARGV[1])
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
local out = {added}
for _, id in ipairs(dead) do
  if id ~= ARGV[1] then
    table.insert(out, id)
  end
end
return out
