"""Value-aware eviction for the response caches: GreedyDual-Size-Frequency (GDSF).

Each cache namespace (e.g. "exact:team:42", "semantic:team:42") has a byte budget. TTL
alone would keep whatever arrived last; what a cached reply is worth is how often it is
asked for times what it would cost to generate again, per byte it occupies. GDSF ranks
every entry by

    H = L + freq * cost / size

and, when an admission would overflow the budget, evicts the lowest H first. L (the
namespace's "clock") is raised to the H of each victim, so new entries and fresh hits
start above everything that was merely hot long ago: yesterday's popular replies age out
instead of squatting on the budget forever. Entries also keep a hard maximum age: they
are written with EX, and expired ones stop counting once purged: up to PURGE_BATCH of
them at the start of every admission, oldest first, or all of them by purge().

Every script does bounded work, because a Lua script blocks the whole Redis while it runs
(quotas and sessions too, when the caches share it): an admission purges at most
PURGE_BATCH expired entries and evicts at most MAX_EVICTIONS. In steady state used bytes
stay within the budget, so fitting an entry evicts at most about its size divided by
ENTRY_OVERHEAD_BYTES (the smallest possible entry); only a lowered budget can need more,
and then the entry is refused and the following admissions carry on shrinking the
namespace.

cost is the regeneration cost the caller passes: micro-dollars when the deployment is
priced, else tokens; never below 1. size is the UTF-8 length of the value plus
ENTRY_OVERHEAD_BYTES.

Redis layout (CACHE_REDIS_URL), one hash tag per namespace so its index colocates:

    sluice:cache:gdsf:{<namespace>}:prio    zset  entry key -> H
    sluice:cache:gdsf:{<namespace>}:expiry  zset  entry key -> expiry (unix ms)
    sluice:cache:gdsf:{<namespace>}:meta    hash  entry key -> JSON size/freq/cost/expiry
                                                  [+ vector set and element]
    sluice:cache:gdsf:{<namespace>}:stats   hash  used (bytes), clock (L)

Entry keys (e.g. sluice:cache:exact:<sha256>) are the caller's and not hash-tagged: this
runs against one Redis server. Every change is one Lua script (lua/gdsf_*.lua, each with
lua/gdsf_common.lua prepended), so concurrent gateways never see a half-updated index.

Semantic entries name a vector-set element: the caller VADDs it before admit(), and from
then on it is removed (VREM) with the entry: on eviction, expiry, forget(), or when the
admission itself is refused. Until the next purge an expired element may still be found
by VSIM; its reply is gone, so the lookup simply misses. With element_bytes (alone, among
others) the entry is also charged what its element adds to Redis's memory, by whether the
set holds other elements when it is admitted: a vector set's own overhead is not shared
by a set of one.
"""

import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from foundation.lua import LuaScript
from foundation.redis_batch import CommandBatcher

logger = logging.getLogger(__name__)
_LUA_DIR = Path(__file__).with_name("lua")
INDEX_PREFIX = "sluice:cache:gdsf:"
# Redis bookkeeping per entry beyond its value: the key object and its expiry, a hash
# field of metadata and two sorted-set members, each repeating the ~80-byte key name.
ENTRY_OVERHEAD_BYTES = 512
# Per script call: each expired entry or victim costs about ten Redis commands, so a call
# stays well under a millisecond. MAX_EVICTIONS lets a default-sized largest entry
# (256 KiB) displace victims of the smallest size (512 bytes) in one admission.
PURGE_BATCH = 128
MAX_EVICTIONS = 512


@dataclass(frozen=True)
class Budget:
    namespace: str
    max_bytes: int


@dataclass(frozen=True)
class Admission:
    admitted: bool
    evicted: list[str]


@dataclass(frozen=True)
class NamespaceUsage:
    entries: int
    used_bytes: int
    clock: float  # L: the priority of the last entry evicted


def entry_size(value: str) -> int:
    """The bytes an entry is charged against its namespace's budget."""
    return len(value.encode()) + ENTRY_OVERHEAD_BYTES


def index_keys(namespace: str) -> list[str]:
    """The namespace's prio, expiry, meta and stats keys (KEYS[1..4] of every script)."""
    if not namespace or "{" in namespace or "}" in namespace:
        raise ValueError(f"a cache namespace must be non-empty, without braces: {namespace!r}")
    base = f"{INDEX_PREFIX}{{{namespace}}}"
    return [f"{base}:prio", f"{base}:expiry", f"{base}:meta", f"{base}:stats"]


@cache
def _script(name: str) -> LuaScript:
    return LuaScript(_LUA_DIR / "gdsf_common.lua", _LUA_DIR / f"gdsf_{name}.lua")


async def _run(client: Redis, name: str, keys: list[str], args: list[str | int]) -> Any:
    return await _script(name).run(client, keys, args)


async def admit(
    client: Redis,
    budget: Budget,
    key: str,
    value: str,
    ttl_s: int,
    cost: int,
    *,
    vector_set: str | None = None,
    element: str | None = None,
    element_bytes: tuple[int, int] | None = None,
) -> Admission:
    """Store value under key for ttl_s seconds, evicting lower-value entries to fit.

    An entry larger than the whole budget is refused and evicts nothing. An entry that
    would need more than MAX_EVICTIONS victims (the budget was lowered) is refused after
    evicting that many, and a refused replacement leaves the key empty. Re-admitting a key
    replaces the entry (its bytes are counted once; its hit count is kept).
    """
    keys, args = _admit_call(budget, key, value, ttl_s, cost, vector_set, element, element_bytes)
    return _admission(budget, await _run(client, "admit", keys, args))


def admit_in_batch(
    batch: CommandBatcher,
    budget: Budget,
    key: str,
    value: str,
    ttl_s: int,
    cost: int,
    *,
    vector_set: str | None = None,
    element: str | None = None,
    element_bytes: tuple[int, int] | None = None,
) -> Coroutine[Any, Any, Admission]:
    """admit(), its script already in this event-loop turn's batch when this returns (so
    commands submitted next run after it, in the same round trip); await the Admission."""
    keys, args = _admit_call(budget, key, value, ttl_s, cost, vector_set, element, element_bytes)
    return _admitted(budget, _script("admit").submitted(batch, keys, args))


async def _admitted(budget: Budget, reply: Coroutine[Any, Any, Any]) -> Admission:
    return _admission(budget, await reply)


def _admit_call(
    budget: Budget,
    key: str,
    value: str,
    ttl_s: int,
    cost: int,
    vector_set: str | None,
    element: str | None,
    element_bytes: tuple[int, int] | None = None,
) -> tuple[list[str], list[str | int]]:
    if ttl_s < 1:
        raise ValueError("ttl_s must be at least 1 second")
    if (vector_set is None) != (element is None):
        raise ValueError("vector_set and element go together")
    keys = [*index_keys(budget.namespace), key]
    args: list[str | int] = [
        value,
        entry_size(value),
        ttl_s,
        max(1, cost),
        budget.max_bytes,
        PURGE_BATCH,
        MAX_EVICTIONS,
    ]
    if vector_set is not None and element is not None:
        keys.append(vector_set)
        args.append(element)
        if element_bytes is not None:
            args.extend(element_bytes)
    return keys, args


def _admission(budget: Budget, reply: Any) -> Admission:
    admitted, evicted = reply
    if evicted:
        logger.debug("evicted %d entries from cache namespace %s", len(evicted), budget.namespace)
    return Admission(admitted=bool(admitted), evicted=list(evicted))


async def record_hit(client: Redis, budget_namespace: str, key: str) -> None:
    """Count a hit on key: its frequency and priority rise (no-op once it is gone)."""
    await _run(client, "hit", [*index_keys(budget_namespace), key], [])


def hit_command(budget_namespace: str, key: str) -> tuple[str | int, ...]:
    """record_hit as one raw command for the caller's batch (the hot path's single round
    trip after a cache hit). By SHA, not EVAL: EVAL would send and hash 3 KB of script on
    every hit. After a Redis restart the reply is NOSCRIPT; the caller then calls
    record_hit, which loads the script."""
    keys = [*index_keys(budget_namespace), key]
    return ("EVALSHA", _script("hit").sha, len(keys), *keys)


async def forget(client: Redis, namespace: str, key: str) -> bool:
    """Remove one entry (e.g. a reported false hit): value, bytes and vector element."""
    return bool(await _run(client, "forget", [*index_keys(namespace), key], []))


async def purge(client: Redis, namespace: str, batch: int = PURGE_BATCH) -> list[str]:
    """Remove the namespace's expired entries now, `batch` per script call (so Redis
    serves others between calls); returns their keys."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    purged: list[str] = []
    while True:
        removed: list[str] = await _run(client, "purge", index_keys(namespace), [batch])
        purged.extend(removed)
        if len(removed) < batch:  # the backlog is done (what expires later waits its turn)
            return purged


async def purge_every_namespace(client: Redis) -> int:
    """purge() each namespace with an index in this Redis; how many entries went.

    An admission purges its own namespace's expired entries, but a namespace that stops
    storing (its team gone quiet, its cache turned off, the team deleted) would keep the
    index records of its expired entries for good: they have no TTL, so volatile-lru never
    frees them, and the budget's byte count would keep them too. A periodic task
    (caching/tasks.py) calls this."""
    purged = 0
    pattern = f"{INDEX_PREFIX}{{*}}:expiry"
    async for raw in client.scan_iter(match=pattern, count=1000):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        namespace = key[len(INDEX_PREFIX) + 1 : -len("}:expiry")]
        purged += len(await purge(client, namespace))
    return purged


async def usage(client: Redis, namespace: str) -> NamespaceUsage:
    """Entries, bytes in use and clock (L) of a namespace, read in one transaction."""
    prio, _, _, stats = index_keys(namespace)
    async with client.pipeline(transaction=True) as pipe:
        pipe.zcard(prio)
        pipe.hmget(stats, ["used", "clock"])
        entries, (used, clock) = await pipe.execute()
    return NamespaceUsage(entries=int(entries), used_bytes=int(used or 0), clock=float(clock or 0))
