import asyncio
import time

import pytest

from inference.batcher import MicroBatcher
from tests.waiting import async_wait_until

pytestmark = pytest.mark.unit


def test_concurrent_items_run_as_batches_of_at_most_the_max_size():
    sizes: list[int] = []

    async def double(items: list[int]) -> list[int]:
        sizes.append(len(items))
        return [i * 2 for i in items]

    async def scenario():
        batcher = MicroBatcher(double, max_batch_size=8, max_wait_ms=50)
        return await asyncio.gather(*(batcher.submit(i) for i in range(20)))

    assert asyncio.run(scenario()) == [i * 2 for i in range(20)]
    assert sizes == [8, 8, 4]


def test_a_lone_item_waits_no_longer_than_max_wait():
    async def scenario():
        batcher: MicroBatcher[str, str] = MicroBatcher(
            lambda items: asyncio.sleep(0, items), max_wait_ms=20
        )
        started = time.monotonic()
        await batcher.submit("x")
        return time.monotonic() - started

    assert 0.015 <= asyncio.run(scenario()) < 0.2


def test_a_failing_batch_fails_every_caller_in_it():
    async def explode(items: list[int]) -> list[int]:
        raise ValueError("model crashed")

    async def scenario():
        batcher = MicroBatcher(explode, max_batch_size=4, max_wait_ms=5)
        return await asyncio.gather(*(batcher.submit(i) for i in range(3)), return_exceptions=True)

    results = asyncio.run(scenario())
    assert all(isinstance(r, ValueError) for r in results)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError):
        MicroBatcher(lambda items: asyncio.sleep(0, items), max_batch_size=0)


def test_with_max_in_flight_a_busy_batcher_gathers_arrivals_into_the_next_batch():
    sizes: list[int] = []
    running = 0
    most_running = 0

    async def slow_double(items: list[int]) -> list[int]:
        nonlocal running, most_running
        sizes.append(len(items))
        running += 1
        most_running = max(most_running, running)
        await asyncio.sleep(0.02)  # the model's work: the batch stays in flight meanwhile
        running -= 1
        return [i * 2 for i in items]

    async def scenario():
        batcher = MicroBatcher(slow_double, max_batch_size=32, max_wait_ms=0, max_in_flight=1)
        first = asyncio.ensure_future(batcher.submit(0))
        await async_wait_until(lambda: sizes == [1], 1, "the lone first item to run", poll_s=0.001)
        rest = [asyncio.ensure_future(batcher.submit(i)) for i in range(1, 11)]
        return await asyncio.gather(first, *rest)

    assert asyncio.run(scenario()) == [i * 2 for i in range(11)]
    assert sizes == [1, 10]
    assert most_running == 1


def test_an_idle_batcher_with_no_wait_runs_a_lone_item_at_once():
    async def scenario():
        batcher: MicroBatcher[str, str] = MicroBatcher(
            lambda items: asyncio.sleep(0, items), max_wait_ms=0, max_in_flight=1
        )
        started = time.monotonic()
        await batcher.submit("x")
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 0.005
