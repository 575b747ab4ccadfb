"""Redis commands issued in the same event-loop turn travel together, in one write.

Every request makes a few Redis calls (admission, billing, the cache), and with dozens of
requests in flight most of them are issued within the same turn of the event loop. Sent one
by one through redis-py, each costs about 85 us of CPU (pool checkout, a write, a read,
parsing); batched, they go out in one write at the end of the turn they were issued in
(`call_soon`), so at concurrency 1 a lone command is sent at once. Batches share one
pipelined connection per event loop (foundation/redis_pipe.py): packed by hiredis, replies
read in order as they arrive, about 4 to 5 us of CPU a command (bench.redis_batch).

Each command keeps its own reply and its own error: a batch is not a transaction, and a
failing command fails only its caller. A caller cancelled before its batch is sent is left
out of it; one cancelled after has had its command run, as a plain call would. A command on
a connection that breaks before its reply (a Redis restart) is sent once more on a new one,
like redis-py's own retry (foundation/redis_clients.py): one that had run could run twice.
"""

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import hiredis
import redis.asyncio as aioredis
import redis.exceptions

from foundation.redis_pipe import RespConnection, Unanswered, open_connection

_Pending = tuple[tuple[Any, ...], "asyncio.Future[Any]"]


class CommandBatcher:
    """One per event loop and Redis client (a future belongs to the loop that made it).
    `client` stays for what is not batched (loading a script)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._pending: list[_Pending] = []
        self._flush_due = False  # a _flush is scheduled
        self._holding = False
        self._connection: RespConnection | None = None
        self._waiting: list[Unanswered] = []  # for the connection being opened
        self._connecting: asyncio.Task[None] | None = None
        # The Lua scripts loaded through this batcher (foundation/lua.py); forgotten with
        # the connection, which a restarted Redis (having forgotten them too) closes.
        self.scripts_loaded: set[str] = set()

    async def execute(self, *command: Any) -> Any:
        """One command, e.g. ("EVALSHA", sha, 2, key1, key2, arg); its reply or its error."""
        return await self.submit(*command)

    def submit(self, *command: Any) -> "asyncio.Future[Any]":
        """execute() without awaiting: several commands of one caller, no task each."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._pending.append((command, reply))
        if not self._flush_due and not self._holding:
            self._flush_due = True
            loop.call_soon(self._flush)
        return reply

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Commands submitted inside (no await in between) are queued but not sent on their
        own account: they go with the next command submitted outside, or at send_held().
        Whatever is submitted later still runs after them (the same queue, the same
        connection). For work that must be ordered before what follows but need not delay
        what the caller does next (a reply's cache store, sent once the reply is out: on a
        shared core, Redis woken first would run its scripts ahead of the reply)."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False

    def send_held(self) -> None:
        """Send what holding() queued, at the end of this event-loop turn."""
        if self._pending and not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        batch = [(command, reply) for command, reply in self._pending if not reply.cancelled()]
        self._pending = []
        if batch:
            self._send(batch)

    def _send(self, batch: list[_Pending]) -> None:
        commands: list[Unanswered] = []
        for command, reply in batch:
            try:
                commands.append((hiredis.pack_command(command), reply, 1))
            except TypeError as exc:  # an argument Redis cannot take (None, a list)
                reply.set_exception(redis.exceptions.DataError(f"{command[0]}: {exc}"))
        self._write(commands)

    def _write(self, commands: list[Unanswered]) -> None:
        connection = self._connection
        if connection is not None and connection.open:
            connection.send(commands)
            return
        self._waiting.extend(commands)
        if self._connecting is None:
            self._connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        try:
            self._connection = await open_connection(self.client, self._lost)
        except BaseException as exc:
            waiting, self._waiting = self._waiting, []
            error = exc if isinstance(exc, Exception) else redis.exceptions.ConnectionError()
            for _, reply, _ in waiting:
                if not reply.done():
                    reply.set_exception(error)
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            self._connecting = None
        waiting, self._waiting = self._waiting, []
        self._write([c for c in waiting if not c[1].done()])

    def _lost(self, unanswered: list[Unanswered], error: Exception) -> None:
        """A connection closed: what it owed a first time goes again on a new one, unless
        it was given up as hung (a timeout); the rest fail."""
        self.scripts_loaded.clear()
        again: list[Unanswered] = []
        for packed, reply, retries in unanswered:
            if reply.done():
                continue
            if retries and isinstance(error, redis.exceptions.ConnectionError):
                again.append((packed, reply, retries - 1))
            else:
                reply.set_exception(error)
        if again:
            self._write(again)


def may_go_unawaited(reply: "asyncio.Future[Any]") -> "asyncio.Future[Any]":
    """For a submitted command whose caller may drop it unawaited: its failure is retrieved
    here, not logged by asyncio as an exception nobody retrieved."""
    reply.add_done_callback(_retrieved)
    return reply


def _retrieved(reply: "asyncio.Future[Any]") -> None:
    if not reply.cancelled():
        reply.exception()


async def in_order(*handled: Awaitable[None] | None) -> None:
    """Await each (None: nothing to await) in turn: the outcomes of commands already in a
    batch, each of which logs its own failure."""
    for outcome in handled:
        if outcome is not None:
            await outcome


def batcher_for(
    registry: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CommandBatcher]",
    client: Callable[[], aioredis.Redis],
) -> CommandBatcher:
    loop = asyncio.get_running_loop()
    batcher = registry.get(loop)
    if batcher is None or batcher.client is not client():
        batcher = registry[loop] = CommandBatcher(client())
    return batcher
