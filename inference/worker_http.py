"""HTTP/1.1 to the workers, lean: POST a JSON body, read the status, then the body as it
arrives, on connections kept alive per worker and event loop.

Why not aiohttp (the scraper and the simulator still use it): each request through its
client session builds a request, a response, a stream reader, header multidicts, timers and
trace hooks, and a profile of sampled requests at 64 concurrent put it at about a sixth of
the gateway's CPU, more than the pipeline's own code. A worker conversation needs none of
that: no redirects, cookies (none may ride from one team's request to another's), proxies
or compression (no Accept-Encoding is sent). Responses are parsed by httptools, the parser
uvicorn serves with (chunked bodies included).

Timeouts are the callers' (`asyncio.timeout` around the call), except connecting, which
has its own so that a worker that does not answer is told apart from a slow first token,
and the gaps in a streamed body (`read(idle_timeout_s)`: one check per connection, not a
timer per read, since every token of every reply is a read).
"""

import asyncio
import ssl
import time
import weakref
from collections import deque
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import NamedTuple
from urllib.parse import urlsplit

import httptools

from foundation import worker_wait

# Below uvicorn's 5 s keep-alive (vLLM's server): a connection idle for longer may be one the
# worker is closing, and a request written into it would fail for no fault of the worker.
KEEPALIVE_S = 4.0
MAX_IDLE_PER_ORIGIN = 512
PAUSE_READING_AT = 1 << 20  # bytes buffered from a worker whose body is not being read
TIMER_RESOLUTION_S = 0.001  # uvloop's (libuv's) clock, in milliseconds


class ProtocolError(Exception):
    """The worker's answer is not HTTP/1.1 this client reads, or is over a limit."""


class AnswerTooLarge(ProtocolError):
    """The worker's whole answer is over the size its reader allows."""


class Origin(NamedTuple):
    """Where a worker URL's requests go; `prefix` is the URL's path (before /v1/...)."""

    tls: bool
    host: str
    port: int
    prefix: str
    host_header: str


@lru_cache(maxsize=1024)
def origin_of(url: str) -> Origin:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    return Origin(tls, parts.hostname, port, parts.path.rstrip("/"), parts.netloc)


@cache
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()  # the system's CAs, hostnames checked


def _request_head(origin: Origin, path: str, headers: Mapping[str, str] | None, size: int) -> bytes:
    lines = [
        f"POST {origin.prefix}{path} HTTP/1.1",
        f"Host: {origin.host_header}",
        "User-Agent: sluice",
        "Content-Type: application/json",
        f"Content-Length: {size}",
    ]
    for name, value in (headers or {}).items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise ValueError(f"header {name!r} would split the request")  # no injected lines
        lines.append(f"{name}: {value}")
    lines.append("\r\n")
    return "\r\n".join(lines).encode("latin-1")


class _Connection(asyncio.Protocol):
    """One keep-alive connection to a worker; one request at a time. The body is buffered
    as it arrives (reading pauses past PAUSE_READING_AT) and handed out by `read`."""

    def __init__(self, pool: "_Pool", origin: Origin) -> None:
        self.pool = pool
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._linger: asyncio.TimerHandle | None = None
        # The idle timeout of the read waiting now (None: none), from when it began; one
        # timer per connection checks it, armed again only when it finds a wait not yet
        # due. A timer per wait cost 2.6 us a streamed chunk.
        self._idle_timeout: float | None = None
        self._waiting_since = 0.0
        self._idle_check: asyncio.TimerHandle | None = None
        self._idle_check_due = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._loop = asyncio.get_running_loop()
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.in_flight = False
        self.release_when_complete = False
        self._head_done = False
        self._complete = False
        self._delimited = False  # Content-Length or chunked; else the body ends at close
        self._keep_alive = False
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        if not self.in_flight:
            self.close()  # bytes nobody asked for: the connection cannot be trusted
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ProtocolError(f"unreadable HTTP from the worker: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        if self.in_flight and not self._complete:
            if self._head_done and not self._delimited and self._error is None:
                self._complete = True  # a body that runs to the connection's end
                self._wake()
            else:
                reason = f": {exc!r}" if exc else ""
                self._fail(ConnectionError(f"the worker closed the connection{reason}"))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self._delimited = True

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()  # reset once the message ends
        self._head_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > PAUSE_READING_AT and self.transport is not None:
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self._complete = True
        self._wake()
        if self.release_when_complete:
            self.release()

    # the request

    def send(self, head: bytes, body: bytes) -> None:
        if self.transport is None or self.closed:
            raise ConnectionError("the worker's connection is closed")
        self._reset()
        self.in_flight = True
        self.transport.write(head + body)

    async def head(self) -> None:
        while not self._head_done:
            await self._wait()

    async def read(self, idle_timeout_s: float | None = None) -> bytes:
        """What has arrived of the body since the last read (waiting for something), or
        b"" at its end; TimeoutError if nothing arrives for idle_timeout_s."""
        while not self._body:
            if self._complete:
                return b""
            await self._wait(idle_timeout_s)
        data = self._body.popleft() if len(self._body) == 1 else b"".join(self._body)
        self._body.clear()
        if self._buffered > PAUSE_READING_AT and self.transport is not None:
            self.transport.resume_reading()
        self._buffered = 0
        return data

    async def _wait(self, timeout_s: float | None = None) -> None:
        if self._error is not None:
            raise self._error
        # Not asyncio.timeout() around the wait: that cost 6 us a read, a fifth of the
        # gateway's CPU for each chunk a worker streams (docs/benchmarks.md).
        self._idle_timeout = timeout_s
        if timeout_s is not None:
            self._waiting_since = now = self._loop.time()
            if self._idle_check is None or self._idle_check_due > now + timeout_s:
                self._arm_idle_check(now + timeout_s)
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        if self._error is not None and not self._body:
            raise self._error

    def _check_idle(self) -> None:
        self._idle_check = None
        waiter, timeout = self._waiter, self._idle_timeout
        if waiter is None or waiter.done() or timeout is None:
            return  # no read waiting with a timeout: the next one arms the check again
        due = self._waiting_since + timeout
        if self._loop.time() >= due - TIMER_RESOLUTION_S:  # timers may run early by this
            waiter.set_exception(TimeoutError())
        else:
            self._arm_idle_check(due)

    def _arm_idle_check(self, due: float) -> None:
        self._stop_idle_check()
        self._idle_check, self._idle_check_due = self._loop.call_at(due, self._check_idle), due

    def _stop_idle_check(self) -> None:
        if self._idle_check is not None:
            self._idle_check.cancel()
            self._idle_check = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._wake()

    def release(self) -> None:
        """Back to the pool once the body has ended; closed if the worker will not keep it."""
        if not self._complete:
            # The caller stopped at the body's last event ([DONE]); the chunked body's
            # terminator usually follows in the same packet or the next.
            self.release_when_complete = True
            self._linger = self._loop.call_later(KEEPALIVE_S, self._close_if_still_open)
            return
        self._stop_lingering()
        self._stop_idle_check()
        self.in_flight = False
        # A body that ran to the connection's end completed in connection_lost: closed.
        if self.closed or not self._keep_alive:
            self.close()
        else:
            self.pool.put_back(self)

    def _close_if_still_open(self) -> None:
        self._linger = None
        if self.release_when_complete:
            self.close()

    def _stop_lingering(self) -> None:
        self.release_when_complete = False
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None

    def close(self) -> None:
        self._stop_lingering()
        self._stop_idle_check()
        self.closed = True
        self.pool.forget(self)
        if self.transport is not None:
            self.transport.close()


class WorkerResponse:
    """A worker's answer: its status at once, its body as it arrives. End it with
    `release()` (body read to its end: the connection is kept) or `close()` (anything else;
    closing mid-stream makes vLLM abort the request). Once ended, it lets go of the
    connection: a second `close()` cannot reach one already serving another request."""

    __slots__ = ("_connection", "status")

    def __init__(self, connection: _Connection) -> None:
        self._connection: _Connection | None = connection
        self.status = connection.status

    async def read(self, idle_timeout_s: float | None = None) -> bytes:
        """What has arrived of the body since the last read, or b"" at its end;
        TimeoutError if nothing arrives for idle_timeout_s."""
        if self._connection is None:
            raise ConnectionError("this answer was already ended")
        return await self._connection.read(idle_timeout_s)

    async def read_all(self, limit: int) -> bytes:
        """The whole body (at most `limit` bytes); the connection is kept for the next."""
        parts: list[bytes] = []
        size = 0
        try:
            while data := await self.read():
                size += len(data)
                if size > limit:
                    raise AnswerTooLarge(f"the worker's answer is over {limit} bytes")
                parts.append(data)
        except BaseException:  # over the limit, broken, or the caller's timeout
            self.close()
            raise
        self.release()
        return b"".join(parts)

    def release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.release()

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


class _Pool:
    """Idle connections per origin, newest first out (warm, and the oldest expire)."""

    def __init__(self) -> None:
        self.idle: dict[Origin, list[_Connection]] = {}

    async def connection(self, origin: Origin, connect_timeout: float) -> _Connection:
        idle = self.idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < KEEPALIVE_S:
                return connection
            connection.close()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(connect_timeout):
                _, protocol = await loop.create_connection(
                    lambda: _Connection(self, origin),
                    origin.host,
                    origin.port,
                    ssl=_tls_context() if origin.tls else None,
                )
        except TimeoutError:
            raise ConnectionError(
                f"no connection to {origin.host}:{origin.port} within {connect_timeout} s"
            ) from None
        return protocol

    def put_back(self, connection: _Connection) -> None:
        idle = self.idle.setdefault(connection.origin, [])
        if len(idle) >= MAX_IDLE_PER_ORIGIN:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        idle.append(connection)

    def forget(self, connection: _Connection) -> None:
        idle = self.idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)

    def close(self) -> None:
        for idle in list(self.idle.values()):
            for connection in list(idle):
                connection.close()
        self.idle.clear()


_pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool]" = weakref.WeakKeyDictionary()


def _pool() -> _Pool:
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = _Pool()
    return pool


async def post(
    url: str,
    path: str,
    body: bytes,
    headers: Mapping[str, str] | None,
    connect_timeout: float,
) -> WorkerResponse:
    """POST `body` (JSON) to `url` + `path` and wait for the answer's status and headers.
    Raises OSError (ConnectionError for a refused, unreachable or closed connection) or
    ProtocolError; cancelling it closes the connection."""
    origin = origin_of(url)
    head = _request_head(origin, path, headers, len(body))
    connection = await _pool().connection(origin, connect_timeout)
    try:
        connection.send(head, body)
        worker_wait.waiting_on_worker()  # bookkeeping may run now, the worker has the call
        await connection.head()
    except BaseException:
        connection.close()
        raise
    return WorkerResponse(connection)


def close_pool() -> None:
    """Close this event loop's connections (process shutdown, the end of a test's loop)."""
    pool = _pools.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        pool.close()
