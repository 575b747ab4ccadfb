"""The coalescer in process: a generation whose last reader left is stopped, and a request
arriving in the same moment starts its own rather than joining it."""

import asyncio
from collections.abc import AsyncGenerator

import pytest

from caching.coalesce import Coalescer, Item

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
