-- prelude.lua comes before every state script (set.lua, delete.lua,
-- snapshot.lua, since.lua, expire.lua): the room's keys, its epoch and
-- position, the encoding of a key's entry, the change log, and expiry.
--
-- KEYS[1] state hash, KEYS[2] ttl sorted set, KEYS[3] change log stream,
-- KEYS[4] meta hash (epoch, pos)
-- ARGV[1] now in ms (the calling store's clock), ARGV[2] changes kept
-- (exact MAXLEN), ARGV[3] lifetime of the room's keys in ms, ARGV[4] the
-- room's channel, ARGV[5] '1' for SPUBLISH (Redis Cluster), ARGV[6] a
-- fresh epoch for a state that has none; the script's own from ARGV[7].
--
-- An entry is "<version> <expires ms> <value>" (0: no deadline). A change
-- is a stream entry "<pos>-0" with fields k (key), v (value), n (version),
-- d ('0' set, '1' deleted, '2' expired), x (expires ms); it is published
-- on the channel as "\0<pos>\n<epoch>\n<d>\n<version>\n<expires>\n<key>\n<value>"
-- (keys hold no control characters). The leading NUL byte tags it as a
-- change, never a message: the channel may be the room's message channel
-- (RedisOptions.Channel), whose messages are protobuf (never a NUL first).

local hashKey, ttlKey, logKey, metaKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, maxChanges, life, channel = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local pub = 'PUBLISH'
if ARGV[5] == '1' then
  pub = 'SPUBLISH'
end

local epoch = redis.call('HGET', metaKey, 'epoch')
local pos = 0
if epoch then
  pos = tonumber(redis.call('HGET', metaKey, 'pos'))
end

-- ensure gives a state without meta (never written, expired, or evicted
-- in part) a new epoch, dropping whatever was left of it.
local function ensure()
  if not epoch then
    epoch = ARGV[6]
    redis.call('DEL', hashKey, ttlKey, logKey)
    redis.call('HSET', metaKey, 'epoch', epoch, 'pos', '0')
  end
end

local function parse(v)
  local a = string.find(v, ' ', 1, true)
  local b = string.find(v, ' ', a + 1, true)
  return tonumber(string.sub(v, 1, a - 1)), tonumber(string.sub(v, a + 1, b - 1)), string.sub(v, b + 1)
end

local function add(key, value, version, kind, expires)
  pos = pos + 1
  local id = string.format('%d', pos)
  local n, x = string.format('%d', version), string.format('%d', expires)
  redis.call('XADD', logKey, 'MAXLEN', maxChanges, id .. '-0', 'k', key, 'v', value, 'n', n, 'd', kind, 'x', x)
  redis.call('HSET', metaKey, 'pos', id)
  redis.call(pub, channel, '\0' .. id .. '\n' .. epoch .. '\n' .. kind .. '\n' .. n .. '\n' .. x .. '\n' .. key .. '\n' .. value)
end

-- touch restarts the lifetime of the room's keys after a write.
local function touch()
  redis.call('PEXPIRE', hashKey, life)
  redis.call('PEXPIRE', ttlKey, life)
  redis.call('PEXPIRE', logKey, life)
  redis.call('PEXPIRE', metaKey, life)
end

-- expire removes the keys whose deadline is due, in deadline then key
-- order (the sorted set's order), each as a change.
local function expire()
  if not epoch then
    return
  end
  local due = redis.call('ZRANGEBYSCORE', ttlKey, '-inf', now)
  for _, key in ipairs(due) do
    local v = redis.call('HGET', hashKey, key)
    if v then
      local version = parse(v)
      redis.call('HDEL', hashKey, key)
      add(key, '', version, '2', 0)
    end
    redis.call('ZREM', ttlKey, key)
  end
  if #due > 0 then
    touch()
  end
end

-- nextExpiry is the earliest deadline, 0 for none.
local function nextExpiry()
  local first = redis.call('ZRANGE', ttlKey, 0, 0, 'WITHSCORES')
  if #first == 0 then
    return 0
  end
  return tonumber(first[2])
end
