"""What the caches send after a request, in round trips to the real bundled Redis 8: a
generated reply is kept in both caches (exact entry, vector-set element, semantic entry,
the note of who answered) in one pipeline, and a hit is counted in one
(caching/responses.py, docs/benchmarks.md "The hot path")."""

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
import redis

from caching import cache_plan, responses
from caching.cache_plan import CachePlan, EntryRef
from caching.exact import CachedReply
from caching.outcome import Outcome
from caching.policy import default_settings
from caching.semantic_keys import SemanticSlot
from foundation import redis_clients
from tests.test_redis_batch import CountingBatcher

pytestmark = pytest.mark.live
TEAM = 7
REPLY = CachedReply("Paris.", "stop", 12, 2)


def _plan(name: str) -> CachePlan:
    vector = np.zeros(384, dtype=np.float32)
    vector[len(name) % 384] = 1.0
    slot = SemanticSlot.of(f"context-{name}", f"What is the capital of {name}?", vector=vector)
    key = f"sluice:cache:exact:{name}"
    own = (
        EntryRef(cache_plan.namespace("exact", TEAM), key),
        EntryRef(cache_plan.namespace("semantic", TEAM), slot.entry_key),
    )
    return CachePlan(
        Outcome.MISS, own=own, key=key, slot=slot, store_exact=True, policy=default_settings()
    )


def _pipelines_for(step: Callable[[], Awaitable[Any]]) -> int:
    """How many pipelines the cache Redis batch sends while `step` runs."""

    async def main() -> int:
        counting = CountingBatcher(redis_clients.async_cache_redis())
        redis_clients._cache_batchers[asyncio.get_running_loop()] = counting
        try:
            await step()
            return counting.pipelines
        finally:
            await redis_clients.async_cache_redis().aclose()

    return asyncio.run(main())


def test_a_reply_is_kept_in_both_caches_in_one_round_trip(redis_url):
    # A first reply loads the scripts (a fresh Redis answers NOSCRIPT once).
    _pipelines_for(lambda: responses.keep(_plan("France"), REPLY, 0, "chatcmpl-a", TEAM))
    plan = _plan("Italy")

    pipelines = _pipelines_for(lambda: responses.keep(plan, REPLY, 0, "chatcmpl-b", TEAM))

    assert pipelines == 1
    cache = redis.Redis.from_url(redis_url, decode_responses=True)
    assert plan.key is not None and plan.slot is not None
    assert json.loads(cache.get(plan.key) or "{}")["content"] == "Paris."
    assert json.loads(cache.get(plan.slot.entry_key) or "{}")["question"] == plan.slot.question
    assert cache.execute_command("VISMEMBER", plan.slot.set_key, plan.slot.element) == 1
    assert 0 < cache.ttl(plan.slot.set_key) <= default_settings().semantic_ttl_s
    served = json.loads(cache.get(responses.SERVED_PREFIX + "chatcmpl-b") or "{}")
    assert served["team"] == TEAM and len(served["entries"]) == 2


def test_a_hit_is_counted_in_one_round_trip(redis_url):
    plan = _plan("Spain")
    _pipelines_for(lambda: responses.keep(plan, REPLY, 0, "chatcmpl-c", TEAM))
    assert plan.key is not None
    hit = CachePlan(Outcome.HIT_EXACT, REPLY, plan.own[0], plan.own)

    pipelines = _pipelines_for(
        lambda: responses.settle_submitted(hit, "chatcmpl-d", TEAM, Outcome.HIT_EXACT, 14, 0)
    )

    assert pipelines == 1
    cache = redis.Redis.from_url(redis_url, decode_responses=True)
    assert cache.hget(f"sluice:cache:stats:{TEAM}", Outcome.HIT_EXACT) == "1"
    meta = cache.hget(f"sluice:cache:gdsf:{{exact:{TEAM}}}:meta", plan.key)
    assert meta is not None and json.loads(meta)["f"] == 2
    assert cache.exists(responses.SERVED_PREFIX + "chatcmpl-d") == 1
