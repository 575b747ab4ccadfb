"""The API handler's stream sender: a stream's events generator is entered before anything
is sent, so a send that fails or is cancelled at the headers (a client that reads nothing,
a server shutting down) still closes it, and closing it is what settles the request (the
generator's `async with run`, gateway/api/views.py)."""

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from django.http import HttpRequest

from gateway.api.common import EventStream, LastEvent
from gateway.api_handler import ApiHandler
from gateway.serving.settlement import AfterReply

pytestmark = pytest.mark.unit


def test_a_stream_whose_headers_cannot_be_sent_is_still_closed():
    entered: list[str] = []
    closed: list[str] = []

    async def events() -> AsyncGenerator[bytes, None]:
        entered.append("run")  # where _sse enters `async with run`
        try:
            yield b"data: first\n\n"
            yield b"data: second\n\n"
        finally:
            closed.append("run")  # where leaving `async with run` settles the request

    async def cancelled_at_the_headers(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            raise asyncio.CancelledError  # uvicorn's shutdown cancelling a blocked write

    async def scenario() -> None:
        with pytest.raises(asyncio.CancelledError):
            await ApiHandler()._send_events(EventStream(events()), cancelled_at_the_headers)

    asyncio.run(scenario())
    assert entered == ["run"] and closed == ["run"]


def test_a_stream_sends_its_headers_then_every_event_in_order():
    sent: list[dict[str, Any]] = []

    async def events() -> AsyncGenerator[bytes, None]:
        yield b"data: first\n\n"
        yield b"data: second\n\n"

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(ApiHandler()._send_events(EventStream(events()), send))
    assert [m["type"] for m in sent] == ["http.response.start", *["http.response.body"] * 3]
    assert [m.get("body") for m in sent[1:]] == [b"data: first\n\n", b"data: second\n\n", None]


def test_a_last_event_ends_the_response_before_the_stream_is_closed():
    """The settlement a stream's closing runs does not hold back the end of its body."""
    order: list[str] = []

    async def events() -> AsyncGenerator[bytes, None]:
        try:
            yield b"data: first\n\n"
            yield LastEvent(b"data: [DONE]\n\n")
            order.append("an event after the last")  # never asked for
        finally:
            order.append("closed")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            order.append(f"{message.get('body')!r} more={message.get('more_body', False)}")

    asyncio.run(ApiHandler()._send_events(EventStream(events()), send))
    assert order == [
        "b'data: first\\n\\n' more=True",
        "b'data: [DONE]\\n\\n' more=False",
        "closed",
    ]


class _Responder(ApiHandler):
    """The handler with a view of the test's own in place of Django's request cycle."""

    def __init__(self, view: Any) -> None:
        super().__init__()
        self.view = view

    async def _respond(self, request: HttpRequest, send: Any, after_sent: list[AfterReply]) -> None:
        await self.view(after_sent)


def _respond(view: Any, client_leaves_after_s: float) -> Any:
    async def receive() -> dict[str, Any]:
        await asyncio.sleep(client_leaves_after_s)
        return {"type": "http.disconnect"}

    request = HttpRequest()
    request.path = "/v1/chat/completions"
    return _Responder(view)._respond_unless_client_leaves(request, receive, None)


def test_a_replys_billing_waits_until_the_reply_has_gone_out():
    seen: list[str] = []

    async def billed() -> None:
        seen.append("billed")

    async def view(after_sent: list[AfterReply]) -> None:
        after_sent.append(AfterReply(billed))
        await asyncio.sleep(0.05)  # the billing's task has had many turns of the loop
        seen.append("replied")

    asyncio.run(asyncio.wait_for(_respond(view, client_leaves_after_s=10), 5))
    assert seen == ["replied", "billed"]


def test_a_client_that_leaves_cancels_the_view_and_its_billing_still_runs():
    seen: list[str] = []

    async def billed() -> None:
        await asyncio.sleep(0.05)
        seen.append("billed")

    async def view(after_sent: list[AfterReply]) -> None:
        after_sent.append(AfterReply(billed))
        try:
            await asyncio.sleep(10)  # the worker still generating
        except asyncio.CancelledError:
            seen.append("view cancelled")
            raise

    async def scenario() -> None:
        await _respond(view, client_leaves_after_s=0.02)
        await asyncio.sleep(0)  # the task is not left cancelled: it goes on awaiting
        seen.append("handler returned")

    asyncio.run(asyncio.wait_for(scenario(), 5))
    assert seen == ["view cancelled", "billed", "handler returned"]


def test_a_client_that_leaves_after_its_reply_cancels_nothing():
    seen: list[str] = []

    async def billed() -> None:
        await asyncio.sleep(0.05)  # the client leaves meanwhile
        seen.append("billed")

    async def view(after_sent: list[AfterReply]) -> None:
        after_sent.append(AfterReply(billed))
        seen.append("replied")

    asyncio.run(asyncio.wait_for(_respond(view, client_leaves_after_s=0.01), 5))
    assert seen == ["replied", "billed"]


def test_the_servers_own_cancellation_is_not_swallowed():
    async def view(after_sent: list[AfterReply]) -> None:
        await asyncio.sleep(10)

    async def scenario() -> None:
        task = asyncio.create_task(_respond(view, client_leaves_after_s=10))
        await asyncio.sleep(0.02)
        task.cancel()  # uvicorn shutting down
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(scenario(), 5))
