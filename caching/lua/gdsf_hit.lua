-- Count a cache hit: freq += 1 and H = L + freq * cost / size with the current L.
-- KEYS: 1-4 the namespace index (gdsf_common.lua), 5 entry key
-- Returns 1, or 0 (nothing done) when the entry is not indexed or has expired.

local entry = KEYS[5]
local meta = read_meta(entry)
if not meta or meta.x <= now_ms() then return 0 end
meta.f = meta.f + 1
local clock = tonumber(redis.call('HGET', idx.stats, 'clock')) or 0
redis.call('HSET', idx.meta, entry, cjson.encode(meta))
redis.call('ZADD', idx.prio, fmt(clock + meta.f * meta.c / meta.s), entry)
return 1
