-- delete.lua removes one key (after prelude.lua).
-- ARGV[7] key, ARGV[8] '1' for compare-and-set, ARGV[9] the version
-- compared. Returns {1, pos, epoch} when the key was removed, {0, pos,
-- epoch} when it did not exist, {-1, version now, epoch} for a conflict.
expire()
local key = ARGV[7]
local cur = nil
if epoch then
  cur = redis.call('HGET', hashKey, key)
end
local version = 0
if cur then
  version = parse(cur)
end
if ARGV[8] == '1' and tonumber(ARGV[9]) ~= version then
  return {-1, version, epoch or ''}
end
if not cur then
  return {0, pos, epoch or ''}
end
redis.call('HDEL', hashKey, key)
redis.call('ZREM', ttlKey, key)
add(key, '', version, '1', 0)
touch()
return {1, pos, epoch}
