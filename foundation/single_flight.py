"""Concurrent callers that need the same record share one fetch.

The per-process copies of keys, quota limits, cache policies, the deployment catalog and
the fleet snapshot all expire together for every request in flight: without this, 64
concurrent requests each re-read the same record the moment it ages out (a burst of 64
Redis or database reads where one does). Flights are per event loop, since a future
belongs to the loop that made it.
"""

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class SingleFlight(Generic[V]):
    def __init__(self) -> None:
        self._flights: dict[tuple[int, Hashable], asyncio.Task[V]] = {}

    async def run(self, key: Hashable, fetch: Callable[[], Awaitable[V]]) -> V:
        """fetch()'s result, shared with every caller asking for `key` meanwhile. One
        caller giving up (cancelled) does not cancel the fetch the others wait for."""
        loop = asyncio.get_running_loop()
        ident = (id(loop), key)
        flight = self._flights.get(ident)
        if flight is None:
            flight = loop.create_task(_awaited(fetch))
            self._flights[ident] = flight
            flight.add_done_callback(lambda done: self._landed(ident, done))
        return await asyncio.shield(flight)

    def _landed(self, ident: tuple[int, Hashable], flight: "asyncio.Task[V]") -> None:
        if self._flights.get(ident) is flight:
            del self._flights[ident]
        if not flight.cancelled():
            flight.exception()  # retrieved: every waiter that is left gets it raised


async def _awaited(fetch: Callable[[], Awaitable[V]]) -> V:
    return await fetch()
