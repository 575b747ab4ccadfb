"""A generic async micro-batcher for work that batches statically (embeddings, rerankers).

Callers submit one item and await one result; items that arrive within max_wait_ms of the
first (or until max_batch_size) run as one call. Under load batches fill instantly; when
idle a lone item waits at most max_wait_ms.

With max_in_flight, at most that many batches run at once and items arriving meanwhile
gather into the next batch, which starts as soon as one finishes. That lets a latency-bound
caller use max_wait_ms=0: an idle batcher runs a lone item at once, a busy one batches.
"""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class MicroBatcher(Generic[Item, Result]):
    def __init__(
        self,
        process: Callable[[list[Item]], Awaitable[Sequence[Result]]],
        max_batch_size: int = 32,
        max_wait_ms: float = 2.0,
        max_in_flight: int | None = None,
    ) -> None:
        if max_batch_size < 1 or max_wait_ms < 0 or (max_in_flight or 1) < 1:
            raise ValueError("max_batch_size and max_in_flight must be >= 1, max_wait_ms >= 0")
        self.process = process
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_ms / 1000
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._flush_timer: asyncio.TimerHandle | None = None
        self.max_in_flight = max_in_flight
        self._in_flight = 0
        self.batches_run = 0

    async def submit(self, item: Item) -> Result:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self.max_batch_size:
            self._flush()
        elif self._flush_timer is None:
            self._flush_timer = loop.call_later(self.max_wait_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self.max_in_flight is not None and self._in_flight >= self.max_in_flight:
            return  # the batch that finishes next flushes what gathered meanwhile
        size = self.max_batch_size
        batch, self._pending = self._pending[:size], self._pending[size:]
        if self._pending:
            self._flush_timer = asyncio.get_running_loop().call_later(self.max_wait_s, self._flush)
        if batch:
            self._in_flight += 1
            asyncio.get_running_loop().create_task(self._run(batch))

    async def _run(self, batch: list[tuple[Item, "asyncio.Future[Result]"]]) -> None:
        self.batches_run += 1
        try:
            await self._run_batch(batch)
        finally:
            self._in_flight -= 1
            if self._pending and self._flush_timer is None:
                self._flush()

    async def _run_batch(self, batch: list[tuple[Item, "asyncio.Future[Result]"]]) -> None:
        try:
            results = await self.process([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"batch of {len(batch)} gave {len(results)} results")
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
