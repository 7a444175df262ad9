-- varint.lua comes before the scripts that encode a Message themselves
-- (read.lua, grow.lua, assembled.lua, open.lua): varint(n) is n as a
-- protobuf varint.
local function varint(n)
  local b = {}
  while n >= 128 do
    b[#b + 1] = string.char(n % 128 + 128)
    n = math.floor(n / 128)
  end
  b[#b + 1] = string.char(n)
  return table.concat(b)
end

