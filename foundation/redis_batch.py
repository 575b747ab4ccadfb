"""Redis commands issued in the same event-loop turn travel together, in one write.

Every request makes a few Redis calls (admission, billing, the cache), and with dozens of
requests in flight most of them are issued within the same turn of the event loop. Sent one
by one through redis-py, each costs about 85 us of CPU (pool checkout, a write, a read,
parsing); batched, they go out in one write at the end of the turn they were issued in
(`call_soon`), so at concurrency 1 a lone command is sent at once. Batches share one
pipelined connection per event loop (foundation/redis_pipe.py): packed by hiredis, replies
read in order as they arrive, about 4 to 5 us of CPU a command (bench.redis_batch).

Commands nothing waits for can wait in a background queue until a request of the loop has
called its worker (`in_background`): on a shared core they then run while that request
waits, instead of in the CPU burst of the request that issued them.

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

from foundation import worker_wait
from foundation.redis_pipe import RespConnection, Unanswered, open_connection

_Pending = tuple[tuple[Any, ...], "asyncio.Future[Any]"]


class CommandBatcher:
    """One per event loop and Redis client (a future belongs to the loop that made it).
    `client` stays for what is not batched (loading a script)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._pending: list[_Pending] = []
        self._flush_due = False  # a _flush is scheduled
        # in_background(): commands nothing waits for, sent when _background_due.
        self._background: list[_Pending] = []
        self._in_background = False
        self._background_due = False
        self._background_waits = False  # registered with worker_wait
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
        """execute() without awaiting: several commands of one caller, no task each. Inside
        in_background(), the command waits in the background queue."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        if self._in_background:
            self._background.append((command, reply))
            self._wait_for_the_background()
            return reply
        self._pending.append((command, reply))
        self._schedule_flush(loop)
        return reply

    @contextmanager
    def in_background(self) -> Iterator[None]:
        """Commands submitted inside (no await in between) are ones nothing waits for and
        nothing reads soon (a semantic lookup's sample for the threshold preview): they go
        out when a request of this loop has just called its worker
        (foundation/worker_wait.py), or worker_wait.DEADLINE_S after the first of them at
        the latest. Commands submitted outside meanwhile go ahead of them. Among themselves
        they keep their order."""
        self._in_background = True
        try:
            yield
        finally:
            self._in_background = False

    def _wait_for_the_background(self) -> None:
        if not self._background_waits:
            self._background_waits = True
            worker_wait.at_next_moment(self._background_moment)

    def _background_moment(self) -> None:
        self._background_waits = False
        if self._background and not self._background_due:
            self._background_due = True
            self._schedule_flush(asyncio.get_running_loop())

    def _schedule_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._flush_due:
            self._flush_due = True
            loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        queued, self._pending = self._pending, []
        if self._background_due:
            self._background_due = False
            queued, self._background = self._background + queued, []
        batch = [(command, reply) for command, reply in queued if not reply.cancelled()]
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
