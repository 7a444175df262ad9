-- sweep.lua removes a dead core's connections from one room's presence,
-- atomically, publishing one change per member it affects. Run twice, the
-- second run finds nothing: each member's leave is emitted once.
--
-- KEYS[1] members hash, KEYS[2] states hash, KEYS[3] the dead core's hash
-- for the room, KEYS[4] version counter, KEYS[5] infos hash
-- ARGV[1] the room's presence channel
-- ARGV[2] the version counter's TTL in ms
-- ARGV[3] '1' to publish with SPUBLISH (Redis Cluster), else PUBLISH
--
-- Returns a flat array of {kind, version, connections, user, state, info}
-- per change. Changes are published as change.lua does.

local members, states, dead, verKey, infos = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local publish = 'PUBLISH'
if ARGV[3] == '1' then publish = 'SPUBLISH' end
local held = redis.call('HGETALL', dead)
local out = {}
for i = 1, #held, 2 do
  local user, n = held[i], tonumber(held[i + 1])
  local before = tonumber(redis.call('HGET', members, user) or '0')
  if before > 0 and n > 0 then
    local after = before - n
    local state = redis.call('HGET', states, user) or ''
    local info = redis.call('HGET', infos, user) or ''
    local kind = 2
    if after <= 0 then
      after = 0
      kind = 3
      redis.call('HDEL', members, user)
      redis.call('HDEL', states, user)
      redis.call('HDEL', infos, user)
    else
      redis.call('HSET', members, user, after)
    end
    local v = redis.call('INCR', verKey)
    redis.call('PEXPIRE', verKey, ARGV[2])
    if info == '' then
      redis.call(publish, ARGV[1], kind .. '|' .. v .. '|' .. after .. '|' .. #user .. '|' .. user .. state)
    else
      redis.call(publish, ARGV[1], 'i|' .. kind .. '|' .. v .. '|' .. after .. '|' .. #user .. '|' .. #info .. '|' .. user .. info .. state)
    end
    table.insert(out, kind)
    table.insert(out, v)
    table.insert(out, after)
    table.insert(out, user)
    table.insert(out, state)
    table.insert(out, info)
  end
end
redis.call('DEL', dead)
return out
