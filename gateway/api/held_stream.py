"""A stream held for a replica: keep its connection alive with SSE comments.

A request for a deployment scaled to zero waits in the dispatch queue while a replica
wakes or starts, up to SCALE_FROM_ZERO_TIMEOUT_S (two minutes by default: a cold vLLM
start). A stream would send nothing all that time, and proxies cut idle connections (nginx
after 60 s unless told otherwise). So when the pipeline says a stream is held
(`open_completion`'s on_hold), the adapter answers at once with the event stream's headers
and an SSE comment (`: waiting for a replica`), one every SSE_KEEPALIVE_S, then the chunks
once the replica answers. Clients ignore comments (OpenAI's SDKs do). What changes: the
status is 200 before the outcome is known, so a request that finds no replica in time gets
its `no_replica_ready` error as an error event in the stream, not a 503 with Retry-After,
and the rate-limit and cache headers are not sent (they are known only later).

Only while some deployment scales from zero, and only for requests whose body mentions
"stream" (a bytes search), is the pipeline opened as a task of its own (a task, a future
and a loop turn or two more per request); every other request keeps the direct path. A
coalesced follower of a held stream gets no keep-alives (it waits on the leader's
generation, not on the dispatcher), and a held stream is counted as a 200 in
`sluice_requests_total` whatever it ends with.
"""

import asyncio
import logging
import weakref
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from caching.exact import CacheDirectives
from gateway.drain import drain
from gateway.drain_asgi import restarting
from gateway.serving.admission import Credential
from gateway.serving.completion import Completion
from gateway.serving.errors import DOMAIN_ERRORS, ApiError, api_error
from gateway.serving.pipeline import open_completion
from inference.chat_request import ChatRequest

logger = logging.getLogger(__name__)
KEEPALIVE = b": waiting for a replica\n\n"
STREAM_MARK = b'"stream"'


@dataclass
class Held:
    """A stream held for a replica: the pipeline still opening it, and for which deployment.
    claimed: its events have started (from then on they own the opening)."""

    opening: "asyncio.Task[Completion]"
    deployment: str
    claimed: bool = False

    def abandon_if_unclaimed(self) -> None:
        """The events were dropped without ever starting (the client left as the headers
        went out): stop the opening, or settle the completion it ended with."""
        if not self.claimed:
            _release(self.opening)


async def open_or_hold(
    caller: Credential,
    read: Callable[[], ChatRequest],
    directives: CacheDirectives,
    request_id: str,
) -> Completion | Held:
    """open_completion, or Held as soon as a stream is held for a replica. Raises what
    open_completion raises when it ends first."""
    parsed: list[ChatRequest] = []
    held: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def reading() -> ChatRequest:
        chat = read()
        parsed.append(chat)
        return chat

    def on_hold(deployment: str) -> None:
        if not held.done() and parsed and parsed[0].stream:
            held.set_result(deployment)

    opening = asyncio.ensure_future(
        open_completion(caller, reading, directives, request_id, on_hold)
    )
    try:
        either: list[asyncio.Future[Any]] = [opening, held]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        _release(opening)  # the client left: nothing is left open for it
        raise
    if opening.done():
        held.cancel()
        return opening.result()
    return Held(opening, held.result())


def held_response_events(
    held: Held, relay: Callable[[Completion], AsyncGenerator[bytes, None]]
) -> AsyncGenerator[bytes, None]:
    """held_events, with the opening released if the events are dropped unstarted."""
    events = held_events(held, relay)
    finalizer = weakref.finalize(events, held.abandon_if_unclaimed)
    finalizer.atexit = False  # type: ignore[misc]  # a settable property, typeshed says slot
    return events


async def held_events(
    held: Held, relay: Callable[[Completion], AsyncGenerator[bytes, None]]
) -> AsyncGenerator[bytes, None]:
    """Keep-alive comments until the pipeline has opened the completion, then its events
    (relay); an error event if it failed. A client gone, or a draining gateway, while held
    cancels the opening (which settles what it admitted); a completion opened but never
    relayed is settled here."""
    held.claimed = True
    try:
        yield KEEPALIVE
        while not (await asyncio.wait([held.opening], timeout=settings.SSE_KEEPALIVE_S))[0]:
            if drain.stopping_streams:
                yield restarting().sse_chunk()
                return
            yield KEEPALIVE
        try:
            run = held.opening.result()
        except DOMAIN_ERRORS as exc:
            yield api_error(exc).sse_chunk()
            return
        except Exception:
            logger.exception("a held stream failed before its first chunk")
            yield ApiError(500, "The gateway failed on this request.", "internal_error").sse_chunk()
            return
        async with aclosing(relay(run)) as events:
            async for event in events:
                yield event
    finally:
        _release(held.opening)


def _release(opening: "asyncio.Task[Completion]") -> None:
    """Cancel an opening still running (its pipeline settles what it admitted); settle the
    completion a finished one holds (settle is once only: a relayed one is not settled
    twice); retrieve a failure (the pipeline settled that request)."""
    if not opening.done():
        opening.cancel()
    elif not opening.cancelled() and opening.exception() is None:
        try:
            task = asyncio.get_running_loop().create_task(opening.result().settle())
        except RuntimeError:  # no loop: the process is exiting
            return
        _settling.add(task)
        task.add_done_callback(_settled)


_settling: set["asyncio.Task[None]"] = set()


def _settled(task: "asyncio.Task[None]") -> None:
    _settling.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("a held stream's settlement failed", exc_info=task.exception())
