-- write.lua applies a batch of session writes in one call: op i works on
-- KEYS[i]. A batch's ops run in order, each as it would alone; an op that
-- raises an error (a key of the wrong type) answers that error and the
-- others go on.
--
-- ARGV, per op in KEYS order: its code, the number n of its arguments,
-- then its n arguments.
--
--   c  create: ARGV token hash, user id, creation time (Unix ms), TTL ms.
--      Stores a new session hash with its expiry unless the id is taken.
--      1, or 0 when the key exists.
--   u  update: ARGV k, the number of field/value pairs to set, the pairs,
--      then fields to delete. Never creates a session (that would be one
--      without token or expiry). 1, or 0 when the session does not exist.
--   t  touch: ARGV TTL ms. 1, or 0 when the session does not exist.
--   r  resume: ARGV hash of the presented token, user id, TTL ms, client
--      instance ("" for no ordering), attempt (0 for no ordering), hash of
--      the new token. See below.
--
-- Returns an array with one reply per op.
--
-- resume authorizes and only then changes the session: it checks that the
-- session exists, that the token and the user match and that the attempt
-- is not stale, before any write; then it records the attempt, rotates the
-- token and refreshes the expiry. A refused resume changes nothing.
-- Rotation: the new token becomes current ('tok') and the presented one is
-- kept as 'ptok' until the new one is used, for a client that never
-- received the Welcome carrying it (see Store.Resume). The compare is on
-- SHA-256 hashes of the tokens, so its timing tells an attacker nothing
-- about a token. It answers the session hash (HGETALL, flat) after the
-- change, or an integer: 0 when the session does not exist, -1 for a stale
-- attempt, -2 for a token mismatch, -3 for another user's session.

local ops = {}

ops.c = function(key, a)
  if redis.call('EXISTS', key) == 1 then
    return 0
  end
  redis.call('HSET', key, 'tok', a[1], 'uid', a[2], 'ct', a[3])
  redis.call('PEXPIRE', key, a[4])
  return 1
end

ops.u = function(key, a)
  if redis.call('EXISTS', key) == 0 then
    return 0
  end
  local n = tonumber(a[1])
  if n > 0 then
    redis.call('HSET', key, unpack(a, 2, 2 * n + 1))
  end
  if #a > 2 * n + 1 then
    redis.call('HDEL', key, unpack(a, 2 * n + 2, #a))
  end
  return 1
end

ops.t = function(key, a)
  return redis.call('PEXPIRE', key, a[1])
end

ops.r = function(key, a)
  local cur = redis.call('HMGET', key, 'tok', 'uid', 'ai', 'an', 'ptok')
  if not cur[1] then
    return 0
  end
  if cur[1] ~= a[1] and cur[5] ~= a[1] then
    return -2
  end
  if cur[2] ~= a[2] then
    return -3
  end
  local attempt = tonumber(a[5])
  local ordered = a[4] ~= '' and attempt > 0
  if ordered and cur[3] == a[4] and tonumber(cur[4]) >= attempt then
    return -1
  end
  if ordered then
    redis.call('HSET', key, 'ai', a[4], 'an', a[5])
  end
  redis.call('HSET', key, 'tok', a[6], 'ptok', a[1])
  redis.call('PEXPIRE', key, a[3])
  return redis.call('HGETALL', key)
end

local out = {}
local p = 1
for i = 1, #KEYS do
  local op = ops[ARGV[p]]
  local n = tonumber(ARGV[p + 1])
  local a = {}
  for j = 1, n do
    a[j] = ARGV[p + 1 + j]
  end
  p = p + 2 + n
  local ok, res
  if op then
    ok, res = pcall(op, KEYS[i], a)
  else
    ok, res = false, 'unknown op'
  end
  if ok then
    out[i] = res
  elseif type(res) == 'table' and res.err then
    out[i] = res
  else
    out[i] = { err = tostring(res) }
  end
end
return out
