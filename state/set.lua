-- set.lua writes one key (after prelude.lua).
-- ARGV[7] key, ARGV[8] value, ARGV[9] '1' for compare-and-set, ARGV[10]
-- the version compared, ARGV[11] TTL in ms ('0': none), ARGV[12] most keys.
-- Returns {version, pos, epoch, existed (0/1)}, or {-1, version now, epoch}
-- for a conflict, {-2, 0, epoch} for too many keys.
expire()
ensure()
local key = ARGV[7]
local cur = redis.call('HGET', hashKey, key)
local version = 0
if cur then
  version = parse(cur)
end
if ARGV[9] == '1' and tonumber(ARGV[10]) ~= version then
  return {-1, version, epoch}
end
if not cur and redis.call('HLEN', hashKey) >= tonumber(ARGV[12]) then
  return {-2, 0, epoch}
end
local expires = 0
local ttl = tonumber(ARGV[11])
if ttl > 0 then
  expires = now + ttl
  redis.call('ZADD', ttlKey, expires, key)
else
  redis.call('ZREM', ttlKey, key)
end
version = version + 1
redis.call('HSET', hashKey, key, string.format('%d %d ', version, expires) .. ARGV[8])
add(key, ARGV[8], version, '0', expires)
touch()
local existed = 0
if cur then
  existed = 1
end
return {version, pos, epoch, existed}
