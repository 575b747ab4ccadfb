"""Work that outlives the request that started it: a bill running beside a reply already
sent, a usage event queued again after a Redis outage, the reservation of a caller that
hung up mid-admission given back. asyncio keeps only weak references to tasks, so each is
held here until done; a failure is logged (nothing else reads its outcome, its request
gone); and the last moment on an event loop (a server's shutdown, a batch run's end) waits
for them with `finish`, so none is cut off unsaid.
"""

import asyncio
import logging
from collections.abc import Awaitable

logger = logging.getLogger(__name__)
_held: set["asyncio.Task[None]"] = set()


def hold(work: Awaitable[None]) -> "asyncio.Task[None]":
    """Run `work` as a task held until done."""
    task = asyncio.ensure_future(work)
    _held.add(task)
    task.add_done_callback(_held.discard)
    task.add_done_callback(_log_if_failed)
    return task


def pending() -> set["asyncio.Task[None]"]:
    """The held tasks of the running event loop still running (not another loop's: a
    test's or a batch run's loop ends while the server's lives on)."""
    loop = asyncio.get_running_loop()
    return {task for task in _held if task.get_loop() is loop and not task.done()}


async def finish(timeout_s: float) -> None:
    """Wait for this loop's held tasks; those still running after timeout_s are cancelled
    (each says what it loses in its own cancellation)."""
    waiting = pending()
    if not waiting:
        return
    logger.info("waiting for %d background task(s) still running", len(waiting))
    _, late = await asyncio.wait(waiting, timeout=timeout_s)
    for task in late:
        task.cancel()
    if late:
        await asyncio.wait(late)


def _log_if_failed(task: "asyncio.Task[None]") -> None:
    if not task.cancelled() and (failure := task.exception()) is not None:
        logger.error("background work failed", exc_info=failure)
