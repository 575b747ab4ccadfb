"""Stream chat completions from vLLM workers over one pooled HTTP client per event loop.

Timeouts: connect, first token, and idle between chunks. A failure before the first
token is retried on another worker (nothing has reached the client yet); a failure after
it is reported, never retried, since a second generation would not continue the first.
Closing the stream (client gone, generator closed) closes the upstream connection, and
vLLM aborts a request whose connection closes.
"""

import asyncio
import json
import logging
import weakref
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import aiohttp
from django.conf import settings

from inference.dispatch import Dispatcher, Lease, Priority

logger = logging.getLogger(__name__)
_sessions: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession]" = (
    weakref.WeakKeyDictionary()
)


class UpstreamError(Exception):
    def __init__(self, message: str, worker_url: str, before_first_token: bool) -> None:
        super().__init__(message)
        self.worker_url = worker_url
        self.before_first_token = before_first_token


def http_session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=30)
        session = aiohttp.ClientSession(connector=connector)
        _sessions[loop] = session
    return session


async def close_http_session() -> None:
    """Close this loop's session (process shutdown, the end of a test's event loop)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None:
        await session.close()


Chunk = dict[str, Any]


async def _chunks(response: aiohttp.ClientResponse, url: str) -> AsyncGenerator[Chunk, None]:
    """Parse an SSE body into chunk dicts; idle timeout between lines; stop at [DONE]."""
    while True:
        try:
            line = await asyncio.wait_for(
                response.content.readline(), settings.UPSTREAM_IDLE_TIMEOUT_S
            )
        except TimeoutError:
            raise UpstreamError("worker stopped sending (idle timeout)", url, False) from None
        if not line:
            raise UpstreamError("worker closed the stream before [DONE]", url, False)
        text = line.decode().strip()
        if not text.startswith("data:"):
            continue
        data = text[5:].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


async def stream_from_worker(lease: Lease, body: dict[str, Any]) -> AsyncGenerator[Chunk, None]:
    url = lease.worker.url
    payload = {**body, "model": lease.worker.upstream_model, "stream": True}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=settings.UPSTREAM_CONNECT_TIMEOUT_S)
    try:
        response = await http_session().post(f"{url}/v1/chat/completions", json=payload,
                                             timeout=timeout)  # fmt: skip
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise UpstreamError(f"cannot reach worker: {exc!r}", url, True) from exc
    try:
        if response.status != 200:
            detail = (await response.text())[:500]
            raise UpstreamError(f"worker answered {response.status}: {detail}", url, True)
        chunks = _chunks(response, url)
        try:
            first = await asyncio.wait_for(anext(chunks), settings.UPSTREAM_FIRST_TOKEN_TIMEOUT_S)
        except TimeoutError:
            raise UpstreamError("no first token in time", url, True) from None
        except (aiohttp.ClientError, UpstreamError) as exc:
            raise UpstreamError(f"stream failed before first token: {exc}", url, True) from exc
        yield first
        try:
            async for chunk in chunks:
                yield chunk
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"stream broke: {exc!r}", url, False) from exc
    finally:
        response.close()  # mid-stream: drops the connection, so vLLM aborts the request


async def stream_completion(
    dispatcher: Dispatcher,
    deployment: str,
    body: dict[str, Any],
    priority: Priority = Priority.INTERACTIVE,
) -> AsyncGenerator[tuple[Lease, dict[str, Any]], None]:
    """Yield (lease, chunk) pairs; retries other workers only until the first chunk."""
    tried: set[str] = set()
    for attempt in range(1, settings.UPSTREAM_MAX_ATTEMPTS + 1):
        lease = await dispatcher.acquire(deployment, priority, exclude=frozenset(tried))
        started = False
        try:
            # aclosing: a consumer that stops early closes the upstream stream now, not at GC.
            async with aclosing(stream_from_worker(lease, body)) as chunks:
                async for chunk in chunks:
                    started = True
                    yield lease, chunk
            return
        except UpstreamError as exc:
            if started or not exc.before_first_token or attempt == settings.UPSTREAM_MAX_ATTEMPTS:
                raise
            tried.add(lease.worker.url)
            logger.warning("retrying on another worker before the first token: %s (%s)",
                           exc, lease.worker.url)  # fmt: skip
        finally:
            dispatcher.release(lease)
