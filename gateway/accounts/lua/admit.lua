-- Reserve one request against every counter of a team at once, or against none.
-- Runs atomically inside Redis, so any number of gateway processes on any number of
-- machines share one exact view. Time comes from Redis (TIME), not from callers' clocks.
--
-- KEYS: 1 team requests/min hash, 2 team tokens/min hash, 3 team tokens this month,
--       4 team cost this month (micro-USD), 5 key requests/min hash
-- ARGV: 1 tokens to reserve, 2 cost to reserve, 3..7 limits in KEYS order (-1 = none),
--       8 month counter TTL (s), 9 epoch second when the next calendar month starts
-- Returns {1, bucket second, remaining requests, remaining tokens, requests reset ms,
--          tokens reset ms} or {0, limit name, retry after ms (-1: never), ...same}.
--
-- Minute counters are sliding windows of one-second buckets: a hash of
-- {epoch second -> amount} plus `sum` (the buckets still in the window), `from` (the
-- oldest second not yet aged out) and `last` (the newest write). Each call ages only the
-- seconds that left the window since the previous call, so it costs a few field reads,
-- not a scan of sixty buckets. This script runs on every request: keep redis.call few.

local WINDOW = 60
local clock = redis.call('TIME')
local now_s = tonumber(clock[1])
local now = now_s + tonumber(clock[2]) / 1000000
local cutoff = now_s - WINDOW + 1

local tokens, cost = tonumber(ARGV[1]), tonumber(ARGV[2])
local names = {'requests_per_minute', 'tokens_per_minute', 'tokens_per_month',
               'budget_per_month', 'key_requests_per_minute'}
local amounts = {1, tokens, tokens, cost, 1}
local is_window = {true, true, false, false, true}
local limits = {}
for i = 1, 5 do limits[i] = tonumber(ARGV[2 + i]) end
-- Team minute windows always count (usage and headers need them); the rest only when
-- there is a limit to enforce or something to add.
local active = {true, true, limits[3] >= 0 or tokens > 0, limits[4] >= 0 or cost > 0,
                limits[5] >= 0}

local function read_window(key)
  local state = redis.call('HMGET', key, 'sum', 'from')
  local used = tonumber(state[1]) or 0
  local from = tonumber(state[2])
  if from == nil then return used, true end
  -- Bound the ageing loop. `from` is never older than the cutoff of the key's last write,
  -- and the key outlives that write by WINDOW + 1 s, so it can lag this cutoff by WINDOW
  -- + 1 seconds, not WINDOW: clamping at WINDOW once skipped that second's bucket, which
  -- then stayed in `sum` for as long as the team kept writing.
  if from < cutoff - WINDOW - 1 then from = cutoff - WINDOW - 1 end
  if from < cutoff then
    for second = from, cutoff - 1 do
      local amount = redis.call('HGET', key, second)
      if amount then
        used = used - tonumber(amount)
        redis.call('HDEL', key, second)
      end
    end
    redis.call('HSET', key, 'sum', used, 'from', cutoff)
  end
  return used, false
end

-- Seconds until enough of a window has aged out to free `excess` (rejections only).
local function wait_for_window(key, excess)
  local flat = redis.call('HGETALL', key)
  local buckets = {}
  for i = 1, #flat, 2 do
    local second = tonumber(flat[i])
    if second then buckets[#buckets + 1] = {second, tonumber(flat[i + 1])} end
  end
  table.sort(buckets, function(a, b) return a[1] < b[1] end)
  local freed = 0
  for _, bucket in ipairs(buckets) do
    freed = freed + bucket[2]
    if freed >= excess then return bucket[1] + WINDOW - now end
  end
  return WINDOW
end

local used, fresh = {}, {}
local blocked, blocked_wait = nil, 0
for i = 1, 5 do
  if active[i] and (is_window[i] or limits[i] >= 0) then
    if is_window[i] then
      used[i], fresh[i] = read_window(KEYS[i])
    else
      used[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
    end
    local limit = limits[i]
    if limit >= 0 and used[i] + amounts[i] > limit then
      local wait
      if amounts[i] > limit then
        wait = -1
      elseif is_window[i] then
        wait = wait_for_window(KEYS[i], used[i] + amounts[i] - limit)
      else
        wait = tonumber(ARGV[9]) - now
      end
      if wait < 0 then
        blocked, blocked_wait = names[i], -1
        break
      end
      if blocked == nil or wait > blocked_wait then
        blocked, blocked_wait = names[i], wait
      end
    end
  end
end

local function remaining(i, admitted)
  if limits[i] < 0 or used[i] == nil then return -1 end
  return math.max(limits[i] - used[i] - (admitted and amounts[i] or 0), 0)
end

-- Milliseconds until the window is empty again (OpenAI's x-ratelimit-reset-* meaning).
local function reset_ms(i)
  local last = tonumber(redis.call('HGET', KEYS[i], 'last'))
  if last == nil or last + WINDOW <= now then return 0 end
  return math.floor((last + WINDOW - now) * 1000)
end

if blocked ~= nil then
  local wait_ms = blocked_wait < 0 and -1 or math.ceil(blocked_wait * 1000)
  return {0, blocked, wait_ms, remaining(1, false), remaining(2, false), reset_ms(1), reset_ms(2)}
end

for i = 1, 5 do
  if active[i] then
    if is_window[i] then
      redis.call('HINCRBY', KEYS[i], now_s, amounts[i])
      if fresh[i] then
        redis.call('HSET', KEYS[i], 'sum', amounts[i], 'last', now_s, 'from', cutoff)
      else
        redis.call('HSET', KEYS[i], 'sum', used[i] + amounts[i], 'last', now_s)
      end
      redis.call('EXPIRE', KEYS[i], WINDOW + 1)
    elseif redis.call('INCRBY', KEYS[i], amounts[i]) == amounts[i] then
      redis.call('EXPIRE', KEYS[i], tonumber(ARGV[8]))
    end
  end
end
return {1, now_s, remaining(1, true), remaining(2, true), WINDOW * 1000, WINDOW * 1000}
