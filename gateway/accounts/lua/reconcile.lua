-- Settle a reservation to what the request really used: return unused tokens and cost,
-- or charge extra when the real count exceeded the estimate.
-- KEYS: 1 team tokens/min hash, 2 team tokens this month, 3 team cost this month,
--       4 the reservation's settled marker
-- ARGV: 1 the reservation's bucket second, 2 token delta, 3 cost delta (both signed),
--       4 the marker's lifetime in seconds
-- Applied once per reservation: a second run (the client timed out on the first, which
-- Redis ran anyway, and settlement retried) finds the marker and changes nothing, so
-- unused tokens are never given back twice.
-- A minute bucket that has already aged out of the window is not touched: it no longer
-- counts, and the window's running `sum` (see admit.lua) no longer includes it.

if not redis.call('SET', KEYS[4], '1', 'NX', 'EX', ARGV[4]) then return 0 end
local token_delta = tonumber(ARGV[2])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], token_delta)
  redis.call('HINCRBY', KEYS[1], 'sum', token_delta)
end
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('INCRBY', KEYS[2], token_delta) end
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('INCRBY', KEYS[3], ARGV[3]) end
return 1
