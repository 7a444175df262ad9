-- append.lua assigns a room's next seq to a message, stores it in the room's
-- stream, trims the stream, refreshes the expiry of the room's keys and
-- publishes the message. One script does it all, so it is atomic and the
-- order on the room's channel equals seq order, whichever process appends.
--
-- KEYS[1] seq key, KEYS[2] log key (stream), KEYS[3] epoch key,
-- KEYS[4] dedupe key (absent when the publish has none)
-- ARGV[1] the encoded Message before the seq field (field 1, room)
-- ARGV[2] the encoded Message after the seq field (fields 3 and up)
-- ARGV[3] the room's pub/sub channel
-- ARGV[4] MAXLEN of the stream (approximate trimming)
-- ARGV[5] TTL of the room's keys in ms
-- ARGV[6] dedupe window in ms
-- ARGV[7] a fresh epoch, used when the room has no history
--
-- Returns {seq, epoch, duplicate (0 or 1)}.

local seqKey, logKey, epochKey, dedupeKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl = ARGV[5]

local epoch = redis.call('GET', epochKey)
local last = redis.call('GET', seqKey)

if epoch and last and dedupeKey then
  -- The value is "<seq> <epoch>": a key left from a lost history is void.
  local seen = redis.call('GET', dedupeKey)
  if seen then
    local sp = string.find(seen, ' ', 1, true)
    if sp and string.sub(seen, sp + 1) == epoch then
      return {tonumber(string.sub(seen, 1, sp - 1)), epoch, 1}
    end
  end
end

if epoch and last then
  last = tonumber(last)
  redis.call('PEXPIRE', epochKey, ttl)
else
  -- No history, or part of it was lost (evicted, expired): start a new
  -- epoch from seq 1 rather than continue with a gap.
  redis.call('DEL', logKey)
  epoch = ARGV[7]
  last = 0
  redis.call('SET', epochKey, epoch, 'PX', ttl)
end

local seq = last + 1
local seqStr = string.format('%d', seq)

-- Protobuf field 2 (seq), wire type varint: tag 0x10, then the varint.
local n = seq
local b = {'\16'}
while n >= 128 do
  b[#b + 1] = string.char(n % 128 + 128)
  n = math.floor(n / 128)
end
b[#b + 1] = string.char(n)
local data = ARGV[1] .. table.concat(b) .. ARGV[2]

redis.call('SET', seqKey, seqStr, 'PX', ttl)
redis.call('XADD', logKey, 'MAXLEN', '~', ARGV[4], seqStr .. '-0', 'm', data)
redis.call('PEXPIRE', logKey, ttl)
if dedupeKey then
  redis.call('SET', dedupeKey, seqStr .. ' ' .. epoch, 'PX', ARGV[6])
end
redis.call('PUBLISH', ARGV[3], data)
return {seq, epoch, 0}
