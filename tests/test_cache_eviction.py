"""GDSF eviction of the response caches, against the real bundled Redis 8."""

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from caching import eviction
from caching.eviction import (
    ENTRY_OVERHEAD_BYTES,
    Admission,
    Budget,
    admit,
    entry_size,
    forget,
    index_keys,
    purge,
    purge_every_namespace,
    record_hit,
    usage,
)
from caching.tasks import purge_expired_cache_entries

pytestmark = pytest.mark.live
VSET = "sluice:cache:semantic:vectors:team:1"
VECTORS = {"el-a": (0.1, 0.2, 0.3), "el-b": (0.9, 0.1, 0.0), "el-c": (0.0, 0.5, 0.5)}

Scenario = Callable[[aioredis.Redis], Awaitable[Any]]


def run(redis_url: str, scenario: Scenario) -> Any:
    async def main() -> Any:
        client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        try:
            return await scenario(client)
        finally:
            await client.aclose()

    return asyncio.run(main())


def value_of(size: int) -> str:
    """A value charged exactly `size` bytes (overhead included)."""
    return "x" * (size - ENTRY_OVERHEAD_BYTES)


async def vadd(client: aioredis.Redis, element: str) -> None:
    await client.execute_command("VADD", VSET, "VALUES", 3, *VECTORS[element], element)


async def similar(client: aioredis.Redis) -> set[str]:
    if not await client.exists(VSET):
        return set()
    found = await client.execute_command("VSIM", VSET, "VALUES", 3, 0.3, 0.3, 0.3, "COUNT", 10)
    return set(found)


async def live(client: aioredis.Redis, keys: list[str]) -> set[str]:
    return {key for key in keys if await client.exists(key)}


def test_high_value_entries_survive_a_tight_budget(redis_url):
    budget = Budget("exact:team:1", 4000)  # four 1000-byte entries

    async def scenario(client: aioredis.Redis) -> tuple[Admission, Admission, set[str]]:
        await admit(client, budget, "popular", value_of(1000), 60, cost=100)  # H 0.1 -> 0.6
        await admit(client, budget, "expensive", value_of(1000), 60, cost=1000)  # H 1.0
        await admit(client, budget, "cheap", value_of(1000), 60, cost=10)  # H 0.01
        for _ in range(5):
            await record_hit(client, budget.namespace, "popular")
        # 2000 bytes: only "cheap" (lowest H) has to go; L becomes 0.01
        large = await admit(client, budget, "large", value_of(2000), 60, cost=100)
        await record_hit(client, budget.namespace, "large")  # H 0.01 + 2 * 100 / 2000 = 0.11
        # "large" is now the lowest (0.11 < 0.6 < 1.0): evicted, although it is the newest
        fresh = await admit(client, budget, "fresh", value_of(1000), 60, cost=500)
        return large, fresh, await live(client, ["popular", "expensive", "cheap", "large", "fresh"])

    large, fresh, remaining = run(redis_url, scenario)
    assert large == Admission(admitted=True, evicted=["cheap"])
    assert fresh == Admission(admitted=True, evicted=["large"])
    assert remaining == {"popular", "expensive", "fresh"}
    stats = run(redis_url, lambda client: usage(client, budget.namespace))
    assert (stats.entries, stats.used_bytes) == (3, 3000)
    assert abs(stats.clock - 0.11) < 1e-9


def test_used_bytes_never_exceed_the_budget(redis_url):
    rng = random.Random(20240501)
    budget = Budget("exact:team:2", 20_000)
    keys = [f"k{i}" for i in range(40)]

    async def scenario(client: aioredis.Redis) -> int:
        model: dict[str, int] = {}  # key -> size, as the index should have it
        admitted = 0
        for _ in range(300):
            key, value = rng.choice(keys), "v" * rng.randrange(0, 25_000)
            result = await admit(client, budget, key, value, 60, cost=rng.randrange(0, 1000))
            for victim in result.evicted:
                model.pop(victim)
            if result.admitted:
                model[key] = entry_size(value)
                admitted += 1
            else:
                assert entry_size(value) > budget.max_bytes and result.evicted == []
            if rng.random() < 0.5:
                await record_hit(client, budget.namespace, rng.choice(keys))
            stats = await usage(client, budget.namespace)
            assert stats.used_bytes == sum(model.values()) <= budget.max_bytes
            assert stats.entries == len(model)
        assert await live(client, keys) == set(model)
        return admitted

    assert run(redis_url, scenario) > 100


def test_an_entry_hot_long_ago_is_eventually_aged_out(redis_url):
    budget = Budget("exact:team:3", 3000)

    async def scenario(client: aioredis.Redis) -> tuple[int, float]:
        await admit(client, budget, "hot", value_of(1000), 60, cost=100)
        for _ in range(50):
            await record_hit(client, budget.namespace, "hot")  # H = 51 * 100 / 1000 = 5.1
        for i in range(200):  # each newcomer alone is worth 0.1: far less than "hot"
            result = await admit(client, budget, f"new{i}", value_of(1000), 60, cost=100)
            if "hot" in result.evicted:
                return i, (await usage(client, budget.namespace)).clock
        raise AssertionError("the once-hot entry was never evicted")

    newcomers, clock = run(redis_url, scenario)
    assert newcomers > 20  # it was valuable: it outlived many newcomers
    assert clock >= 5.1  # L rose past its priority


def test_an_entry_larger_than_the_budget_is_refused_and_evicts_nothing(redis_url):
    budget = Budget("semantic:team:4", 2000)

    async def scenario(client: aioredis.Redis) -> tuple[Admission, set[str], set[str], int]:
        await admit(client, budget, "small", value_of(1000), 60, cost=1)
        await vadd(client, "el-b")
        huge = await admit(
            client, budget, "huge", value_of(2001), 60, cost=10**9, vector_set=VSET, element="el-b"
        )
        stats = await usage(client, budget.namespace)
        return huge, await live(client, ["small", "huge"]), await similar(client), stats.used_bytes

    huge, remaining, elements, used = run(redis_url, scenario)
    assert huge == Admission(admitted=False, evicted=[])
    assert remaining == {"small"}
    assert used == 1000
    assert elements == set()  # the refused entry's element does not outlive it


def test_expired_entries_stop_counting_and_lose_their_vector_element(redis_url):
    budget = Budget("semantic:team:5", 10_000)

    async def scenario(client: aioredis.Redis) -> None:
        for element, ttl_s in (("el-a", 1), ("el-b", 60)):
            await vadd(client, element)
            await admit(
                client,
                budget,
                f"entry-{element}",
                value_of(1000),
                ttl_s,
                cost=5,
                vector_set=VSET,
                element=element,
            )
        await admit(client, budget, "exact-short", value_of(2000), 1, cost=5)
        assert await client.execute_command("VCARD", VSET) == 2
        await asyncio.sleep(1.1)  # the 1 s TTLs run out: expiry is what is tested
        assert sorted(await purge(client, budget.namespace)) == ["entry-el-a", "exact-short"]
        stats = await usage(client, budget.namespace)
        assert (stats.entries, stats.used_bytes) == (1, 1000)
        assert await client.execute_command("VCARD", VSET) == 1
        assert await similar(client) == {"el-b"}

    run(redis_url, scenario)


def test_the_periodic_purge_empties_namespaces_that_stopped_storing(redis_url):
    """An admission purges only its own namespace: the periodic task purges them all, so
    a team that stops storing keeps no index records (or bytes) of expired entries."""
    quiet, busy = Budget("exact:quiet-team", 10_000), Budget("exact:busy-team", 10_000)

    async def scenario(client: aioredis.Redis) -> tuple[int, list[int], int]:
        for n in range(3):
            await admit(client, quiet, f"quiet-{n}", value_of(1000), 1, cost=5)
        await admit(client, busy, "busy-short", value_of(1000), 1, cost=5)
        await admit(client, busy, "busy-long", value_of(1000), 60, cost=5)
        await asyncio.sleep(1.1)  # the 1 s TTLs run out: expiry is what is tested
        purged = await purge_every_namespace(client)
        left = [(await usage(client, b.namespace)).entries for b in (quiet, busy)]
        meta = await client.hlen(index_keys(quiet.namespace)[2])
        return purged, left, meta

    assert run(redis_url, scenario) == (4, [0, 1], 0)


def test_the_beat_task_purges_the_cache_redis_and_says_how_much(redis_url, settings):
    assert settings.CELERY_BEAT_SCHEDULE["purge-expired-cache-entries"]["task"] == (
        purge_expired_cache_entries.name
    )
    quiet = Budget("semantic:quiet-team", 10_000)

    async def stored(client: aioredis.Redis) -> None:
        await admit(client, quiet, "quiet-0", value_of(1000), 1, cost=5)
        await asyncio.sleep(1.1)  # the 1 s TTL runs out: expiry is what is tested

    run(redis_url, stored)
    assert purge_expired_cache_entries() == 1
    assert purge_expired_cache_entries() == 0


def test_an_admission_purges_expired_entries_first(redis_url):
    budget = Budget("semantic:team:6", 2000)

    async def scenario(client: aioredis.Redis) -> None:
        await vadd(client, "el-a")
        await admit(
            client, budget, "short", value_of(2000), 1, cost=10**6, vector_set=VSET, element="el-a"
        )
        await asyncio.sleep(1.1)  # the 1 s TTL runs out: expiry is what is tested
        # fits because the expired entry no longer counts: nothing is *evicted*
        result = await admit(client, budget, "next", value_of(2000), 60, cost=1)
        assert result == Admission(admitted=True, evicted=[])
        stats = await usage(client, budget.namespace)
        assert (stats.entries, stats.used_bytes) == (1, 2000)
        assert await similar(client) == set()

    run(redis_url, scenario)


def test_a_question_stored_again_after_its_entry_expired_keeps_its_vector_element(redis_url):
    """The store adds the element, then admits the entry: the admission's purge of the
    expired old copy removed the element just added, leaving an entry no search finds."""
    budget = Budget("semantic:team:8", 10_000)

    async def scenario(client: aioredis.Redis) -> None:
        async def store(ttl_s: int) -> Admission:
            await vadd(client, "el-a")
            return await admit(
                client,
                budget,
                "entry-el-a",
                value_of(1000),
                ttl_s,
                cost=5,
                vector_set=VSET,
                element="el-a",
            )

        await store(1)
        await asyncio.sleep(1.1)  # expired, not yet purged: nothing else was admitted
        assert (await store(60)).admitted
        assert await similar(client) == {"el-a"}
        stats = await usage(client, budget.namespace)
        assert (stats.entries, stats.used_bytes) == (1, 1000)

    run(redis_url, scenario)


def test_evicting_a_semantic_entry_removes_its_vector_element(redis_url):
    budget = Budget("semantic:team:7", 2000)

    async def scenario(client: aioredis.Redis) -> None:
        for element, cost in (("el-a", 1), ("el-b", 1000)):
            await vadd(client, element)
            await admit(
                client,
                budget,
                f"entry-{element}",
                value_of(1000),
                60,
                cost=cost,
                vector_set=VSET,
                element=element,
            )
        result = await admit(client, budget, "entry-c", value_of(1000), 60, cost=500)
        assert result == Admission(admitted=True, evicted=["entry-el-a"])
        assert await similar(client) == {"el-b"}
        remaining = await live(client, ["entry-el-a", "entry-el-b", "entry-c"])
        assert remaining == {"entry-el-b", "entry-c"}

    run(redis_url, scenario)


def test_forget_removes_the_entry_its_bytes_and_its_element(redis_url):
    budget = Budget("semantic:team:8", 10_000)

    async def scenario(client: aioredis.Redis) -> None:
        await vadd(client, "el-a")
        await admit(
            client, budget, "wrong", value_of(1500), 60, cost=7, vector_set=VSET, element="el-a"
        )
        await admit(client, budget, "right", value_of(1000), 60, cost=7)
        assert await forget(client, budget.namespace, "wrong") is True
        assert not await client.exists("wrong")
        stats = await usage(client, budget.namespace)
        assert (stats.entries, stats.used_bytes) == (1, 1000)
        assert await similar(client) == set()
        assert await forget(client, budget.namespace, "wrong") is False
        await record_hit(client, budget.namespace, "wrong")  # gone: a no-op
        assert (await usage(client, budget.namespace)).entries == 1

    run(redis_url, scenario)


def test_readmitting_a_key_replaces_it_without_double_counting(redis_url):
    budget = Budget("semantic:team:9", 10_000)

    async def scenario(client: aioredis.Redis) -> None:
        await vadd(client, "el-a")
        for size in (3000, 1200):
            result = await admit(
                client, budget, "same", value_of(size), 60, cost=3, vector_set=VSET, element="el-a"
            )
            assert result == Admission(admitted=True, evicted=[])
        stats = await usage(client, budget.namespace)
        assert (stats.entries, stats.used_bytes) == (1, 1200)
        assert await client.get("same") == value_of(1200)
        assert await similar(client) == {"el-a"}  # its own element is kept

    run(redis_url, scenario)


def test_expired_entries_are_purged_a_bounded_batch_per_call(redis_url, monkeypatch):
    batch = 16  # the real PURGE_BATCH, scaled down so the backlog is written in milliseconds
    monkeypatch.setattr(eviction, "PURGE_BATCH", batch)
    budget = Budget("exact:team:10", 10**9)
    backlog = 10 * batch

    async def scenario(client: aioredis.Redis) -> None:
        for i in range(backlog):
            # zero-padded: entries expiring in the same millisecond are purged in key order
            await admit(client, budget, f"old{i:03}", value_of(1000 + i), 1, cost=1)
        assert (await usage(client, budget.namespace)).entries == backlog  # none expired yet
        await asyncio.sleep(1.1)  # the 1 s TTLs run out: expiry is what is tested

        # One admission purges one batch, the oldest first, and counts their bytes out.
        await admit(client, budget, "new", value_of(700), 60, cost=1)
        stats = await usage(client, budget.namespace)
        assert stats.entries == backlog - batch + 1
        assert stats.used_bytes == sum(range(1000 + batch, 1000 + backlog)) + 700

        # purge() calls the script until the backlog is gone, a batch at a time.
        purged = await purge(client, budget.namespace)
        assert purged == [f"old{i:03}" for i in range(batch, backlog)]
        stats = await usage(client, budget.namespace)
        assert (stats.entries, stats.used_bytes) == (1, 700)
        assert await live(client, [f"old{i:03}" for i in range(backlog)] + ["new"]) == {"new"}

    run(redis_url, scenario)


def test_a_lowered_budget_is_reached_over_several_bounded_admissions(redis_url, monkeypatch):
    monkeypatch.setattr(eviction, "MAX_EVICTIONS", 8)
    budget = Budget("semantic:team:11", 40_000)
    shrunk = Budget(budget.namespace, 3000)

    async def scenario(client: aioredis.Redis) -> None:
        for i in range(40):
            await admit(client, budget, f"e{i}", value_of(1000), 60, cost=1)
        await admit(client, budget, "same", value_of(1000), 60, cost=1)  # evicts one

        # 41 entries over a 3000-byte budget: each admission evicts at most 8 and is refused
        # while the namespace is still too full, a refused replacement leaving no value behind.
        await vadd(client, "el-a")
        first = await admit(
            client, shrunk, "same", value_of(1000), 60, cost=1, vector_set=VSET, element="el-a"
        )
        assert first.admitted is False and len(first.evicted) == 8
        assert not await client.exists("same")
        assert await similar(client) == set()
        stats = await usage(client, budget.namespace)
        assert (stats.entries, stats.used_bytes) == (31, 31_000)

        results = [
            await admit(client, shrunk, f"n{i}", value_of(1000), 60, cost=1) for i in range(5)
        ]
        assert [r.admitted for r in results] == [False, False, False, True, True]
        assert all(len(r.evicted) <= 8 for r in results)
        stats = await usage(client, budget.namespace)
        assert stats.used_bytes == 1000 * stats.entries <= shrunk.max_bytes

    run(redis_url, scenario)


def test_a_semantic_entry_is_charged_its_vector_element_alone_or_among_others(redis_url):
    """A vector set's own overhead is not shared by a set of one: the first element of a
    set is charged the larger figure, a later one the smaller, each given back with it."""
    budget = Budget("semantic:team:12", 100_000)
    charges = (3000, 900)

    async def scenario(client: aioredis.Redis) -> list[int]:
        used = []
        for element in ("el-a", "el-b"):
            await vadd(client, element)
            await admit(
                client,
                budget,
                f"entry-{element}",
                value_of(1000),
                60,
                cost=1,
                vector_set=VSET,
                element=element,
                element_bytes=charges,
            )
            used.append((await usage(client, budget.namespace)).used_bytes)
        await forget(client, budget.namespace, "entry-el-a")
        used.append((await usage(client, budget.namespace)).used_bytes)
        return used

    assert run(redis_url, scenario) == [4000, 4000 + 1900, 1900]


def test_a_budget_under_one_entrys_full_charge_still_keeps_one_entry(redis_url):
    budget = Budget("semantic:team:13", 2000)

    async def scenario(client: aioredis.Redis) -> tuple[Admission, int]:
        await vadd(client, "el-a")
        result = await admit(
            client,
            budget,
            "entry-el-a",
            value_of(1000),
            60,
            cost=1,
            vector_set=VSET,
            element="el-a",
            element_bytes=(3000, 900),
        )
        return result, (await usage(client, budget.namespace)).used_bytes

    assert run(redis_url, scenario) == (Admission(admitted=True, evicted=[]), 2000)
