"""The worker client's first chunk: it may take as long as the first-token timeout (not
the idle timeout, which is for the gaps after it), and a stream that fails before it is a
failure another worker may still answer."""

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from inference.client import UpstreamError, _open, close_http_session, stream_from_worker

pytestmark = pytest.mark.unit
CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def worker(handler: Handler, path: str = "/v1/chat/completions") -> AsyncIterator[str]:
    """A one-route server answering chat completions (or `path`) with `handler`; its URL."""
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await close_http_session()
        await runner.cleanup()


def against(handler: Handler) -> Any:
    """_open against a worker answering with `handler`: its first chunk, or the exception
    it raised."""

    async def scenario() -> Any:
        async with worker(handler) as url:
            try:
                response, first, _ = await _open(url, {"model": "m"}, "/v1/chat/completions", None)
            except UpstreamError as exc:
                return exc
            response.close()
            return first

    return asyncio.run(scenario())


def test_a_first_chunk_slower_than_the_idle_timeout_is_still_read(settings):
    settings.UPSTREAM_IDLE_TIMEOUT_S = 0.2
    settings.UPSTREAM_FIRST_TOKEN_TIMEOUT_S = 5

    async def slow_prefill(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)  # headers at once, as vLLM sends them
        await asyncio.sleep(0.6)
        await response.write(CHUNK)
        return response

    first = against(slow_prefill)
    assert not isinstance(first, Exception), first
    assert first["choices"][0]["delta"]["content"] == "hi"


def test_a_stream_closed_before_its_first_chunk_may_be_retried_elsewhere(settings):
    async def closes_at_once(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        return response  # ends the body: no chunk, no [DONE]

    failed = against(closes_at_once)
    assert isinstance(failed, UpstreamError) and failed.before_first_token


def test_a_worker_that_stops_mid_stream_fails_its_reader_after_the_idle_timeout(settings):
    """Gaps shorter than the idle timeout are waited out, chunk after chunk; a longer one
    ends the stream with a failure no other worker may take over (the client has text)."""
    settings.UPSTREAM_IDLE_TIMEOUT_S = 0.2
    settings.UPSTREAM_FIRST_TOKEN_TIMEOUT_S = 5

    async def stalls(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for _ in range(4):
            await response.write(CHUNK)
            await asyncio.sleep(0.1)
        await asyncio.sleep(3)  # then nothing, the connection still open
        return response

    async def scenario() -> tuple[int, BaseException | None, float]:
        read, failure, waited_s = 0, None, 0.0
        async with worker(stalls) as url:
            response, _, chunks = await _open(url, {"model": "m"}, "/v1/chat/completions", None)
            read, last_chunk_at = 1, time.monotonic()
            try:
                async for _ in chunks:
                    read, last_chunk_at = read + 1, time.monotonic()
            except UpstreamError as exc:
                failure, waited_s = exc, time.monotonic() - last_chunk_at
            response.close()
        return read, failure, waited_s

    read, failure, waited_s = asyncio.run(scenario())
    assert read == 4
    assert isinstance(failure, UpstreamError) and "idle timeout" in str(failure)
    assert not failure.retryable
    assert waited_s < 2.0  # the timeout ended it, not the worker


def test_a_kept_alive_connection_times_no_first_chunk_by_its_last_streams_idle_timeout(settings):
    """The idle timeout is checked per connection, not per read: after a stream that used
    it, the next request on the same connection may still wait longer for its first chunk."""
    settings.UPSTREAM_IDLE_TIMEOUT_S = 0.2
    settings.UPSTREAM_FIRST_TOKEN_TIMEOUT_S = 5
    served: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        served.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        if len(served) == 2:
            await asyncio.sleep(0.6)  # a slow prefill, three idle timeouts long
        for _ in range(3):
            await response.write(CHUNK)
            await asyncio.sleep(0.05)
        await response.write(b"data: [DONE]\n\n")
        return response

    async def scenario() -> list[int]:
        async with worker(handler) as url:
            return [
                len([chunk async for chunk in stream_from_worker(url, "m", {"messages": []})])
                for _ in range(2)
            ]

    assert asyncio.run(scenario()) == [3, 3]
    assert served[0] == served[1]  # one connection, kept alive
