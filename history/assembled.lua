-- assembled.lua reads a growing message as assembled (grow.lua writes
-- it) with the room's state, in one step.
-- KEYS[1] seq key, KEYS[2] epoch key, KEYS[3] the message's key, KEYS[4]
-- the log key.
-- Returns {epoch or '', last seq, first retained seq, the assembled
-- Message encoded or ''}.

local epoch = redis.call('GET', KEYS[2])
local last = redis.call('GET', KEYS[1])
if not epoch or not last then
  return {'', 0, 0, ''}
end
local first = 0
local oldest = redis.call('XRANGE', KEYS[4], '-', '+', 'COUNT', 1)
if #oldest > 0 then
  first = tonumber(string.match(oldest[1][1], '^(%d+)'))
end
local h = redis.call('HMGET', KEYS[3], 'e', 'm', 'v', 's', 'f', 'b', 'h', 't')
if h[1] ~= epoch then
  return {epoch, tonumber(last), first, ''}
end
local inner = '\8' .. varint(tonumber(h[2])) .. '\16' .. varint(tonumber(h[3]))
if #h[6] > 0 then
  inner = inner .. '\26' .. varint(#h[6]) .. h[6]
end
inner = inner .. '\32\1'
if h[5] == '1' then
  inner = inner .. '\40\1'
end
local msg = h[7] .. '\16' .. varint(tonumber(h[4])) .. h[8] .. 'B' .. varint(#inner) .. inner
return {epoch, tonumber(last), first, msg}
