"""A gateway process's graceful drain: SIGTERM (or Ctrl-C) stops it taking new work, lets
what is in flight finish within GATEWAY_DRAIN_TIMEOUT_S, then lets uvicorn exit.

Why a signal hook and not uvicorn's own shutdown: on SIGTERM uvicorn closes its listening
sockets, calls `shutdown()` on every connection, waits up to `--timeout-graceful-shutdown`
for them to close, cancels what is left, and only then sends the app `lifespan.shutdown`.
For HTTP, `shutdown()` is already graceful (an idle keep-alive connection is closed, a busy
one closes after its response). For a WebSocket it is not: every uvicorn WebSocket
protocol (websockets, websockets-sansio, wsproto) sends close code 1012 at once and hands
the app `websocket.disconnect`, so a chat reply is cut mid-stream, and the app hears of the
shutdown only after its sockets are gone (Channels' consumer sees nothing but
`disconnect(1012)`; lifespan shutdown comes later still). No ASGI message announces a
shutdown beforehand, so the only point early enough is the signal itself.

So at lifespan startup (gateway/drain_asgi.py), in uvicorn's main thread and event loop,
`Drain.install()` puts a handler in front of uvicorn's own for SIGTERM and SIGINT. On the
first signal it:
1. marks the process draining (`drain.draining`): /readyz answers 503 (gateway/health.py),
   an HTTP request that still reaches it is refused with 503 service_unavailable
   (gateway/drain_asgi.py), a chat socket that still connects is told and closed;
2. does uvicorn's HTTP half of the shutdown at once: closes the listening sockets (a new
   connection is refused, or taken by a sibling worker sharing the socket) and calls
   `shutdown()` on the HTTP connections only; in-flight requests and SSE streams run on;
3. asks every open chat socket to drain (`DrainableSocket.drain()`, gateway/chat/
   consumers.py): an idle socket is told the server is restarting and closed with 1012 at
   once; one with a reply streaming lets it finish, then does the same;
4. when every socket has closed, or shortly before the deadline (`STOP_MARGIN_S`, when a
   reply still streaming is stopped as a client's `stop` would: it gets its `stopped`
   event and is billed for what was made), hands the signal to uvicorn with what is left
   of the timeout as its graceful-shutdown timeout, so in-flight HTTP gets until the same
   deadline. uvicorn then does the rest as before and exits.

At that same moment an SSE stream still running ends with an error chunk, and a chat or
text completion still waiting for its reply or its first chunk (`unless_stopped`) is
stopped and answered 503 with Retry-After, as a request that reaches a draining process
is: without it, uvicorn's deadline would answer it a plain-text 500.

A second SIGTERM while draining changes nothing (uvicorn's multi-worker parent passes one
on to each worker, and `make run`'s supervisor signals the whole process group); a second
SIGINT (Ctrl-C again) ends the drain at once. Under another server (daphne), without
lifespan, or off the main thread, no hook is installed and SIGTERM behaves as the server
makes it.
"""

import asyncio
import logging
import signal
import weakref
from collections.abc import Coroutine
from types import FrameType
from typing import Any, Protocol, TypeVar

DEFAULT_TIMEOUT_S = 20.0
# A reply still streaming this long before the deadline is stopped, so that it can send its
# `stopped` event, settle and close before uvicorn cancels what is left.
STOP_MARGIN_S = 2.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)

logger = logging.getLogger(__name__)
T = TypeVar("T")


class StoppedForShutdown(Exception):
    """The drain's deadline came while the request waited: the client is told to retry."""


class DrainableSocket(Protocol):
    async def drain(self) -> None:
        """Let the reply in progress (if any) end, tell the client, close with 1012."""

    def stop_reply(self) -> None:
        """The deadline is near: stop the reply in progress now; drain() then closes."""


class Drain:
    """The process's drain: one per process (`drain` below)."""

    def __init__(self) -> None:
        self.draining = False
        # Set shortly before the deadline (STOP_MARGIN_S): an SSE stream still running
        # ends itself with an error chunk (gateway/api/views.py) rather than be cut.
        self.stopping_streams = False
        self._sockets: weakref.WeakSet[DrainableSocket] = weakref.WeakSet()
        # Requests waiting in `unless_stopped`, and those of them the drain has stopped.
        self._waiting: set[asyncio.Task[Any]] = set()
        self._stopped: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        self._server: Any = None  # the uvicorn.Server whose signal handlers we stand before
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}  # signal.getsignal()'s: a callable, or not
        self._timeout_s = DEFAULT_TIMEOUT_S
        self._signalled: int | None = None
        self._deadline = 0.0  # loop time
        self._task: asyncio.Task[None] | None = None
        self._handed_over = False

    def add(self, socket: DrainableSocket) -> bool:
        """Count an open chat socket in; True if the process is already draining (the
        socket must then drain itself: the drain only asks those open when it began)."""
        self._sockets.add(socket)
        return self.draining

    def discard(self, socket: DrainableSocket) -> None:
        self._sockets.discard(socket)

    async def unless_stopped(self, work: Coroutine[Any, Any, T]) -> T:
        """`work` awaited in this task, unless the drain stops streams first (shortly
        before its deadline): then `work` is cancelled (as when its client leaves, so the
        worker stops) and StoppedForShutdown raised."""
        if self.stopping_streams:
            work.close()
            raise StoppedForShutdown
        task = asyncio.current_task()
        assert task is not None, "a coroutine awaited in a task"
        self._waiting.add(task)
        try:
            return await work
        except asyncio.CancelledError:
            if task not in self._stopped:
                raise  # its client left, or the server is cancelling everything
            if task.uncancel() > 0:
                raise  # cancelled by another too (its client left): theirs to handle
            raise StoppedForShutdown from None  # this cancel was ours, and is answered here
        finally:
            self._waiting.discard(task)
            self._stopped.discard(task)

    def install(self, timeout_s: float) -> bool:
        """Stand before uvicorn's SIGTERM and SIGINT handlers; False (and nothing changed)
        unless the process is served by uvicorn and this runs in its main thread."""
        import uvicorn

        handler = signal.getsignal(signal.SIGTERM)
        server = getattr(handler, "__self__", None)
        if not isinstance(server, uvicorn.Server):
            logger.info("not under uvicorn: SIGTERM is the server's own shutdown, no drain")
            return False
        previous: dict[int, Any] = {signum: signal.getsignal(signum) for signum in SIGNALS}
        try:
            for signum in SIGNALS:
                signal.signal(signum, self._on_signal)
        except ValueError:  # not the main thread
            return False
        self._previous = previous
        self._server, self._timeout_s = server, timeout_s
        self._loop = asyncio.get_running_loop()
        return True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """In the main thread, between two bytecodes of whatever runs: only schedule."""
        assert self._loop is not None
        if self._signalled is None:
            self._signalled = signum
            self._loop.call_soon_threadsafe(self._begin)
        elif signum == signal.SIGINT:
            self._loop.call_soon_threadsafe(self._cut_short)

    def _begin(self) -> None:
        assert self._loop is not None
        self.draining = True
        logger.warning(
            "%s: draining (up to %g s): no new requests; replies in flight finish",
            signal.Signals(self._signalled or signal.SIGTERM).name,
            self._timeout_s,
        )
        _stop_taking_new_work(self._server)
        self._deadline = self._loop.time() + self._timeout_s
        self._loop.call_at(self._stop_at(), self._stop_streams)
        self._task = self._loop.create_task(self._drain_sockets(list(self._sockets)))
        self._task.add_done_callback(self._hand_over)  # however it ends, cancelled too

    async def _drain_sockets(self, sockets: list[DrainableSocket]) -> None:
        if not sockets:
            return
        loop = asyncio.get_running_loop()
        tasks = {asyncio.create_task(socket.drain()): socket for socket in sockets}
        _, going = await asyncio.wait(tasks, timeout=max(self._stop_at() - loop.time(), 0))
        if going:
            logger.warning("drain: stopping %d chat replies still streaming", len(going))
            for task in going:
                tasks[task].stop_reply()
            await asyncio.wait(going, timeout=max(self._deadline - loop.time(), 0))
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                logger.debug("a chat socket's drain failed: %r", task.exception())

    def _stop_at(self) -> float:
        return self._deadline - min(STOP_MARGIN_S, self._timeout_s / 4)

    def _stop_streams(self) -> None:
        if self.stopping_streams:
            return  # once (a second Ctrl-C after the deadline's stop, or before it)
        self.stopping_streams = True
        if self._waiting:
            logger.warning("drain: stopping %d requests still waiting", len(self._waiting))
        for task in self._waiting:
            self._stopped.add(task)
            task.cancel()

    def _cut_short(self) -> None:
        assert self._loop is not None
        logger.warning("SIGINT again: ending the drain now")
        self._deadline = self._loop.time()
        self._stop_streams()
        if self._task is not None:
            self._task.cancel()  # its done callback hands over, with no time left

    def _hand_over(self, task: "asyncio.Task[None]") -> None:
        """uvicorn's own shutdown from here, within what is left of the drain timeout."""
        assert self._loop is not None
        if self._handed_over:
            return
        self._handed_over = True
        if not task.cancelled() and task.exception() is not None:
            logger.error("drain failed; shutting down", exc_info=task.exception())
        remaining_s = max(self._deadline - self._loop.time(), 0.0)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # a further Ctrl-C is uvicorn's: force quit
        # uvicorn types it int (its command line takes whole seconds); it is only ever
        # passed to asyncio.timeout(), which takes any number.
        self._server.config.timeout_graceful_shutdown = remaining_s
        signum = self._signalled or signal.SIGTERM
        handler = self._previous.get(signum)
        if callable(handler):
            handler(signum, None)


def _stop_taking_new_work(server: Any) -> None:
    """uvicorn's shutdown, HTTP only: stop listening, close idle keep-alive connections and
    have busy ones close after their response. WebSockets (another protocol class once
    upgraded) are left to drain. Reaches into uvicorn (`servers`, `server_state`,
    `config.http_protocol_class`, as its own Server.shutdown() does); if those ever move,
    only this step is skipped: requests that still arrive are refused with 503 anyway."""
    try:
        for listener in server.servers:
            listener.close()
        http = server.config.http_protocol_class
        for connection in list(server.server_state.connections):
            if isinstance(connection, http):
                connection.shutdown()
    except (AttributeError, TypeError) as exc:
        logger.warning("drain: could not stop uvicorn taking new connections: %r", exc)


drain = Drain()
