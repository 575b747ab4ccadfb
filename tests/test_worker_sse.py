"""The worker client reads SSE however the bytes arrive: events split across reads, several
in one read, CRLF lines, comments; it refuses an endless line; JSON the fast encoder
refuses still goes out."""

import asyncio
import json
from contextlib import aclosing
from typing import Any

import pytest
from aiohttp import web

from foundation.embedded_redis import free_port
from foundation.json_bytes import json_bytes
from inference import client
from inference.client import UpstreamError, close_http_session, stream_from_worker

pytestmark = pytest.mark.live  # a real HTTP server on loopback


def chunk(text: str) -> dict[str, Any]:
    return {
        "id": "up-1",
        "object": "chat.completion.chunk",
        "choices": [{"delta": {"content": text}}],
    }


async def serve(pieces: list[bytes], pause_s: float = 0.01) -> tuple[str, web.AppRunner]:
    """A worker that writes its SSE body in exactly these pieces, pausing between them so
    each arrives in a read of its own."""

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
            await asyncio.sleep(pause_s)
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return f"http://127.0.0.1:{port}", runner


async def collected(pieces: list[bytes]) -> list[dict[str, Any]]:
    url, runner = await serve(pieces)
    try:
        async with aclosing(stream_from_worker(url, "m", {"messages": []})) as chunks:
            return [c async for c in chunks]
    finally:
        await close_http_session()
        await runner.cleanup()


def sse(*chunks: dict[str, Any], end: bytes = b"\n\n") -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + end for c in chunks)


def test_an_event_split_across_reads_is_parsed_whole() -> None:
    body = sse(chunk("Hello"), chunk(" world")) + b"data: [DONE]\n\n"
    cut = [body[:9], body[9:31], body[31:70], body[70:]]  # mid-prefix, mid-JSON, mid-line
    got = asyncio.run(collected(cut))
    assert [c["choices"][0]["delta"]["content"] for c in got] == ["Hello", " world"]


def test_several_events_in_one_read_crlf_lines_and_comments_are_read() -> None:
    body = (
        b": keep-alive comment\r\n\r\n"
        + sse(chunk("a"), chunk("b"), end=b"\r\n\r\n")
        + b"event: message\r\ndata: [DONE]\r\n\r\n"
    )
    got = asyncio.run(collected([body]))
    assert [c["choices"][0]["delta"]["content"] for c in got] == ["a", "b"]


def test_a_stream_that_ends_before_done_is_an_upstream_error() -> None:
    with pytest.raises(UpstreamError, match="before \\[DONE\\]"):
        asyncio.run(collected([sse(chunk("a"))]))


def test_an_error_event_after_the_first_chunk_fails_the_stream() -> None:
    """vLLM reports a failure after its 200 as an event, then [DONE]: the stream fails
    there, and nothing of the event is passed on as a chunk."""
    error = {"error": {"message": "parser blew up at /srv/x", "type": "X", "code": 400}}
    body = sse(chunk("Hel"), error) + b"data: [DONE]\n\n"
    got: list[dict[str, Any]] = []

    async def read() -> None:
        url, runner = await serve([body])
        try:
            async with aclosing(stream_from_worker(url, "m", {"messages": []})) as chunks:
                async for c in chunks:
                    got.append(c)
        finally:
            await close_http_session()
            await runner.cleanup()

    with pytest.raises(UpstreamError, match="error event") as failure:
        asyncio.run(read())
    assert got == [chunk("Hel")]
    assert not failure.value.retryable and not failure.value.client_error


@pytest.mark.parametrize(
    "event",
    [
        # vLLM tags whatever failed in its generator 400, an engine fault included
        {"error": {"message": "tool parser failed", "type": "BadRequestError", "code": 400}},
        {"object": "error", "message": "engine died", "type": "InternalServerError", "code": 500},
        {"error": "no detail"},
    ],
)
def test_an_error_event_first_is_a_worker_failure_retried_elsewhere(event: dict[str, Any]) -> None:
    with pytest.raises(UpstreamError, match="error event") as failure:
        asyncio.run(collected([sse(event) + b"data: [DONE]\n\n"]))
    assert failure.value.before_first_token
    assert failure.value.retryable and not failure.value.client_error


def test_a_chunk_with_a_null_error_field_is_a_chunk() -> None:
    body = sse({**chunk("a"), "error": None}) + b"data: [DONE]\n\n"
    assert [c["choices"][0]["delta"]["content"] for c in asyncio.run(collected([body]))] == ["a"]


def test_an_event_that_is_not_an_object_fails_the_stream() -> None:
    with pytest.raises(UpstreamError, match="not an object"):
        asyncio.run(collected([sse(chunk("a")) + b"data: 5\n\ndata: [DONE]\n\n"]))


def test_an_endless_line_is_refused_not_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "MAX_EVENT_BYTES", 64 * 1024)
    first = sse(chunk("a"))
    endless = [first] + [b"x" * 32 * 1024] * 4  # 128 KiB without a newline
    with pytest.raises(UpstreamError, match="size limit"):
        asyncio.run(collected(endless))


def test_values_the_fast_encoder_refuses_are_encoded_by_the_standard_one() -> None:
    value = {"seed": 2**70, "text": "caf\u00e9"}
    assert json.loads(json_bytes(value)) == value
    assert json_bytes({"text": "caf\u00e9"}) == '{"text":"café"}'.encode()


def test_a_cookie_one_worker_sets_is_never_sent_on_and_the_body_goes_as_json() -> None:
    """Workers are shared by every team: a Set-Cookie from one answer must not ride along on
    the next request (to it or another worker), whoever sends it."""
    seen: list[tuple[str | None, str | None, Any]] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()  # as vLLM's FastAPI reads it: by its content type
        seen.append((request.headers.get("Cookie"), request.content_type, body["model"]))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.set_cookie("session", "team-a-secret")
        await response.prepare(request)
        await response.write(b"data: " + json_bytes(chunk("hi")) + b"\n\ndata: [DONE]\n\n")
        return response

    async def scenario() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", completions)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            for _ in range(2):
                # By name: aiohttp's jar would keep no cookie from an IP address.
                stream = stream_from_worker(f"http://localhost:{port}", "m", {"messages": []})
                async with aclosing(stream) as chunks:
                    assert [c async for c in chunks] == [chunk("hi")]
        finally:
            await close_http_session()
            await runner.cleanup()

    asyncio.run(scenario())
    assert seen == [(None, "application/json", "m"), (None, "application/json", "m")]
