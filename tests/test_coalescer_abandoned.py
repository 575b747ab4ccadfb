"""The coalescer in process: a generation whose last reader left is stopped, and a request
arriving in the same moment starts its own rather than joining it."""

import asyncio
from collections.abc import AsyncGenerator

import pytest

from caching.coalesce import Coalescer, Item
from inference.client import UpstreamError

pytestmark = pytest.mark.unit


def test_a_request_arriving_as_the_last_reader_leaves_starts_its_own_generation():
    """Before, the stopped generation stayed joinable until its task next ran, and the
    newcomer read its first chunk as a whole, successful reply."""
    started: list[str] = []

    def source(name: str) -> AsyncGenerator[Item, None]:
        async def items() -> AsyncGenerator[Item, None]:
            started.append(name)
            yield "http://worker", {"text": f"{name}: first"}
            await asyncio.Event().wait()  # the rest never comes before the reader leaves
            yield "http://worker", {"text": "never"}

        return items()

    async def scenario() -> tuple[bool, bool]:
        coalescer = Coalescer()
        first, leader = coalescer.join("key", lambda: source("first"))
        reading = first.read()
        await anext(reading)
        await reading.aclose()  # the only reader leaves: the generation is being stopped
        second, second_leads = coalescer.join("key", lambda: source("second"))  # same turn
        await anext(second.read())
        return leader, second_leads and second is not first

    assert asyncio.run(scenario()) == (True, True)
    assert started == ["first", "second"]


def test_readers_of_a_failed_generation_each_raise_their_own_exception():
    """Each request notes its own rate-limit state on the exception it raises: one shared
    instance carried the last reader's headers to every reader."""

    async def failing() -> AsyncGenerator[Item, None]:
        await asyncio.sleep(0)
        raise UpstreamError("the worker went away", "http://worker", before_first_token=True)
        yield "http://worker", {}  # an async generator  # pragma: no cover

    async def read_all(reading: AsyncGenerator[Item, None]) -> UpstreamError:
        try:
            async for _ in reading:
                pass
        except UpstreamError as exc:
            return exc
        raise AssertionError("no error")

    async def scenario() -> list[UpstreamError]:
        shared, _ = Coalescer().join("key", failing)
        return list(await asyncio.gather(read_all(shared.read()), read_all(shared.read())))

    first, second = asyncio.run(scenario())
    assert first is not second  # UpstreamError's own __init__ did not stop the copy
    for error in (first, second):
        assert str(error) == "the worker went away"
        assert (error.worker_url, error.before_first_token) == ("http://worker", True)
