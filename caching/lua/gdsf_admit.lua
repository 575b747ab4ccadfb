-- Admit one entry under a namespace's byte budget, evicting the lowest-priority entries.
-- KEYS: 1-4 the namespace index (gdsf_common.lua), 5 entry key, 6 vector set (optional)
-- ARGV: 1 value, 2 size (bytes), 3 ttl (s), 4 cost (>= 1), 5 budget (bytes),
--       6 most expired entries to purge, 7 most entries to evict,
--       8 vector-set element (with KEYS[6]), 9 and 10 (optional, with it) the bytes the
--       element adds to Redis's memory alone in its set and among others, charged on top
-- Returns {1, {evicted keys}}; {0, {}} when the entry alone exceeds the budget; or
-- {0, {evicted keys}} when fitting it needs more than ARGV[7] evictions (after the budget
-- was lowered, say): the entry is refused, and later admissions carry on evicting.
--
-- The caller VADDs the element before admitting: from here on the element belongs to the
-- entry, and is removed with it (eviction, expiry, forget, or this admission failing).

local entry, vset = KEYS[5], KEYS[6]
local value, element = ARGV[1], ARGV[8]
local size, ttl_s = tonumber(ARGV[2]), tonumber(ARGV[3])
local cost, budget = tonumber(ARGV[4]), tonumber(ARGV[5])
local purge_limit, evict_limit = tonumber(ARGV[6]), tonumber(ARGV[7])
local now = now_ms()
if vset and ARGV[9] then  -- the caller VADDed it: a set of one is a set of its own
  local alone = redis.call('VCARD', vset) <= 1
  -- at most the budget: a budget under one entry's full charge still keeps one entry
  local charged = size + tonumber(alone and ARGV[9] or ARGV[10])
  size = math.min(charged, math.max(size, budget))
end

purge_expired(now, purge_limit, entry)  -- this entry expired: replaced below, not purged
local old = read_meta(entry)
local same_element = old ~= nil and vset ~= nil and old.v == vset and old.e == element

if size > budget then
  if not same_element then vrem(vset, element) end
  return {0, {}}
end

local freq = 1
if old then  -- a replacement: keep its popularity, give back its bytes
  freq = old.f
  unindex(entry, old)
  if not same_element then vrem(old.v, old.e) end
end

local used = tonumber(redis.call('HGET', idx.stats, 'used')) or 0
local clock = tonumber(redis.call('HGET', idx.stats, 'clock')) or 0
local evicted = {}
while used + size > budget and #evicted < evict_limit do
  local lowest = redis.call('ZRANGE', idx.prio, 0, 0, 'WITHSCORES')
  if #lowest == 0 then  -- nothing left to evict: the byte count had drifted
    redis.call('HSET', idx.stats, 'used', 0)
    used = 0
    break
  end
  local victim = lowest[1]
  clock = math.max(clock, tonumber(lowest[2]))  -- ageing: L rises to each victim's H
  local meta = read_meta(victim)
  if meta then
    used = used - drop(victim, meta)
  else
    redis.call('ZREM', idx.prio, victim)
    redis.call('ZREM', idx.expiry, victim)
  end
  evicted[#evicted + 1] = victim
end
redis.call('HSET', idx.stats, 'clock', fmt(clock))

if used + size > budget then  -- the eviction bound was reached: refuse the entry
  -- A replaced entry's index records are gone already: drop its value too, and the
  -- element (the caller's, or the old entry's when it is the same) goes with it.
  if old then redis.call('DEL', entry) end
  vrem(vset, element)
  return {0, evicted}
end

local expires = now + ttl_s * 1000
local record = {s = size, f = freq, c = cost, x = expires}
if vset then record.v, record.e = vset, element end
redis.call('SET', entry, value, 'EX', ttl_s)
redis.call('HSET', idx.meta, entry, cjson.encode(record))
redis.call('ZADD', idx.prio, fmt(clock + freq * cost / size), entry)
redis.call('ZADD', idx.expiry, fmt(expires), entry)
redis.call('HINCRBY', idx.stats, 'used', size)
return {1, evicted}
