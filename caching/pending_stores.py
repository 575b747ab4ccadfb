"""Replies whose cache writes are still to come, for lookups made before they are sent.

A non-streamed reply is settled after it has gone out, at the next moment a request of
the process has called its worker, or a few ms later (gateway/serving/settlement.py,
AfterReply): only then are its entries, its note of who answered and its counts sent to
the cache Redis. A lookup of what such a settlement writes (the same request asked again
at once: its exact key; a question in the same context: its vector set; a false-hit
report: its note) must not miss it: before the reply goes, settlement registers the keys
it will write, and a lookup of any of them asks that settlement to go now (`want`) and
waits until its commands are in the batch (`queued`), ahead of the lookup's own on the
same connection. So a client asking again right after a reply, to this process, finds
the reply kept, as if it had been stored before the reply; lookups of other keys do not
wait.
"""

import asyncio
import weakref
from collections.abc import Callable


class PendingStore:
    """One reply's cache writes, registered under the keys they write until answered."""

    def __init__(self, keys: tuple[str, ...], registry: "dict[str, list[PendingStore]]") -> None:
        self.keys = keys
        self.when_wanted: Callable[[], None] | None = None  # AfterReply's: settle now
        self._queued = False
        self._waiting: list[asyncio.Future[None]] = []  # lookups, until queued
        self._registry = registry
        for key in keys:
            registry.setdefault(key, []).append(self)

    def want(self) -> None:
        if self.when_wanted is not None:
            self.when_wanted()

    async def queued(self) -> None:
        if not self._queued:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            await waiter

    def in_batch(self) -> None:
        """Its commands are in the batch (or it writes nothing after all)."""
        self._queued = True
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if not waiter.done():
                waiter.set_result(None)

    def done(self) -> None:
        """Answered, or failed: lookups no longer wait for it."""
        self.in_batch()
        for key in self.keys:
            stores = self._registry.get(key, [])
            if self in stores:
                stores.remove(self)
            if not stores:
                self._registry.pop(key, None)


# Per event loop: a batch and its connection belong to one loop.
_pending: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, list[PendingStore]]]" = (
    weakref.WeakKeyDictionary()
)


def _registry() -> dict[str, list[PendingStore]]:
    loop = asyncio.get_running_loop()
    registry = _pending.get(loop)
    if registry is None:
        registry = _pending[loop] = {}
    return registry


def register(*keys: str) -> PendingStore:
    """Writes to come under keys (the exact key, the context's vector set, the note)."""
    return PendingStore(keys, _registry())


async def wait_for_stores_of(*keys: str) -> None:
    """Until the writes registered so far under any of keys are in the batch (commands the
    caller submits next go after them)."""
    registry = _registry()
    stores = {id(store): store for key in keys for store in registry.get(key, ())}
    for store in stores.values():
        store.want()
    for store in stores.values():
        await store.queued()
