-- since.lua reads the changes after a position (after prelude.lua), due
-- expiries applied first. ARGV[7] the reader's epoch, ARGV[8] its
-- position. The empty epoch at position 0 is the empty state before the
-- first write: it continues into any epoch from position 1.
-- Returns {0, epoch, pos, entries} or {-1, epoch, pos} (too old).
expire()
local e = epoch or ''
local from = tonumber(ARGV[8])
if (ARGV[7] ~= e and not (ARGV[7] == '' and from == 0)) or from > pos then
  return {-1, e, pos}
end
if from == pos then
  return {0, e, pos, {}}
end
local first = string.format('%d', from + 1)
local entries = redis.call('XRANGE', logKey, first .. '-0', '+', 'COUNT', maxChanges)
if #entries == 0 or entries[1][1] ~= first .. '-0' then
  return {-1, e, pos}
end
return {0, e, pos, entries}
