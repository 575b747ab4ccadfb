-- Remove every expired entry of a namespace (bytes, index records, vector-set elements).
-- KEYS: 1-4 the namespace index (gdsf_common.lua)
-- Returns the keys of the purged entries.

return purge_expired(now_ms())
