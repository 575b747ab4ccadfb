import asyncio
import time

import pytest

from inference.batcher import MicroBatcher


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
