-- expire.lua applies the due expiries (after prelude.lua) and returns the
-- next deadline in ms (0: none).
expire()
return nextExpiry()
