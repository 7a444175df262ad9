-- since.lua reads the changes after a position (after prelude.lua), due
-- expiries applied first. ARGV[7] the reader's epoch, ARGV[8] its
-- position, ARGV[9] a bound in bytes on the changes returned (0: none;
-- a change counts its key, its value and 32: state.ChangeSize). The empty epoch at
-- position 0 is the empty state before the first write: it continues into
-- any epoch from position 1. The log is read 64 entries at a time, so a
-- bounded read never holds more than the bound and a batch.
-- Returns {0, epoch, pos, entries}, {-1, epoch, pos} (too old) or
-- {-2, epoch, pos} (more than the bound).
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
local budget = tonumber(ARGV[9])
local left = tonumber(maxChanges)
local entries, size, start = {}, 0, first .. '-0'
while left > 0 do
  local batch = redis.call('XRANGE', logKey, start, '+', 'COUNT', math.min(64, left))
  if #batch == 0 then
    break
  end
  if #entries == 0 and batch[1][1] ~= first .. '-0' then
    return {-1, e, pos}
  end
  for _, en in ipairs(batch) do
    if budget > 0 then
      size = size + 32
      local f = en[2]
      for i = 1, #f, 2 do
        if f[i] == 'k' or f[i] == 'v' then
          size = size + #f[i + 1]
        end
      end
      if size > budget then
        return {-2, e, pos}
      end
    end
    entries[#entries + 1] = en
  end
  left = left - #batch
  start = '(' .. batch[#batch][1]
end
if #entries == 0 then
  return {-1, e, pos}
end
return {0, e, pos, entries}
