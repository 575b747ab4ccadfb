-- Remove one entry: its value, its index records and bytes, its vector-set element.
-- KEYS: 1-4 the namespace index (gdsf_common.lua), 5 entry key
-- Returns 1 when there was something to remove, else 0.

local entry = KEYS[5]
local meta = read_meta(entry)
if meta then
  drop(entry, meta)
  return 1
end
return redis.call('DEL', entry)
