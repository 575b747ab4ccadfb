"""Records that age out for every request in flight at once are fetched once, not once per
request."""

import asyncio

import pytest

from foundation.single_flight import SingleFlight

pytestmark = pytest.mark.unit


class Fetch:
    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self.release = asyncio.Event()

    async def __call__(self) -> str:
        self.calls += 1
        await self.release.wait()
        if self.fail:
            raise ConnectionError("Redis is down")
        return f"record {self.calls}"


async def _callers(flights: SingleFlight[str], fetch: Fetch, n: int) -> list["asyncio.Task[str]"]:
    callers = [asyncio.create_task(flights.run("key", fetch)) for _ in range(n)]
    await asyncio.sleep(0)  # every caller is waiting now
    return callers


def test_concurrent_callers_share_one_fetch_and_the_next_caller_fetches_anew():
    async def scenario() -> tuple[list[str], int, str]:
        flights, fetch = SingleFlight[str](), Fetch()
        callers = await _callers(flights, fetch, 50)
        fetch.release.set()
        results = await asyncio.gather(*callers)
        return results, fetch.calls, await flights.run("key", fetch)

    results, calls, later = asyncio.run(scenario())
    assert results == ["record 1"] * 50 and calls == 1
    assert later == "record 2"  # a landed flight is not a cache


def test_a_failed_fetch_is_raised_to_every_waiter():
    async def scenario() -> list[BaseException | str]:
        flights, fetch = SingleFlight[str](), Fetch(fail=True)
        callers = await _callers(flights, fetch, 5)
        fetch.release.set()
        return await asyncio.gather(*callers, return_exceptions=True)

    results = asyncio.run(scenario())
    assert all(isinstance(r, ConnectionError) for r in results)


def test_one_caller_leaving_does_not_cancel_the_fetch_the_others_wait_for():
    async def scenario() -> tuple[list[str], int]:
        flights, fetch = SingleFlight[str](), Fetch()
        first, *others = await _callers(flights, fetch, 3)
        first.cancel()
        await asyncio.sleep(0)
        fetch.release.set()
        return await asyncio.gather(*others), fetch.calls

    results, calls = asyncio.run(scenario())
    assert results == ["record 1", "record 1"] and calls == 1


def test_different_keys_fetch_separately():
    async def scenario() -> tuple[str, str]:
        flights = SingleFlight[str]()
        a, b = Fetch(), Fetch()
        a.release.set()
        b.release.set()
        return await flights.run("a", a), await flights.run("b", b)

    assert asyncio.run(scenario()) == ("record 1", "record 1")
