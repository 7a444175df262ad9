-- append.lua assigns a room's next seq to a message, stores it in the room's
-- stream, trims the stream, refreshes the expiry of the room's keys and
-- publishes the message. One script does it all, so it is atomic and the
-- order on the room's channel equals seq order, whichever process appends.
--
-- It also appends the message's event to the event log stream when there
-- is one, numbered and stamped with the log's epoch like events/add.lua
-- does (ARGV[7] serves as the epoch of a new log), so that a message is in
-- the event log exactly when it is in history.
--
-- KEYS[1] seq key, KEYS[2] log key (stream), KEYS[3] epoch key,
-- KEYS[4] here key, KEYS[5] dedupe key (absent when the publish has none),
-- then the sender key (present when ARGV[13] is not ''), then the event
-- log stream key (absent when there is no event log)
-- ARGV[1] the encoded Message before the seq field (field 1, room)
-- ARGV[2] the encoded Message after the seq field (fields 3 and up)
-- ARGV[3] the room's pub/sub channel
-- ARGV[4] MAXLEN of the stream (approximate trimming)
-- ARGV[5] TTL of the room's keys in ms
-- ARGV[6] dedupe window in ms
-- ARGV[7] a fresh epoch, used when the room has no history
-- ARGV[8] MAXLEN of the event log stream (approximate trimming), '' when
--         there is no event log
-- ARGV[9] '1' to publish with SPUBLISH (sharded pub/sub, Redis Cluster),
--         else PUBLISH
-- ARGV[10] the epoch the caller knows the room by ('' when none)
-- ARGV[11] the newest seq the caller knows in that epoch
-- ARGV[12] '1' to open a new epoch for a history that came by replication
--          (no here key: see below), '0' not to (replica wait)
-- ARGV[13] the publish's place in its sender's sequence (history.Sender),
--          '' when none; it comes with a dedupe key
--
-- Sender order: the sender key holds "<place> <epoch>", the stream's last
-- stored place, for the dedupe window. A publish whose place is more than
-- one past it is refused (nothing written), so a sender's publishes enter
-- the room in the order it numbered them. Written here, with the message,
-- the mark is lost by a failover exactly when the message is.
--
-- Loss detection: Redis replicates asynchronously, so a replica promoted
-- after a failover may lack the newest acknowledged messages; its seq key
-- is then below what a caller already saw. Continuing would give the next
-- message a seq that named another message in the same epoch, so the
-- room moves to a new epoch instead (the surviving messages keep their
-- seqs in it) and whoever held the old one gets a reset.
--
-- That check needs the caller to know what was lost, and the caller may
-- be another process that never saw the lost messages: it would append
-- into the old epoch, reusing their seqs, before any process that saw
-- them looks. So the script also recognises a history that reached this
-- server by replication: the here key is written on the master only
-- (redis.set_repl(REPL_NONE): never replicated nor in the AOF), so a
-- promoted replica lacks it. The first append there opens a new epoch,
-- whoever appends, whether or not anything was lost.
--
-- Either bump is announced on the room's channel by an empty publication
-- before the message: subscribers (other processes) then catch the room up
-- from history, and see the new epoch, before they deliver anything more.
--
-- Returns {seq, epoch, duplicate (0 or 1), epoch bumped (0: no, 1: the
-- caller saw more, 2: the history came by replication)}, or, refused for
-- sender order, {the stream's last place, epoch, 2, 0}.

local seqKey, logKey, epochKey, hereKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local nkeys, eventsKey, dedupeKey, senderKey = #KEYS, nil, nil, nil
if ARGV[8] ~= '' then
  eventsKey = KEYS[nkeys]
  nkeys = nkeys - 1
end
local place = nil
if ARGV[13] ~= '' then
  senderKey = KEYS[nkeys]
  nkeys = nkeys - 1
  place = tonumber(ARGV[13])
end
if nkeys >= 5 then
  dedupeKey = KEYS[5]
end
local ttl = ARGV[5]

local epoch = redis.call('GET', epochKey)
local last = redis.call('GET', seqKey)

if epoch and last and dedupeKey then
  -- The value is "<seq> <epoch>": a key left from a lost history is void.
  local seen = redis.call('GET', dedupeKey)
  if seen then
    local sp = string.find(seen, ' ', 1, true)
    if sp and string.sub(seen, sp + 1) == epoch then
      return {tonumber(string.sub(seen, 1, sp - 1)), epoch, 1, 0}
    end
  end
end

if epoch and last and senderKey then
  local mark = redis.call('GET', senderKey)
  if mark then
    local sp = string.find(mark, ' ', 1, true)
    if sp and string.sub(mark, sp + 1) == epoch then
      local prev = tonumber(string.sub(mark, 1, sp - 1))
      if prev + 1 < place then
        return {prev, epoch, 2, 0}
      end
    end
  end
end

local lost = 0
if epoch and last then
  last = tonumber(last)
  if epoch == ARGV[10] and last < tonumber(ARGV[11]) then
    lost = 1
  elseif ARGV[12] == '1' and redis.call('EXISTS', hereKey) == 0 then
    lost = 2
  end
  if lost > 0 then
    epoch = ARGV[7]
    redis.call('SET', epochKey, epoch, 'PX', ttl)
  else
    redis.call('PEXPIRE', epochKey, ttl)
  end
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

redis.set_repl(redis.REPL_NONE)
redis.call('SET', hereKey, '1', 'PX', ttl)
redis.set_repl(redis.REPL_ALL)
redis.call('SET', seqKey, seqStr, 'PX', ttl)
redis.call('XADD', logKey, 'MAXLEN', '~', ARGV[4], seqStr .. '-0', 'm', data)
redis.call('PEXPIRE', logKey, ttl)
if dedupeKey then
  redis.call('SET', dedupeKey, seqStr .. ' ' .. epoch, 'PX', ARGV[6])
end
if senderKey then
  redis.call('SET', senderKey, ARGV[13] .. ' ' .. epoch, 'PX', ARGV[6])
end
if eventsKey then
  local n, logEpoch = 1, ARGV[7]
  local top = redis.call('XREVRANGE', eventsKey, '+', '-', 'COUNT', 1)
  if #top > 0 then
    n = tonumber(top[1][2][2]) + 1
    logEpoch = top[1][2][4]
  end
  redis.call('XADD', eventsKey, 'MAXLEN', '~', ARGV[8], '*', 'n', string.format('%d', n), 'x', logEpoch, 'm', data)
end
local pub = 'PUBLISH'
if ARGV[9] == '1' then
  pub = 'SPUBLISH'
end
if lost > 0 then
  redis.call(pub, ARGV[3], '')
end
redis.call(pub, ARGV[3], data)
return {seq, epoch, 0, lost}
