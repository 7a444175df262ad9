-- add.lua appends events to the event log stream. Each entry is
-- numbered one after the stream's newest entry, so that numbers have no
-- gaps, and stamped with the log's epoch, a random id chosen when the
-- stream is (re)created, so that a reader can tell a reset log from the
-- one it was reading. history/append.lua appends message events the same
-- way (except on Redis Cluster, where it calls this script after the
-- append).
--
-- KEYS[1] the event stream
-- ARGV[1] MAXLEN of the stream (approximate trimming)
-- ARGV[2] a fresh epoch, used when the stream has no entries
-- ARGV[3] the field holding each value: 'e' (an encoded Event) or 'm' (an
--         encoded Message)
-- ARGV[4..] the encoded values
--
-- Each entry is "n" <number>, "x" <epoch>, then "e" <Event> or
-- "m" <Message>, in this order.

local key = KEYS[1]
local n, epoch = 0, ARGV[2]
local top = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
if #top > 0 then
  n = tonumber(top[1][2][2])
  epoch = top[1][2][4]
end
for i = 4, #ARGV do
  n = n + 1
  redis.call('XADD', key, 'MAXLEN', '~', ARGV[1], '*', 'n', string.format('%d', n), 'x', epoch, ARGV[3], ARGV[i])
end
return n
