-- open.lua reads a room's open growing messages (those without a final
-- chunk, grow.lua keeps their ids in a set) as assembled, with the room's
-- state, in one step. Ids whose message is gone, of another epoch, or
-- final leave the set.
-- KEYS[1] seq key, KEYS[2] epoch key, KEYS[3] the log key, KEYS[4] the
-- set of open ids; ARGV[1] the messages' key prefix (the id follows),
-- ARGV[2] the most messages to return.
-- Returns {epoch or '', last seq, first retained seq, messages encoded...}.

local epoch = redis.call('GET', KEYS[2])
local last = redis.call('GET', KEYS[1])
if not epoch or not last then
  return {'', 0, 0}
end
local first = 0
local oldest = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 1)
if #oldest > 0 then
  first = tonumber(string.match(oldest[1][1], '^(%d+)'))
end
local out = {epoch, tonumber(last), first}
local most = tonumber(ARGV[2])
for _, id in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  local h = redis.call('HMGET', ARGV[1] .. id, 'e', 'm', 'v', 's', 'f', 'b', 'h', 't')
  if h[1] ~= epoch or h[5] ~= '0' then
    redis.call('SREM', KEYS[4], id)
  elseif #out - 3 < most then
    local inner = '\8' .. varint(tonumber(h[2])) .. '\16' .. varint(tonumber(h[3]))
    if #h[6] > 0 then
      inner = inner .. '\26' .. varint(#h[6]) .. h[6]
    end
    inner = inner .. '\32\1'
    out[#out + 1] = h[7] .. '\16' .. varint(tonumber(h[4])) .. h[8] .. 'B' .. varint(#inner) .. inner
  end
end
return out
