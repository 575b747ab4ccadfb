"""Request coalescing: identical requests arriving while one is generating share it.

On launch day the same question arrives fifty times before its first answer is cached.
Requests with the same exact-cache key (same team, deployment, messages and options;
deterministic) that arrive while a generation for that key is running read its chunks
instead of starting their own. Each still gets its own stream, id and usage record.

The upstream is pulled by a task of its own, not by the first caller: if that caller goes
away the others still get the whole reply. When the last reader leaves, the task is
cancelled, which cancels the worker's request, as for any abandoned request.

A request the client does not stream asks its worker for the whole reply at once
(inference/client.py), which has no first chunk before its end: a stream would wait for it
all, so a stream never joins one. Such a request joins a running stream, though, since it
waits for the end anyway; only when none runs does it start a whole reply of its own.

Scope: one gateway process (one event loop). With GATEWAY_PROCESSES=N, identical requests
spread over N processes cause at most N generations; the exact cache catches what comes
after the first finishes.

Billing: the generation is billed once, in full, to the request that started it (the
others are billed nothing). If that request leaves while others still read, its
settlement waits for the generation to end and bills all of it: leaving early cannot
make a shared generation cheaper.
"""

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

logger = logging.getLogger(__name__)
Item = tuple[str, dict[str, Any]]  # (worker url, chunk)


class SharedGeneration:
    def __init__(
        self, key: str, source: AsyncGenerator[Item, None], registry: dict[str, "SharedGeneration"]
    ) -> None:
        self.key = key
        self.items: list[Item] = []
        self.done = False
        self.completed = False  # the upstream ended normally: the reply is whole
        self.led_by = ""  # the request id of the request that started it (set by it)
        self.error: BaseException | None = None
        self.readers = 0
        self.finished = asyncio.Event()  # set once the upstream has ended, however it ended
        self._changed = asyncio.Event()
        self._registry = registry
        self._task = asyncio.get_running_loop().create_task(self._pump(source))

    async def _pump(self, source: AsyncGenerator[Item, None]) -> None:
        try:
            async with aclosing(source) as items:
                async for item in items:
                    self.items.append(item)
                    self._wake()
            self.completed = True
        except Exception as exc:  # every reader raises it, as if it had called upstream
            self.error = exc
        finally:
            self.done = True
            if self._registry.get(self.key) is self:
                del self._registry[self.key]
            self._wake()
            self.finished.set()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def read(self) -> AsyncGenerator[Item, None]:
        """Every chunk from the first, however late the reader joined."""
        self.readers += 1
        position = 0
        try:
            while True:
                while position < len(self.items):
                    yield self.items[position]
                    position += 1
                if self.done:
                    if self.error is not None:
                        raise _own_copy(self.error)
                    return
                await self._changed.wait()
        finally:
            self.readers -= 1
            if self.readers == 0 and not self.done:
                # Nobody is listening: stop the worker's request. Out of the registry now,
                # not when the task next runs: a request joining meanwhile would get the
                # stopped generation's first chunks as a whole, successful reply.
                if self._registry.get(self.key) is self:
                    del self._registry[self.key]
                self._task.cancel()


class Coalescer:
    def __init__(self) -> None:
        self._running: dict[str, SharedGeneration] = {}

    def join(
        self,
        key: str,
        start: Callable[[], AsyncGenerator[Item, None]],
        or_join: str | None = None,
    ) -> tuple[SharedGeneration, bool]:
        """The generation running for key (else for or_join), or a new one from start(),
        kept under key; True if new."""
        for wanted in (key, or_join):
            running = self._running.get(wanted) if wanted is not None else None
            if running is not None and not running.done:
                return running, False
        shared = SharedGeneration(key, start(), self._running)
        self._running[key] = shared
        return shared, True


def _own_copy(error: BaseException) -> BaseException:
    """The generation's failure as one reader's own exception: each request notes its own
    state on it (its rate-limit headers), which on one shared instance the last reader's
    overwrote for all. The shared one when it cannot be copied."""
    try:  # not copy.copy: it calls the class with the exception's args, which an
        # exception whose __init__ takes other arguments (UpstreamError) refuses
        own = type(error).__new__(type(error), *error.args)
        own.__dict__.update(error.__dict__)
    except Exception:
        return error
    own.__cause__, own.__context__ = error.__cause__, error.__context__
    return own.with_traceback(error.__traceback__)
