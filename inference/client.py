"""Stream chat completions from vLLM workers over one pooled HTTP client per event loop.

Timeouts: connect, first token, and idle between chunks. A failure before the first
token is retried on another worker (nothing has reached the client yet); a failure after
it is reported, never retried, since a second generation would not continue the first.
Closing the stream (client gone, generator closed) closes the upstream connection, and
vLLM aborts a request whose connection closes.
"""

import asyncio
import logging
import weakref
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp
import orjson
from django.conf import settings

from foundation.json_bytes import json_bytes
from inference.chat_request import CHAT_PATH, TEXT_PATH
from inference.text_completion import as_chat_chunk

logger = logging.getLogger(__name__)
_sessions: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession]" = (
    weakref.WeakKeyDictionary()
)


PLATFORM_REFUSALS = frozenset({401, 403, 429})  # the worker refused us, not the request


class UpstreamError(Exception):
    """A worker failed. `status` is its HTTP status when it answered with an error."""

    def __init__(
        self, message: str, worker_url: str, before_first_token: bool, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.worker_url = worker_url
        self.before_first_token = before_first_token
        self.status = status

    @property
    def client_error(self) -> bool:
        """The request itself was refused (vLLM's 4xx): another worker would refuse it too.
        Not a refusal of the platform's own key (401, 403: the deployment's api_key_env is
        wrong or unset) nor a worker's rate limit (429): those are the platform's failures,
        not the client's request, and another worker may take it."""
        return self.status is not None and 400 <= self.status < 500 and not self.platform_refused

    @property
    def platform_refused(self) -> bool:
        return self.status in PLATFORM_REFUSALS

    @property
    def retryable(self) -> bool:
        return self.before_first_token and not self.client_error


def http_session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30)
        # orjson for request bodies too (aiohttp's default is json.dumps). No cookie jar: a
        # cookie one worker sets must not ride along on requests to the others, or on other
        # teams' requests (and none is filtered per request).
        session = aiohttp.ClientSession(
            connector=connector, json_serialize=_json_text, cookie_jar=aiohttp.DummyCookieJar()
        )
        _sessions[loop] = session
    return session


JSON_HEADERS = {"Content-Type": "application/json"}


def _json_text(value: Any) -> str:
    return json_bytes(value).decode()


async def close_http_session() -> None:
    """Close this loop's session (process shutdown, the end of a test's event loop)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


Chunk = dict[str, Any]


MAX_EVENT_BYTES = 8 * 1024 * 1024  # one SSE event from a worker (a chunk with logprobs is KBs)


async def _chunks(response: aiohttp.ClientResponse, url: str) -> AsyncGenerator[Chunk, None]:
    """Parse an SSE body into chunk dicts; idle timeout between reads; stop at [DONE].

    Reads whatever the socket has (an event, usually whole, per read) and splits lines
    itself: a readline per line cost two reads and two timeouts per event (an event is its
    data line and a blank one), the largest share of a streamed chunk's gateway CPU. orjson
    parses the data (several times faster than json; NaN is refused, as vLLM never sends)."""
    content = response.content
    # The first read waits as long as _open's first-token timeout lets it (a long prefill,
    # or a queue on the worker, can outlast the idle timeout); the idle timeout is for the
    # gaps after it.
    idle: float | None = None
    pending = b""
    while True:
        try:
            async with asyncio.timeout(idle):  # no task per read
                data = await content.readany()
        except TimeoutError:
            raise UpstreamError("worker stopped sending (idle timeout)", url, False) from None
        if not data:
            raise UpstreamError("worker closed the stream before [DONE]", url, False)
        idle = settings.UPSTREAM_IDLE_TIMEOUT_S
        lines = (pending + data).split(b"\n") if pending else data.split(b"\n")
        pending = lines.pop()  # the part after the last newline: an unfinished line
        if len(pending) > MAX_EVENT_BYTES:
            raise UpstreamError("worker sent an event over the size limit", url, False)
        for line in lines:
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, event: and id: fields
            payload = line[5:].strip()
            if payload == b"[DONE]":
                return
            yield orjson.loads(payload)


async def _open(
    url: str, payload: dict[str, Any], path: str, headers: dict[str, str] | None
) -> tuple[aiohttp.ClientResponse, Chunk, AsyncGenerator[Chunk, None]]:
    """POST and wait for the first chunk, all within the first-token timeout."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.UPSTREAM_CONNECT_TIMEOUT_S)
    response = None
    try:
        async with asyncio.timeout(settings.UPSTREAM_FIRST_TOKEN_TIMEOUT_S):
            response = await http_session().post(
                f"{url}{path}",
                data=json_bytes(payload),  # bytes as they go: no str and no payload object
                timeout=timeout,
                headers=JSON_HEADERS if headers is None else {**JSON_HEADERS, **headers},
            )
            if response.status != 200:
                detail = (await response.text())[:500]
                raise UpstreamError(
                    f"worker answered {response.status}: {detail}",
                    url,
                    True,
                    status=response.status,
                )
            chunks = _chunks(response, url)
            if path == TEXT_PATH:  # read on as chat deltas: one pipeline for both
                chunks = _as_chat_chunks(chunks)
            return response, await anext(chunks), chunks
    except BaseException as exc:
        if response is not None:
            response.close()
        if isinstance(exc, UpstreamError):
            if exc.before_first_token:
                raise
            # The stream's own failure (closed, too large), before its first chunk: nothing
            # reached the client, so another worker may still answer.
            raise UpstreamError(str(exc), url, True, status=exc.status) from exc
        if isinstance(exc, TimeoutError):
            raise UpstreamError("no first token in time", url, True) from None
        if isinstance(exc, aiohttp.ClientError | StopAsyncIteration | ValueError):
            raise UpstreamError(
                f"worker failed before the first token: {exc!r}", url, True
            ) from exc
        raise


async def _as_chat_chunks(chunks: AsyncGenerator[Chunk, None]) -> AsyncGenerator[Chunk, None]:
    async for chunk in chunks:
        yield as_chat_chunk(chunk)


async def stream_from_worker(
    url: str,
    upstream_model: str,
    body: dict[str, Any],
    path: str = CHAT_PATH,
    headers: dict[str, str] | None = None,
) -> AsyncGenerator[Chunk, None]:
    """Stream one request from one worker (its own model name replaces ours), from its chat
    endpoint or, for a text completion, its /v1/completions (inference/text_completion.py),
    whose chunks come out as chat chunks. headers: the deployment's (its workers' API key:
    inference/worker_auth.py)."""
    payload = {**body, "model": upstream_model, "stream": True}
    response, first, chunks = await _open(url, payload, path, headers)
    finished = False
    try:
        yield first
        try:
            async for chunk in chunks:
                yield chunk
        except (aiohttp.ClientError, ValueError) as exc:
            raise UpstreamError(f"stream broke: {exc!r}", url, False) from exc
        finished = True
    finally:
        if finished:
            response.release()  # back to the pool: no new TCP connection per request
        else:
            response.close()  # mid-stream: drops the connection, so vLLM aborts the request


async def count_prompt_tokens(
    url: str,
    upstream_model: str,
    messages: list[Any],
    tools: list[Any] | None = None,
    text_prompt: str | None = None,
    headers: dict[str, str] | None = None,
    timeout_s: float | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> int:
    """The prompt's length in the worker's own tokens, chat template included (vLLM's
    /tokenize): what a request that left before its usage chunk is billed for its prompt,
    and, for a model whose tokenizer is not on this host, what admission reserves for it.
    A text completion's prompt is counted as it is (no chat template)."""
    payload: dict[str, Any] = {"model": upstream_model}
    if text_prompt is not None:
        payload["prompt"] = text_prompt
    else:
        payload.update(messages=messages, add_generation_prompt=True)
    if tools:
        payload["tools"] = tools
    if chat_template_kwargs and text_prompt is None:  # e.g. enable_thinking: another prompt
        payload["chat_template_kwargs"] = chat_template_kwargs
    total = settings.UPSTREAM_CONNECT_TIMEOUT_S + 2 if timeout_s is None else timeout_s
    timeout = aiohttp.ClientTimeout(total=total)
    try:
        async with http_session().post(
            f"{url}/tokenize", json=payload, timeout=timeout, headers=headers
        ) as reply:
            if reply.status != 200:
                # Only the status: a worker's validation error quotes the prompt it refused,
                # which must not reach the logs.
                raise UpstreamError(
                    f"tokenize answered {reply.status}", url, False, status=reply.status
                )
            count = (await reply.json()).get("count")
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise UpstreamError(f"tokenize failed: {exc!r}", url, False) from exc
    if not isinstance(count, int) or count < 0:
        raise UpstreamError(f"tokenize gave no count: {count!r}", url, False)
    return count
