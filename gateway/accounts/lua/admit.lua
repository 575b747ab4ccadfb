-- Reserve one request against every counter of a team at once, or against none.
-- Runs atomically inside Redis, so any number of gateway processes on any number of
-- machines share one exact view. Time comes from Redis (TIME), not from callers' clocks.
--
-- KEYS: 1 team requests/min hash, 2 team tokens/min hash, 3 team tokens this month,
--       4 team cost this month (micro-USD), 5 key requests/min hash
-- ARGV: 1 tokens to reserve, 2 cost to reserve, 3..7 limits in KEYS order (-1 = none),
--       8 month counter TTL (s), 9 epoch second when the next calendar month starts
-- Minute counters are hashes of {epoch second -> amount}; a second older than 60 s
-- no longer counts, which makes "per minute" a sliding window of one-second buckets.
-- Returns {1, bucket second, remaining requests, remaining tokens, requests reset ms,
--          tokens reset ms} or {0, limit name, retry after ms (-1: never), ...same}.

local WINDOW = 60
local clock = redis.call('TIME')
local now_s = tonumber(clock[1])
local now = now_s + tonumber(clock[2]) / 1000000

local tokens = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local month_ttl = tonumber(ARGV[8])
local next_month = tonumber(ARGV[9])
local names = {'requests_per_minute', 'tokens_per_minute', 'tokens_per_month',
               'budget_per_month', 'key_requests_per_minute'}
local amounts = {1, tokens, tokens, cost, 1}
local is_window = {true, true, false, false, true}

local function read_window(key)
  local flat = redis.call('HGETALL', key)
  local used, buckets = 0, {}
  for i = 1, #flat, 2 do
    local second, amount = tonumber(flat[i]), tonumber(flat[i + 1])
    if second <= now_s - WINDOW then
      redis.call('HDEL', key, flat[i])
    else
      used = used + amount
      buckets[#buckets + 1] = {second, amount}
    end
  end
  table.sort(buckets, function(a, b) return a[1] < b[1] end)
  return used, buckets
end

-- Seconds until enough of the window has aged out to free `excess`.
local function wait_for_window(buckets, excess)
  local freed = 0
  for _, bucket in ipairs(buckets) do
    freed = freed + bucket[2]
    if freed >= excess then return bucket[1] + WINDOW - now end
  end
  return WINDOW
end

local used, waits, buckets = {}, {}, {}
local blocked, blocked_wait = nil, 0
for i = 1, 5 do
  local limit = tonumber(ARGV[2 + i])
  if is_window[i] then
    used[i], buckets[i] = read_window(KEYS[i])
  else
    used[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  end
  if limit >= 0 and used[i] + amounts[i] > limit then
    local wait
    if amounts[i] > limit then
      wait = -1
    elseif is_window[i] then
      wait = wait_for_window(buckets[i], used[i] + amounts[i] - limit)
    else
      wait = next_month - now
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

local function remaining(i, admitted)
  local limit = tonumber(ARGV[2 + i])
  if limit < 0 or used[i] == nil then return -1 end
  local after = used[i] + (admitted and amounts[i] or 0)
  return math.max(limit - after, 0)
end

local function reset_ms(i, admitted)
  local first = buckets[i] and buckets[i][1]
  if first then return math.floor((first[1] + WINDOW - now) * 1000) end
  if admitted then return WINDOW * 1000 end
  return 0
end

if blocked ~= nil then
  local wait_ms = blocked_wait < 0 and -1 or math.ceil(blocked_wait * 1000)
  return {0, blocked, wait_ms, remaining(1, false), remaining(2, false),
          reset_ms(1, false), reset_ms(2, false)}
end

for i = 1, 5 do
  if is_window[i] then
    redis.call('HINCRBY', KEYS[i], now_s, amounts[i])
    redis.call('EXPIRE', KEYS[i], WINDOW + 1)
  else
    redis.call('INCRBY', KEYS[i], amounts[i])
    redis.call('EXPIRE', KEYS[i], month_ttl)
  end
end
return {1, now_s, remaining(1, true), remaining(2, true), reset_ms(1, true), reset_ms(2, true)}
