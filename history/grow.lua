-- grow.lua appends one chunk of a growing message (history/grow.go): it
-- takes the room's next seq as append.lua does (the same epoch rules:
-- a new epoch for a room without history, for a caller that saw more, or
-- for a history that came by replication), checks and updates the
-- message's assembled state, stores and publishes the chunk, and with an
-- event log commits the assembled message as the final chunk's event.
--
-- KEYS[1] seq key, KEYS[2] log key, KEYS[3] epoch key, KEYS[4] here key,
-- KEYS[5] the message's key (hash), KEYS[6] the room's set of open
-- growing messages (ids without a final chunk, read by open.lua), then the
-- event log stream key (absent when there is no event log)
-- ARGV[1] the encoded Message before the seq field (field 1, room)
-- ARGV[2] the encoded Message after it (fields 3-7), without chunk
-- ARGV[3] the room's channel, ARGV[4] MAXLEN of the log, ARGV[5] TTL in
-- ms, ARGV[6] a fresh epoch, ARGV[7] MAXLEN of the event log ('' when
-- none), ARGV[8] '1' for SPUBLISH, ARGV[9] the epoch the caller knows,
-- ARGV[10] the newest seq it knows there, ARGV[11] '1' to open a new
-- epoch for a history that came by replication
-- ARGV[12] the chunk's data, ARGV[13] '1' replace, ARGV[14] '1' final,
-- ARGV[15] the longest body, ARGV[16] the version the chunk makes ('0':
-- unchecked), ARGV[17] the message's id
--
-- The message's hash: e (epoch), m (seq of its first chunk), v (version),
-- s (seq of its last chunk), f ('1' final), b (body), h and t (the first
-- chunk's encoding around the seq, without chunk: sender, time, id).
--
-- Returns {seq, epoch, 0, lost, version, seq of the first chunk}, or {0, epoch, 1} for a final
-- message, {0, epoch, 2, size} for a body past the bound.

local seqKey, logKey, epochKey, hereKey, msgKey, openKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local eventsKey = nil
if ARGV[7] ~= '' then
  eventsKey = KEYS[7]
end
local ttl = ARGV[5]

-- chunkField is Message field 8 (MessageChunk), length-delimited.
local function chunkField(mseq, version, data, replace, final)
  local inner = '\8' .. varint(mseq) .. '\16' .. varint(version)
  if #data > 0 then
    inner = inner .. '\26' .. varint(#data) .. data
  end
  if replace then
    inner = inner .. '\32\1'
  end
  if final then
    inner = inner .. '\40\1'
  end
  return 'B' .. varint(#inner) .. inner
end

local epoch = redis.call('GET', epochKey)
local last = redis.call('GET', seqKey)

local lost = 0
if epoch and last then
  last = tonumber(last)
  if epoch == ARGV[9] and last < tonumber(ARGV[10]) then
    lost = 1
  elseif ARGV[11] == '1' and redis.call('EXISTS', hereKey) == 0 then
    lost = 2
  end
else
  last = 0
  lost = 3 -- no history: a new epoch from seq 1
end

-- The message as assembled in this epoch, if any. Its checks come before
-- any write: a refused chunk changes nothing.
local newEpoch = lost > 0
local g = nil
if not newEpoch then
  local h = redis.call('HMGET', msgKey, 'e', 'm', 'v', 'f', 'b', 's')
  if h[1] == epoch then
    g = {m = tonumber(h[2]), v = tonumber(h[3]), f = h[4] == '1', b = h[5], s = tonumber(h[6])}
  end
end
local want, have = tonumber(ARGV[16]), 0
if g then
  have = g.v
end
if want > 0 and want <= have then
  return {g.s, epoch, 3, have}
end
if want > have + 1 then
  return {0, epoch or '', 4, have}
end
local data, replace, final = ARGV[12], ARGV[13] == '1', ARGV[14] == '1'
local body = data
if g then
  if g.f then
    return {0, epoch, 1}
  end
  if not replace then
    body = g.b .. data
  end
end
if #body > tonumber(ARGV[15]) then
  return {0, epoch or '', 2, #body}
end

if lost == 3 then
  redis.call('DEL', logKey)
  epoch = ARGV[6]
  redis.call('SET', epochKey, epoch, 'PX', ttl)
  lost = 0
elseif lost > 0 then
  epoch = ARGV[6]
  redis.call('SET', epochKey, epoch, 'PX', ttl)
else
  redis.call('PEXPIRE', epochKey, ttl)
end

local seq = last + 1
local seqStr = string.format('%d', seq)
local seqField = '\16' .. varint(seq)
local version, mseq, head, tail = 1, seq, ARGV[1], ARGV[2]
if g then
  version, mseq = g.v + 1, g.m
  local ht = redis.call('HMGET', msgKey, 'h', 't')
  head, tail = ht[1], ht[2]
else
  redis.call('DEL', msgKey)
  redis.call('HSET', msgKey, 'e', epoch, 'm', seqStr, 'h', ARGV[1], 't', ARGV[2])
end
local chunk = ARGV[1] .. seqField .. ARGV[2] .. chunkField(mseq, version, data, replace, final)
local f = '0'
if final then
  f = '1'
end
redis.call('HSET', msgKey, 'v', string.format('%d', version), 's', seqStr, 'f', f, 'b', body)
redis.call('PEXPIRE', msgKey, ttl)
if final then
  redis.call('SREM', openKey, ARGV[17])
else
  redis.call('SADD', openKey, ARGV[17])
  redis.call('PEXPIRE', openKey, ttl)
end

redis.set_repl(redis.REPL_NONE)
redis.call('SET', hereKey, '1', 'PX', ttl)
redis.set_repl(redis.REPL_ALL)
redis.call('SET', seqKey, seqStr, 'PX', ttl)
-- g: the message's id, for read.lua's fold of growing messages.
redis.call('XADD', logKey, 'MAXLEN', '~', ARGV[4], seqStr .. '-0', 'm', chunk, 'g', ARGV[17])
redis.call('PEXPIRE', logKey, ttl)
if eventsKey and final then
  local assembled = head .. seqField .. tail .. chunkField(mseq, version, body, true, true)
  local n, logEpoch = 1, ARGV[6]
  local top = redis.call('XREVRANGE', eventsKey, '+', '-', 'COUNT', 1)
  if #top > 0 then
    n = tonumber(top[1][2][2]) + 1
    logEpoch = top[1][2][4]
  end
  redis.call('XADD', eventsKey, 'MAXLEN', '~', ARGV[7], '*', 'n', string.format('%d', n), 'x', logEpoch, 'm', assembled)
end
local pub = 'PUBLISH'
if ARGV[8] == '1' then
  pub = 'SPUBLISH'
end
if lost > 0 then
  redis.call(pub, ARGV[3], '')
end
redis.call(pub, ARGV[3], chunk)
return {seq, epoch, 0, lost, version, mseq}
