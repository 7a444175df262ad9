-- read.lua reports a room's epoch and seq bounds and reads one page of its
-- stream, creating the epoch when the room has none (unless it peeks),
-- atomically.
--
-- KEYS[1] seq key, KEYS[2] log key (stream), KEYS[3] epoch key,
-- KEYS[4] here key (see append.lua: a new epoch is this server's own)
-- ARGV[1] a fresh epoch, used when the room has no history; "" (peek):
--         a room with no history is not created and reads as {"", 0, 0}
-- ARGV[2] TTL of the room's keys in ms, for a new epoch
-- ARGV[3] "f" forward, "r" reverse, "" state only
-- ARGV[4] forward: read seq > this; reverse: read seq < this (0: newest)
-- ARGV[5] how many entries to read at most
--
-- Returns {epoch, last seq, first retained seq (0: none), message...}.

local seqKey, logKey, epochKey = KEYS[1], KEYS[2], KEYS[3]

local epoch = redis.call('GET', epochKey)
local last = redis.call('GET', seqKey)
if epoch and last then
  last = tonumber(last)
elseif ARGV[1] == '' then
  return {'', 0, 0}
else
  -- As in append.lua: a missing or partial history starts a new epoch.
  redis.call('DEL', logKey)
  epoch = ARGV[1]
  last = 0
  redis.call('SET', epochKey, epoch, 'PX', ARGV[2])
  redis.call('SET', seqKey, '0', 'PX', ARGV[2])
  redis.set_repl(redis.REPL_NONE)
  redis.call('SET', KEYS[4], '1', 'PX', ARGV[2])
  redis.set_repl(redis.REPL_ALL)
end

local first = 0
local head = redis.call('XRANGE', logKey, '-', '+', 'COUNT', 1)
if head[1] then
  first = tonumber(string.match(head[1][1], '^%d+'))
end

local out = {epoch, last, first}
local dir, pos, count = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local entries = {}
if dir == 'f' then
  entries = redis.call('XRANGE', logKey, string.format('%d-0', pos + 1), '+',
    'COUNT', count)
elseif dir == 'r' then
  if pos == 0 then
    entries = redis.call('XREVRANGE', logKey, '+', '-', 'COUNT', count)
  elseif pos > 1 then
    entries = redis.call('XREVRANGE', logKey, string.format('%d-0', pos - 1),
      '-', 'COUNT', count)
  end
end
for i = 1, #entries do
  out[#out + 1] = entries[i][2][2]
end
return out
