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
-- ARGV[7] (optional) the growing messages' key prefix (the id follows):
--         fold them (history.Query.Assembled): an entry grow.lua wrote
--         (field g, the id) is the assembled message in the place of its
--         last chunk, left out elsewhere; ARGV[5] is then the page limit
--         plus one and ARGV[6] bounds the folded entries
--
-- Returns {epoch, last seq, first retained seq (0: none), message...};
-- folding, {epoch, last, first, next, more, message...}: next the seq of
-- the last entry read into the page, more 1 when the page stopped early.

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

local foldPrefix = ARGV[7] or ''

-- fold returns the page of the stream entries ents folded (see ARGV[7]),
-- at most ARGV[5] - 1 entries read and maxBytes of folded ones (0: no
-- bound; at least one); stopped: the read stopped at its byte bound.
local function fold(ents, maxBytes, stopped)
  local limit = tonumber(ARGV[5]) - 1
  local res = {epoch, last, first, 0, 0}
  local more, bytes = 0, 0
  local n = #ents
  if n > limit then
    n, more = limit, 1
  end
  for i = 1, n do
    local e = ents[i]
    local seq = tonumber(string.match(e[1], '^%d+'))
    local m = e[2][2]
    local id = e[2][4]
    if e[2][3] == 'g' and id then
      -- The body only for the chunk that places the message: a page of
      -- one long message's chunks reads it once.
      local es = redis.call('HMGET', foldPrefix .. id, 'e', 's')
      if es[1] == epoch then
        if tonumber(es[2]) ~= seq then
          m = nil -- the message is in the place of its last chunk
        else
          local h = redis.call('HMGET', foldPrefix .. id, 'e', 'm', 'v', 's', 'f', 'b', 'h', 't')
          local inner = '\8' .. varint(tonumber(h[2])) .. '\16' .. varint(tonumber(h[3]))
          if #h[6] > 0 then
            inner = inner .. '\26' .. varint(#h[6]) .. h[6]
          end
          inner = inner .. '\32\1'
          if h[5] == '1' then
            inner = inner .. '\40\1'
          end
          m = h[7] .. '\16' .. varint(seq) .. h[8] .. 'B' .. varint(#inner) .. inner
        end
      end
    end
    if m then
      if maxBytes > 0 and #res > 5 and bytes + #m > maxBytes then
        more = 1
        break
      end
      bytes = bytes + #m
      res[#res + 1] = m
    end
    res[4] = seq
  end
  if stopped then
    more = 1
  end
  res[5] = more
  return res
end

local out = {epoch, last, first}
local dir, pos, count = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local maxBytes = tonumber(ARGV[6] or '0')
local entries = {}
local raw = {}
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
      raw[#raw + 1] = chunk[i]
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
  if foldPrefix ~= '' then
    return fold(raw, maxBytes, done)
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
if foldPrefix ~= '' then
  return fold(entries, 0, false)
end
for i = 1, #entries do
  out[#out + 1] = entries[i][2][2]
end
return out
