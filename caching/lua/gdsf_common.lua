-- GreedyDual-Size-Frequency bookkeeping shared by the gdsf_*.lua scripts: eviction.py
-- prepends this file to each of them before loading it.
--
-- Every script gets the index keys of one namespace first (one hash tag, one cluster slot):
--   KEYS[1] prio    sorted set  entry key -> priority H = L + freq * cost / size
--   KEYS[2] expiry  sorted set  entry key -> expiry, unix ms (the entry's EX)
--   KEYS[3] meta    hash        entry key -> JSON {s size, f freq, c cost, x expiry ms,
--                                                  v vector set, e element (both optional)}
--   KEYS[4] stats   hash        used -> bytes of indexed entries, clock -> L
-- Entry keys and vector sets of victims are read from `meta`, not declared: this runs on
-- one Redis server (not a cluster), where scripts may touch undeclared keys.

local idx = {prio = KEYS[1], expiry = KEYS[2], meta = KEYS[3], stats = KEYS[4]}

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function fmt(number)  -- full double precision for scores and the clock
  return string.format('%.17g', number)
end

local function read_meta(entry)
  local raw = redis.call('HGET', idx.meta, entry)
  if not raw then return nil end
  return cjson.decode(raw)
end

local function vrem(vset, element)
  -- pcall: a missing or mistyped vector set must not abort a half-done script
  if vset then redis.pcall('VREM', vset, element) end
end

-- Drop an entry from the index and give back its bytes; returns its size.
local function unindex(entry, meta)
  redis.call('ZREM', idx.prio, entry)
  redis.call('ZREM', idx.expiry, entry)
  redis.call('HDEL', idx.meta, entry)
  redis.call('HINCRBY', idx.stats, 'used', -meta.s)
  return meta.s
end

-- Remove an entry entirely: index, value and vector-set element.
local function drop(entry, meta)
  unindex(entry, meta)
  redis.call('DEL', entry)
  vrem(meta.v, meta.e)
  return meta.s
end

-- Remove up to `limit` entries whose expiry has passed, oldest first; returns their keys.
-- Bounded so that no script does work proportional to a namespace's backlog (a script
-- blocks the whole Redis while it runs): each call removes at most `limit`, and the next
-- admission or purge() call continues where it stopped. `keep` (optional): an entry being
-- admitted again, left to its admission (purging it would remove the vector element its
-- caller has just added, as the expired entry's own).
local function purge_expired(now, limit, keep)
  local expired = redis.call('ZRANGE', idx.expiry, '-inf', now, 'BYSCORE', 'LIMIT', 0, limit)
  for _, entry in ipairs(expired) do
    local meta = read_meta(entry)
    if entry == keep then
      -- left to the admission that replaces it
    elseif meta then
      drop(entry, meta)
    else  -- half-indexed (should not happen): just forget it
      redis.call('ZREM', idx.expiry, entry)
      redis.call('ZREM', idx.prio, entry)
    end
  end
  return expired
end
