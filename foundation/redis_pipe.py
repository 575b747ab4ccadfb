"""One pipelined Redis connection: commands written as they come, replies matched in order.

Why not redis-py's pipeline for the hot path: measured on this project's machines, a command
sent through `Pipeline.execute()` cost about 27 us of the gateway's CPU (each argument
encoded in Python, a coroutine and a response callback per reply, redis-py 8's
observability and HIMPORT hooks around every pipeline), against about 6 us packed by hiredis,
written once per batch and read by hiredis's reader (docs/benchmarks.md, "Ninth round").
Redis answers a connection's commands in the order they arrive, so one connection carries
every batch without waiting for the one before it: no pool, no checkout.

redis-py still does what it is good at: its connection class reads the URL (host, port,
database, password, TLS options, unix socket), and its exception types are what callers
catch. Replies are RESP2 as Redis sends them, decoded as UTF-8, without redis-py's response
callbacks: SET answers "OK" (not True), EXPIRE 1 or 0, VSIM ... WITHSCORES a flat list.
"""

import asyncio
import collections
import socket
import ssl
from collections.abc import Callable
from typing import Any, cast

import hiredis
import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

# An unanswered command: its packed bytes, its caller's future, and how many more times it
# may be sent if its connection breaks before the reply.
Unanswered = tuple[bytes, "asyncio.Future[Any]", int]

# Error replies as the exceptions redis-py raises for them (callers catch these types).
_ERRORS: dict[str, type[redis.exceptions.RedisError]] = {
    "NOSCRIPT": redis.exceptions.NoScriptError,
    "OOM": redis.exceptions.OutOfMemoryError,
    "READONLY": redis.exceptions.ReadOnlyError,
    "LOADING": redis.exceptions.BusyLoadingError,
    "NOAUTH": redis.exceptions.AuthenticationError,
    "WRONGPASS": redis.exceptions.AuthenticationError,
    "NOPERM": redis.exceptions.NoPermissionError,
    "EXECABORT": redis.exceptions.ExecAbortError,
}


def reply_error(message: str) -> redis.exceptions.RedisError:
    kind = _ERRORS.get(message.partition(" ")[0], redis.exceptions.ResponseError)
    return kind(message)


class RespConnection(asyncio.Protocol):
    """The socket's protocol: a queue of the futures still owed a reply, in sending order.

    A connection that makes no progress for `timeout_s` while replies are owed is aborted
    (a hung Redis fails fast); `on_lost` gets what was unanswered when it closed, and why."""

    def __init__(
        self, timeout_s: float, on_lost: Callable[[list[Unanswered], Exception], None]
    ) -> None:
        self._timeout_s = timeout_s
        self._on_lost = on_lost
        self._reader = hiredis.Reader(encoding="utf-8")
        self._unanswered: collections.deque[Unanswered] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._progress_at = 0.0  # when a reply last arrived, or the queue last filled
        self._watchdog: asyncio.TimerHandle | None = None
        self._failure: Exception | None = None
        self.open = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.open = True
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, commands: list[Unanswered]) -> None:
        """Write the commands at once; each future gets its reply or its error."""
        assert self._transport is not None and self.open
        if not self._unanswered:
            self._progress_at = self._loop.time()
            if self._watchdog is None:
                self._watchdog = self._loop.call_at(
                    self._progress_at + self._timeout_s, self._check_progress
                )
        self._unanswered.extend(commands)
        self._transport.write(b"".join(packed for packed, _, _ in commands))

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        self._progress_at = self._loop.time()
        unanswered = self._unanswered
        try:
            while (reply := self._reader.gets()) is not False:
                _, future, _ = unanswered.popleft()
                if future.done():  # its caller was cancelled: the reply is dropped
                    continue
                if isinstance(reply, hiredis.ReplyError):
                    future.set_exception(reply_error(str(reply)))
                else:
                    future.set_result(reply)
        except (hiredis.ProtocolError, UnicodeDecodeError, IndexError) as exc:
            self.fail(redis.exceptions.ResponseError(f"unreadable Redis reply: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        unanswered = list(self._unanswered)
        self._unanswered.clear()
        error = self._failure or redis.exceptions.ConnectionError(
            f"Redis closed the connection: {exc or 'end of stream'}"
        )
        self._on_lost(unanswered, error)

    def fail(self, error: Exception) -> None:
        """Close the connection; what it owed gets `error` (through on_lost)."""
        self._failure = error
        self.open = False
        if self._transport is not None:
            self._transport.abort()

    def _check_progress(self) -> None:
        self._watchdog = None
        if not self._unanswered or not self.open:
            return
        overdue_at = self._progress_at + self._timeout_s
        if self._loop.time() >= overdue_at:
            self.fail(redis.exceptions.TimeoutError(f"no reply from Redis in {self._timeout_s} s"))
        else:
            self._watchdog = self._loop.call_at(overdue_at, self._check_progress)


async def open_connection(
    client: aioredis.Redis, on_lost: Callable[[list[Unanswered], Exception], None]
) -> RespConnection:
    """A connection to the client's server, with its credentials and database selected.
    Raises redis.exceptions.ConnectionError (or TimeoutError) when it cannot be opened."""
    pool = client.connection_pool
    settings = pool.connection_class(**pool.connection_kwargs)  # parses, does not connect
    timeout_s = settings.socket_timeout or 5.0
    loop = asyncio.get_running_loop()

    def protocol() -> RespConnection:
        return RespConnection(timeout_s, on_lost)

    where = _address(settings)
    try:
        async with asyncio.timeout(settings.socket_connect_timeout or timeout_s):
            if isinstance(settings, UnixDomainSocketConnection):
                _, connection = await loop.create_unix_connection(protocol, settings.path)
            else:
                assert isinstance(settings, Connection), settings
                tls: ssl.SSLContext | None = None
                if isinstance(settings, SSLConnection):
                    tls = settings.ssl_context.get()
                _, connection = await loop.create_connection(
                    protocol, settings.host, settings.port, ssl=tls
                )
    except TimeoutError as exc:
        raise redis.exceptions.TimeoutError(f"Timeout connecting to {where}") from exc
    except OSError as exc:
        raise redis.exceptions.ConnectionError(f"Error connecting to {where}: {exc}") from exc
    try:
        await _handshake(connection, loop, settings.username, settings.password, int(settings.db))
    except BaseException:
        connection.fail(redis.exceptions.ConnectionError("handshake abandoned"))
        raise
    return connection


async def _handshake(
    connection: RespConnection,
    loop: asyncio.AbstractEventLoop,
    username: str | None,
    password: str | None,
    db: int,
) -> None:
    commands: list[tuple[Any, ...]] = []
    if password:
        commands.append(("AUTH", username, password) if username else ("AUTH", password))
    if db:
        commands.append(("SELECT", db))
    sent: list[Unanswered] = [(hiredis.pack_command(c), loop.create_future(), 0) for c in commands]
    if sent:
        connection.send(sent)
        await asyncio.gather(*(reply for _, reply, _ in sent))


def _address(settings: aioredis.connection.AbstractConnection) -> str:
    if isinstance(settings, UnixDomainSocketConnection):
        return str(settings.path)
    return f"{getattr(settings, 'host', '?')}:{getattr(settings, 'port', '?')}"
