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

Only requests whose body mentions "stream" take this path (a bytes search): opening the
pipeline as a task of its own costs a few microseconds, which the other requests keep.
"""

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from caching.exact import CacheDirectives
from gateway.serving.admission import Credential
from gateway.serving.completion import Completion
from gateway.serving.errors import DOMAIN_ERRORS, api_error
from gateway.serving.pipeline import open_completion
from inference.chat_request import ChatRequest

KEEPALIVE = b": waiting for a replica\n\n"
STREAM_MARK = b'"stream"'


@dataclass
class Held:
    """A stream held for a replica: the pipeline still opening it, and for which deployment.
    claimed: its events have started; until then, a completion the opening ends with is
    settled by the opening itself (a response never iterated must not leave it open)."""

    opening: "asyncio.Task[Completion]"
    deployment: str
    claimed: bool = False

    def settle_if_unclaimed(self, opening: "asyncio.Task[Completion]") -> None:
        if opening.cancelled() or opening.exception() is not None or self.claimed:
            return  # an exception is retrieved here (the pipeline settled that request)
        task = asyncio.get_running_loop().create_task(opening.result().settle())
        _unclaimed.add(task)
        task.add_done_callback(_unclaimed.discard)


_unclaimed: set["asyncio.Task[None]"] = set()


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
        opening.cancel()  # the client left: the pipeline settles what it admitted
        raise
    if opening.done():
        held.cancel()
        return opening.result()
    kept = Held(opening, held.result())
    opening.add_done_callback(kept.settle_if_unclaimed)
    return kept


async def held_events(
    held: Held, relay: Callable[[Completion], AsyncGenerator[bytes, None]]
) -> AsyncGenerator[bytes, None]:
    """Keep-alive comments until the pipeline has opened the completion, then its events
    (relay); an error event if it failed. A client gone while held cancels the opening."""
    held.claimed = True
    try:
        yield KEEPALIVE
        while not (await asyncio.wait([held.opening], timeout=settings.SSE_KEEPALIVE_S))[0]:
            yield KEEPALIVE
    finally:
        if not held.opening.done():
            held.opening.cancel()
    try:
        run = held.opening.result()
    except DOMAIN_ERRORS as exc:
        yield api_error(exc).sse_chunk()
        return
    async for event in relay(run):
        yield event
