"""The chaos run's clients: open-loop arrivals over HTTP and the WebSocket, each request
recorded as an `Attempt` (bench/chaos/history.py) with everything the checks need.

Why open loop: a closed loop slows down when the platform does, so a fault would quietly
lower the load it is measured under. Arrivals here are Poisson at a fixed rate whatever
happens. Each one is a team (by its share), a transport (HTTP or the socket), streaming or
not (the socket always streams), sampled (temperature 1, a unique prompt: never cached)
or deterministic (temperature 0, one of a few questions per team: exact-cache hits and
coalesced generations). Every request carries the client's own id (x-client-request-id
over HTTP) and records the gateway's (x-request-id, the socket events' `id`), the status,
the error object as received, the usage it was told, and how the stream ended.

What stands in for a load balancer: a client connects to the gateways in turn, and when
one refuses the connection (nothing was sent: it is stopping or not started yet) it
connects to the other, as a balancer retries a refused connection. Nothing else is
retried: whatever else a gateway answers is what the client got.

Hangs: a stream that sends nothing for `idle_timeout_s` (the gateway's own upstream idle
timeout plus a margin), or whose first byte takes longer than `first_byte_timeout_s` (the
queue timeout plus the first-token timeout plus a margin), is recorded as a hang and
abandoned.
"""

import asyncio
import json
import random
import sys
import time
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.chaos.checks import is_openai_error, status_of
from bench.chaos.history import (
    BROKEN,
    DISCONNECTED,
    ERROR_CHUNK,
    HANG,
    MALFORMED,
    OK,
    REFUSED,
    UNREACHABLE,
    Attempt,
    IdleClose,
)

QUESTIONS = [
    "What is the capital of France?",
    "How do I reverse a list in Python?",
    "Explain what a mutex is in one paragraph.",
    "What does HTTP status 429 mean?",
    "Name three sorting algorithms.",
    "What is the boiling point of water at sea level?",
]


@dataclass(frozen=True)
class LoadSetup:
    model: str
    rate_per_s: float
    duration_s: float
    max_tokens: int
    ws_share: float = 0.25
    stream_share: float = 0.6  # of HTTP requests; the socket always streams
    deterministic_share: float = 0.3
    idle_sockets: int = 2
    idle_s: float = 150.0  # how long an idle socket waits between its messages
    idle_timeout_s: float = 45.0
    first_byte_timeout_s: float = 100.0
    seed: int = 0


@dataclass(frozen=True)
class Client:
    """A team as the load sees it."""

    team: str
    key: str
    share: float


class Gateways:
    """The gateways' base URLs; each new connection starts at the next one."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.turn = 0

    def order(self, first: int | None = None) -> list[int]:
        if first is None:
            first = self.turn
            self.turn += 1
        return [(first + offset) % len(self.urls) for offset in range(len(self.urls))]


@dataclass
class Recorder:
    started_at: float
    attempts: list[Attempt] = field(default_factory=list)
    idle_closes: list[IdleClose] = field(default_factory=list)

    def new(
        self, team: str, transport: str, stream: bool, temperature: float, idle: bool = False
    ) -> Attempt:
        attempt = Attempt(
            client_id=f"c{len(self.attempts):06d}",
            team=team,
            transport=transport,
            stream=stream,
            temperature=temperature,
            sent_at=time.time(),
            idle_socket=idle,
        )
        self.attempts.append(attempt)
        return attempt

    def progress(self, since: float) -> str:
        recent = [a for a in self.attempts if a.sent_at >= since and a.ended_at]
        counts = Counter(a.outcome if a.code is None else a.code for a in recent)
        shown = ", ".join(f"{k} {v}" for k, v in counts.most_common())
        return f"t={time.time() - self.started_at:5.0f} s: {len(recent)} ended ({shown})"


def messages_for(attempt: Attempt, team: str, rng: random.Random) -> list[dict[str, str]]:
    if attempt.temperature == 0:
        return [{"role": "user", "content": f"{rng.choice(QUESTIONS)} ({team})"}]
    question = rng.choice(QUESTIONS)
    return [{"role": "user", "content": f"Request {attempt.client_id}: {question}"}]


def _cache_of(headers: Any) -> str | None:
    if headers.get("x-sluice-coalesced") == "true":
        return "coalesced"
    value = headers.get("x-sluice-cache")
    return str(value) if value is not None else None


def _take_error(attempt: Attempt, body: Any, outcome: str, status: int | None) -> None:
    attempt.outcome = outcome
    attempt.shape_ok = is_openai_error(body)
    error = body.get("error") if isinstance(body, dict) else None
    attempt.error = error if isinstance(error, dict) else {"raw": str(body)[:300]}
    attempt.status = status if status is not None else status_of(attempt.error)


def _take_usage(attempt: Attempt, usage: Any) -> None:
    if isinstance(usage, dict):
        attempt.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        attempt.completion_tokens = int(usage.get("completion_tokens") or 0)


async def _read_sse(response: aiohttp.ClientResponse, attempt: Attempt, idle_s: float) -> None:
    while True:
        try:
            raw = await asyncio.wait_for(response.content.readline(), idle_s)
        except TimeoutError:
            attempt.outcome = HANG
            attempt.detail = f"nothing for {idle_s:g} s after {attempt.content_chunks} chunks"
            return
        if not raw:
            attempt.outcome = BROKEN
            attempt.detail = "the stream ended without [DONE] or an error chunk"
            return
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            attempt.outcome = OK
            return
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError:
            attempt.outcome, attempt.detail = MALFORMED, f"chunk not JSON: {payload[:200]!r}"
            return
        if "error" in chunk:
            _take_error(attempt, chunk, ERROR_CHUNK, None)
            return
        if chunk.get("usage"):
            _take_usage(attempt, chunk["usage"])
        if any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or []):
            attempt.content_chunks += 1


async def _http_once(
    session: aiohttp.ClientSession,
    url: str,
    client: Client,
    attempt: Attempt,
    payload: dict[str, Any],
    setup: LoadSetup,
) -> None:
    """One try on one gateway; raises ClientConnectorError if it refused the connection."""
    headers = {"Authorization": f"Bearer {client.key}", "x-client-request-id": attempt.client_id}
    try:
        async with asyncio.timeout(setup.first_byte_timeout_s):
            response = await session.post(
                f"{url}/v1/chat/completions", json=payload, headers=headers
            )
    except TimeoutError:
        attempt.outcome = HANG
        attempt.detail = f"no answer within {setup.first_byte_timeout_s:g} s"
        return
    except aiohttp.ClientConnectorError:
        raise
    except (aiohttp.ClientError, OSError) as exc:
        attempt.outcome, attempt.detail = DISCONNECTED, f"{type(exc).__name__}: {exc}"
        return
    try:
        attempt.status = response.status
        attempt.request_id = response.headers.get("x-request-id")
        attempt.cache = _cache_of(response.headers)
        if response.status != 200 or not attempt.stream:
            try:
                raw = await asyncio.wait_for(response.read(), setup.first_byte_timeout_s)
            except TimeoutError:
                attempt.outcome, attempt.detail = HANG, "the body did not arrive"
                return
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError("not an object")
            except ValueError:  # JSONDecodeError and UnicodeDecodeError too
                attempt.outcome = MALFORMED
                attempt.shape_ok = False
                attempt.detail = f"HTTP {response.status}, not JSON: {raw[:200]!r}"
                return
            if response.status != 200:
                _take_error(attempt, body, REFUSED, response.status)
                return
            _take_usage(attempt, body.get("usage"))
            attempt.outcome = OK
            return
        await _read_sse(response, attempt, setup.idle_timeout_s)
    except (aiohttp.ClientError, OSError) as exc:
        attempt.outcome, attempt.detail = BROKEN, f"{type(exc).__name__}: {exc}"
    finally:
        response.release()


async def http_request(
    session: aiohttp.ClientSession,
    gateways: Gateways,
    client: Client,
    attempt: Attempt,
    payload: dict[str, Any],
    setup: LoadSetup,
    first: int | None = None,
) -> None:
    try:
        for turn, position in enumerate(gateways.order(first)):
            attempt.gateway = position
            try:
                await _http_once(session, gateways.urls[position], client, attempt, payload, setup)
                return
            except aiohttp.ClientConnectorError as exc:
                attempt.failover = True
                if turn == len(gateways.urls) - 1:
                    attempt.outcome, attempt.detail = UNREACHABLE, str(exc)
    finally:
        attempt.ended_at = time.time()


class Socket:
    """One open, authenticated chat socket of a team. While it waits in the pool it is
    read (the `quota` event after a reply, or the server closing it), so a socket the
    server closed while idle is known before a chat is sent on it, and recorded."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, gateway: int, team: str) -> None:
        self.ws = ws
        self.gateway = gateway
        self.team = team
        self.watcher: asyncio.Task[None] | None = None

    @property
    def closed(self) -> bool:
        return self.ws.closed

    def park(self, recorder: "Recorder") -> None:
        self.watcher = asyncio.create_task(self._watch(recorder))

    async def _watch(self, recorder: "Recorder") -> None:
        while True:
            event = await _next_event(self.ws, 3600)
            if isinstance(event, str):
                recorder.idle_closes.append(
                    IdleClose(time.time(), self.gateway, self.ws.close_code)
                )
                return

    async def unpark(self) -> bool:
        """Stop reading it; True if it is still open."""
        if self.watcher is not None:
            if not self.watcher.done():
                self.watcher.cancel()
                with suppress(asyncio.CancelledError):
                    await self.watcher
            self.watcher = None
        return not self.ws.closed

    async def close(self) -> None:
        if self.watcher is not None:
            await self.unpark()
        if not self.ws.closed:
            await self.ws.close()


async def _next_event(
    ws: aiohttp.ClientWebSocketResponse, timeout_s: float
) -> dict[str, Any] | str | None:
    """The next JSON event; a string saying how the socket closed; None on a timeout.
    The deadline is around receive(), not its `timeout`: aiohttp restarts that one at
    every ping the server sends (uvicorn pings every 20 s), so it would never expire."""
    try:
        async with asyncio.timeout(timeout_s):
            message = await ws.receive()
    except TimeoutError:
        return None
    if message.type == aiohttp.WSMsgType.TEXT:
        try:
            event = json.loads(message.data)
        except json.JSONDecodeError:
            return {"type": "malformed", "raw": str(message.data)[:200]}
        return event if isinstance(event, dict) else {"type": "malformed", "raw": str(event)}
    return f"{message.type.name} code {ws.close_code}"


async def open_socket(
    session: aiohttp.ClientSession,
    gateways: Gateways,
    client: Client,
    attempt: Attempt,
    setup: LoadSetup,
    first: int | None = None,
) -> Socket | None:
    """Connect (to the other gateway if the first refuses) and authenticate; None, with
    the attempt's outcome set, if that failed."""
    for turn, position in enumerate(gateways.order(first)):
        url = gateways.urls[position]
        attempt.gateway = position
        try:
            async with asyncio.timeout(setup.first_byte_timeout_s):
                ws = await session.ws_connect(
                    url.replace("http://", "ws://") + "/ws/chat/",
                    headers={"Origin": url},
                    heartbeat=None,
                    timeout=aiohttp.ClientWSTimeout(ws_close=5),
                )
            break
        except TimeoutError:
            attempt.outcome, attempt.detail = HANG, "no answer to the handshake"
            return None
        except aiohttp.ClientConnectorError as exc:
            attempt.failover = True
            if turn == len(gateways.urls) - 1:
                attempt.outcome, attempt.detail = UNREACHABLE, str(exc)
                return None
        except aiohttp.WSServerHandshakeError as exc:
            attempt.outcome, attempt.status, attempt.shape_ok = REFUSED, exc.status, False
            attempt.detail = f"handshake refused: {exc.status} {exc.message}"
            return None
        except (aiohttp.ClientError, OSError) as exc:
            attempt.outcome, attempt.detail = DISCONNECTED, f"{type(exc).__name__}: {exc}"
            return None
    try:
        await ws.send_json({"type": "auth", "api_key": client.key})
    except (aiohttp.ClientError, ConnectionResetError, RuntimeError) as exc:
        attempt.outcome, attempt.detail = DISCONNECTED, f"auth not sent: {exc}"
        await ws.close()
        return None
    while True:
        event = await _next_event(ws, setup.first_byte_timeout_s)
        if isinstance(event, dict) and event.get("type") == "ready":
            return Socket(ws, attempt.gateway, client.team)
        if isinstance(event, dict) and event.get("type") == "error":
            _take_error(attempt, event, REFUSED, None)
            attempt.request_id = event.get("id")
            attempt.detail = "refused at auth"
        elif isinstance(event, dict):
            continue
        elif event is None:
            attempt.outcome, attempt.detail = HANG, "no answer to auth"
        else:
            attempt.outcome, attempt.detail = DISCONNECTED, f"closed at auth: {event}"
        await ws.close()
        return None


async def chat_on(socket: Socket, attempt: Attempt, body: dict[str, Any], setup: LoadSetup) -> None:
    """One chat message on an open socket, read to its end (done, error, close, timeout)."""
    attempt.gateway = socket.gateway
    try:
        await socket.ws.send_json({"type": "chat", **body})
    except (aiohttp.ClientError, ConnectionResetError, RuntimeError) as exc:
        attempt.outcome, attempt.detail = DISCONNECTED, f"send failed: {exc}"
        return
    while True:
        started = attempt.content_chunks > 0
        timeout = setup.idle_timeout_s if started else setup.first_byte_timeout_s
        event = await _next_event(socket.ws, timeout)
        if event is None:
            attempt.outcome = HANG
            attempt.detail = f"nothing for {timeout:g} s after {attempt.content_chunks} deltas"
            return
        if isinstance(event, str):
            attempt.outcome = BROKEN if started or attempt.request_id else DISCONNECTED
            attempt.detail = f"socket closed mid-reply: {event}"
            return
        kind = event.get("type")
        if kind in ("delta", "done", "stopped", "error") and event.get("id"):
            attempt.request_id = str(event["id"])
        if kind == "delta":
            attempt.content_chunks += 1
        elif kind == "done":
            attempt.outcome, attempt.status = OK, 200
            attempt.cache = event.get("cache")
            _take_usage(attempt, event.get("usage"))
            return
        elif kind == "stopped":
            attempt.outcome, attempt.detail = BROKEN, "stopped, although the client sent no stop"
            _take_usage(attempt, event.get("usage"))
            return
        elif kind == "error":
            _take_error(attempt, event, ERROR_CHUNK if started else REFUSED, None)
            return
        elif kind == "malformed":
            attempt.outcome, attempt.shape_ok = MALFORMED, False
            attempt.detail = f"not JSON: {event.get('raw')}"
            return


class SocketPool:
    """Idle authenticated sockets per team: a socket arrival takes one or opens one."""

    def __init__(
        self, session: aiohttp.ClientSession, gateways: Gateways, recorder: Recorder
    ) -> None:
        self.session = session
        self.gateways = gateways
        self.recorder = recorder
        self.idle: dict[str, list[Socket]] = {}

    async def chat(
        self, client: Client, attempt: Attempt, body: dict[str, Any], setup: LoadSetup
    ) -> None:
        try:
            socket = None
            sockets = self.idle.setdefault(client.team, [])
            while sockets and socket is None:
                candidate = sockets.pop()
                socket = candidate if await candidate.unpark() else None
            if socket is None:
                socket = await open_socket(self.session, self.gateways, client, attempt, setup)
                if socket is None:
                    return
            await chat_on(socket, attempt, body, setup)
            if attempt.outcome in (OK, REFUSED, ERROR_CHUNK) and not socket.closed:
                socket.park(self.recorder)
                sockets.append(socket)
            else:
                await socket.close()
        finally:
            attempt.ended_at = time.time()

    async def close(self) -> None:
        for sockets in self.idle.values():
            for socket in sockets:
                await socket.close()


def payload_for(
    attempt: Attempt, client: Client, setup: LoadSetup, rng: random.Random
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": setup.model,
        "messages": messages_for(attempt, client.team, rng),
        "max_tokens": setup.max_tokens,
        "ignore_eos": True,
        "temperature": attempt.temperature,
    }
    if attempt.transport == "http":
        body["stream"] = attempt.stream
        if attempt.stream:
            body["stream_options"] = {"include_usage": True}
    return body


async def idle_socket(
    number: int,
    session: aiohttp.ClientSession,
    gateways: Gateways,
    client: Client,
    setup: LoadSetup,
    recorder: Recorder,
    until: float,
) -> None:
    """A socket that sends a message every idle_s and is silent between them; a close by
    the server while it is idle is recorded, and it connects again."""
    rng = random.Random(f"idle-{number}")
    home = number % len(gateways.urls)
    socket: Socket | None = None
    try:
        while time.monotonic() < until:
            attempt = recorder.new(client.team, "ws", True, 1.0, idle=True)
            if socket is None or socket.closed:
                socket = await open_socket(session, gateways, client, attempt, setup, home)
                if socket is None:
                    attempt.ended_at = time.time()
                    await asyncio.sleep(1)
                    continue
            await chat_on(socket, attempt, payload_for(attempt, client, setup, rng), setup)
            attempt.ended_at = time.time()
            if attempt.outcome not in (OK, REFUSED, ERROR_CHUNK):
                await socket.close()
                continue
            wait_until = min(until, time.monotonic() + setup.idle_s)
            while socket is not None and (left := wait_until - time.monotonic()) > 0:
                event = await _next_event(socket.ws, left)
                if isinstance(event, str):
                    recorder.idle_closes.append(
                        IdleClose(time.time(), socket.gateway, socket.ws.close_code)
                    )
                    socket = None
    finally:
        if socket is not None:
            await socket.close()


async def drive(
    clients: list[Client],
    gateways: Gateways,
    setup: LoadSetup,
    recorder: Recorder,
    idle_client: Client,
) -> None:
    """Open-loop arrivals for setup.duration_s, then wait for every request to end."""
    rng = random.Random(setup.seed)
    connector = aiohttp.TCPConnector(limit=0, force_close=True)  # no reuse: no stale sockets
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout()) as http:
        pool = SocketPool(http, gateways, recorder)
        start = time.monotonic()
        until = start + setup.duration_s
        running: set[asyncio.Task[None]] = set()
        idlers = [
            asyncio.create_task(idle_socket(n, http, gateways, idle_client, setup, recorder, until))
            for n in range(setup.idle_sockets)
        ]
        next_at, shown_at = start, start
        weights = [client.share for client in clients]
        while (next_at := next_at + rng.expovariate(setup.rate_per_s)) < until:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            client = rng.choices(clients, weights)[0]
            websocket = rng.random() < setup.ws_share
            stream = websocket or rng.random() < setup.stream_share
            temperature = 0.0 if rng.random() < setup.deterministic_share else 1.0
            attempt = recorder.new(client.team, "ws" if websocket else "http", stream, temperature)
            body = payload_for(attempt, client, setup, rng)
            if websocket:
                task = asyncio.create_task(pool.chat(client, attempt, body, setup))
            else:
                task = asyncio.create_task(
                    http_request(http, gateways, client, attempt, body, setup)
                )
            running.add(task)
            task.add_done_callback(running.discard)
            if time.monotonic() - shown_at >= 10:
                print(recorder.progress(time.time() - 10), file=sys.stderr, flush=True)
                shown_at = time.monotonic()
        # Every request ends by its own timeouts; this bound only guards the generator.
        limit_s = setup.first_byte_timeout_s + setup.idle_timeout_s + 60
        tasks = [*running, *idlers]
        _, stuck = await asyncio.wait(tasks, timeout=limit_s) if tasks else (set(), set())
        for attempt in recorder.attempts:
            if not attempt.ended_at:
                attempt.detail = f"still running {limit_s:g} s after the load ended"
        for task in stuck:
            task.cancel()
        if stuck:
            await asyncio.wait(stuck, timeout=10)
        await pool.close()


async def until_served(
    gateways: Gateways, client: Client, setup: LoadSetup, recorder: Recorder, timeout_s: float = 60
) -> None:
    """Until each gateway answers a request (the scraper has the workers in rotation).
    These requests are in the history like any other: they are billed too."""
    rng = random.Random("probe")
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        for position in range(len(gateways.urls)):
            deadline = time.monotonic() + timeout_s
            while True:
                attempt = recorder.new(client.team, "http", False, 1.0)
                attempt.warmup = True
                body = payload_for(attempt, client, setup, rng)
                await http_request(http, gateways, client, attempt, body, setup, first=position)
                if attempt.outcome == OK:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gateway {position} did not serve: {attempt}")
                await asyncio.sleep(0.5)
