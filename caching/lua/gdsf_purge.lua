-- Remove up to ARGV[1] expired entries of a namespace, oldest first (bytes, index
-- records, vector-set elements). eviction.purge() calls it until a call comes back short.
-- KEYS: 1-4 the namespace index (gdsf_common.lua)
-- ARGV: 1 most entries to purge in this call
-- Returns the keys of the purged entries.

return purge_expired(now_ms(), tonumber(ARGV[1]))
