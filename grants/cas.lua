-- Compare-and-set of one user's grants, announced in the same step.
-- KEYS[1]: the user's grants key.
-- ARGV[1]: the value read before (empty: none), ARGV[2]: the new value
-- (empty: delete), ARGV[3]: the channel, ARGV[4]: the user.
-- Returns 1 when set, 0 when the value changed meanwhile (read again).
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '' end
if cur ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
