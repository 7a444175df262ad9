-- change.lua applies one change to a room's presence atomically and
-- publishes it on the room's presence channel.
--
-- KEYS[1] members hash (user -> connections on every core)
-- KEYS[2] states hash (user -> state)
-- KEYS[3] this core's hash for the room (user -> its connections here)
-- KEYS[4] version counter
-- KEYS[5] infos hash (user -> member info; absent in entries written
-- before member info existed: none)
-- ARGV[1] user
-- ARGV[2] connection delta: '1' (add), '-1' (remove) or '0' (set state)
-- ARGV[3] '1' when ARGV[4] replaces the state
-- ARGV[4] state
-- ARGV[5] the room's presence channel
-- ARGV[6] the version counter's TTL in ms
-- ARGV[7] '1' to publish with SPUBLISH (Redis Cluster), else PUBLISH
-- ARGV[8] '1' when ARGV[9] replaces the member info
-- ARGV[9] member info
--
-- Returns {} when nothing changed, else {kind, version, connections, state,
-- info} with kind 1 joined, 2 updated, 3 left.
-- The published change is "kind|version|connections|len(user)|user state",
-- or, when the member has info, "i|kind|version|connections|len(user)|
-- len(info)|user info state" (older decoders drop it, never misread it).

local members, states, mine, verKey, infos = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local publish = 'PUBLISH'
if ARGV[7] == '1' then publish = 'SPUBLISH' end
local user, delta = ARGV[1], tonumber(ARGV[2])
local before = tonumber(redis.call('HGET', members, user) or '0')

if delta < 0 then
  local n = tonumber(redis.call('HGET', mine, user) or '0')
  if n <= 0 then
    return {} -- swept meanwhile: nothing of ours to remove
  end
  if n == 1 then
    redis.call('HDEL', mine, user)
  else
    redis.call('HINCRBY', mine, user, -1)
  end
elseif delta > 0 then
  redis.call('HINCRBY', mine, user, 1)
elseif before == 0 then
  return {} -- state of someone not present
end

local after = before + delta
local state = redis.call('HGET', states, user) or ''
local info = redis.call('HGET', infos, user) or ''
local kind
if after <= 0 then
  after = 0
  kind = 3
  redis.call('HDEL', members, user)
  redis.call('HDEL', states, user)
  redis.call('HDEL', infos, user)
else
  if ARGV[3] == '1' then
    if delta == 0 and state == ARGV[4] then
      return {}
    end
    state = ARGV[4]
    if state == '' then
      redis.call('HDEL', states, user)
    else
      redis.call('HSET', states, user, state)
    end
  end
  if ARGV[8] == '1' then
    info = ARGV[9]
    if info == '' then
      redis.call('HDEL', infos, user)
    else
      redis.call('HSET', infos, user, info)
    end
  end
  if delta ~= 0 then
    redis.call('HSET', members, user, after)
  end
  if before == 0 then kind = 1 else kind = 2 end
end

local v = redis.call('INCR', verKey)
redis.call('PEXPIRE', verKey, ARGV[6])
if info == '' then
  redis.call(publish, ARGV[5], kind .. '|' .. v .. '|' .. after .. '|' .. #user .. '|' .. user .. state)
else
  redis.call(publish, ARGV[5], 'i|' .. kind .. '|' .. v .. '|' .. after .. '|' .. #user .. '|' .. #info .. '|' .. user .. info .. state)
end
return {kind, v, after, state, info}
