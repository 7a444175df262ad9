-- list.lua reads a room's presence at one version.
--
-- KEYS[1] members hash, KEYS[2] states hash, KEYS[3] version counter,
-- KEYS[4] infos hash
--
-- Returns {version, {user, connections, ...}, {user, state, ...},
-- {user, info, ...}}.

return {
  tonumber(redis.call('GET', KEYS[3]) or '0'),
  redis.call('HGETALL', KEYS[1]),
  redis.call('HGETALL', KEYS[2]),
  redis.call('HGETALL', KEYS[4]),
}
