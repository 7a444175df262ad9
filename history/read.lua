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
-- ARGV[6] bytes to read at most (0: no bound): the entries are read in
--         chunks, and the reading stops after the first entry past the
--         first that takes their sum past it (the caller cuts that one
--         off, and knows there is more), so that a page of large messages
--         is not built whole in the script's memory
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
local maxBytes = tonumber(ARGV[6] or '0')
local entries = {}
if maxBytes > 0 and (dir == 'f' or dir == 'r') then
  -- Chunks of 64 entries from pos on, until count entries or maxBytes.
  local left, bytes = tonumber(count), 0
  local from, to = string.format('%d-0', pos + 1), '+'
  if dir == 'r' then
    from, to = '+', '-'
    if pos == 1 then
      left = 0
    elseif pos > 1 then
      from = string.format('%d-0', pos - 1)
    end
  end
  local taken, done = 0, false
  while left > 0 and not done do
    local chunk
    if dir == 'f' then
      chunk = redis.call('XRANGE', logKey, from, to, 'COUNT', math.min(left, 64))
    else
      chunk = redis.call('XREVRANGE', logKey, from, to, 'COUNT', math.min(left, 64))
    end
    if #chunk == 0 then
      break
    end
    for i = 1, #chunk do
      local m = chunk[i][2][2]
      out[#out + 1] = m
      left, taken, bytes = left - 1, taken + 1, bytes + #m
      if bytes > maxBytes and taken > 1 then
        done = true
        break
      end
    end
    local seq = tonumber(string.match(chunk[#chunk][1], '^%d+'))
    if dir == 'f' then
      from = string.format('%d-0', seq + 1)
    elseif seq <= 1 then
      left = 0
    else
      from = string.format('%d-0', seq - 1)
    end
  end
  return out
end
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
