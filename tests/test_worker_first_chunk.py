"""The worker client's first chunk: it may take as long as the first-token timeout (not
the idle timeout, which is for the gaps after it), and a stream that fails before it is a
failure another worker may still answer."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from inference.client import UpstreamError, _open, close_http_session

pytestmark = pytest.mark.unit
CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'


def against(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Any:
    """_open against a one-route server answering with `handler`: its first chunk, or the
    exception it raised."""

    async def scenario() -> Any:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            response, first, _ = await _open(
                f"http://127.0.0.1:{port}", {"model": "m"}, "/v1/chat/completions", None
            )
            response.close()
            return first
        except UpstreamError as exc:
            return exc
        finally:
            await close_http_session()
            await runner.cleanup()

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
