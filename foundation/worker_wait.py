"""The moments a request has handed its work to a worker, when bookkeeping may run.

A request's own CPU work comes in two bursts: from its arrival to the call to its worker,
and from the worker's answer to the reply's write. In between it waits for the worker (a
20 ms upstream in the gwbench harness, hundreds of ms for a real model). Work that nothing
is waiting for (the last reply's settlement: its billing, the caches' store; a lookup's
sample) costs the same CPU whenever it runs, but on a busy core it adds to the latency of
whatever burst it lands in: done at once after a reply, it meets the next request of a
client that asks again at once (an agent's loop, a batch script). Done when a request has
just called its worker, it uses time that request spends waiting anyway.

`waiting_on_worker()` is called by the worker client after it has written a request;
`at_next_moment(callback)` runs a callback at the next such moment of the running event
loop, or DEADLINE_S after the first callback waiting for it at the latest (a process that
gets no next request, or serves only cache hits). One list and one timer per loop, however
many callbacks wait.
"""

import asyncio
import weakref
from collections.abc import Callable

DEADLINE_S = 0.01


class _Moment:
    """The callbacks waiting on one event loop, and their deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.callbacks: list[Callable[[], None]] = []
        self.deadline = loop.call_later(DEADLINE_S, self.arrive)

    def arrive(self) -> None:
        self.deadline.cancel()
        callbacks, self.callbacks = self.callbacks, []
        for callback in callbacks:
            callback()


_moments: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Moment]" = (
    weakref.WeakKeyDictionary()
)


def at_next_moment(callback: Callable[[], None]) -> None:
    """Run callback (once) at the end of the event-loop turn in which a request of the
    running loop next calls its worker, DEADLINE_S from the first waiting at the latest."""
    loop = asyncio.get_running_loop()
    moment = _moments.get(loop)
    if moment is None or not moment.callbacks:
        moment = _moments[loop] = _Moment(loop)
    moment.callbacks.append(callback)


def waiting_on_worker() -> None:
    """A request's call is on its way to its worker: run what waited for this moment, after
    the write (call_soon), so the worker has the request first."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    moment = _moments.pop(loop, None)
    if moment is not None and moment.callbacks:
        loop.call_soon(moment.arrive)
    elif moment is not None:
        moment.deadline.cancel()
