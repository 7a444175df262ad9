-- snapshot.lua reads the whole state (after prelude.lua), its due
-- expiries applied first. Returns {epoch ('' for none), pos, next expiry,
-- {key, entry, key, entry, ...}}.
expire()
if not epoch then
  return {'', 0, 0, {}}
end
return {epoch, pos, nextExpiry(), redis.call('HGETALL', hashKey)}
