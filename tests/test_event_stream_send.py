"""The API handler's stream sender: a stream's events generator is entered before anything
is sent, so a send that fails or is cancelled at the headers (a client that reads nothing,
a server shutting down) still closes it, and closing it is what settles the request (the
generator's `async with run`, gateway/api/views.py)."""

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from gateway.api.common import EventStream
from gateway.api_handler import ApiHandler

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
