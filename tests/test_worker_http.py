"""The lean worker client against raw sockets: it keeps connections alive and never reuses
one it cannot trust, reads every kind of body framing, and refuses what it cannot read."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from inference import worker_http
from inference.worker_http import ProtocolError

pytestmark = pytest.mark.unit

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def answer(body: bytes, status: str = "200 OK", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status.encode(),
        len(body),
        extra,
        body,
    )


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request's head and body (Content-Length framed, as the client sends)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head, await reader.readexactly(length)


class KeepAliveWorker:
    """Answers every request on a connection with `reply(body)`, and counts connections."""

    def __init__(self, reply: Callable[[bytes], bytes]) -> None:
        self.reply = reply
        self.connections = 0

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        while True:
            try:
                _, body = await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(self.reply(body))


async def serving(handler: Handler, scenario: Callable[[str], Awaitable[Any]]) -> Any:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await scenario(f"http://127.0.0.1:{port}")
    finally:
        worker_http.close_pool()
        server.close()


def post(url: str, body: bytes = b"{}", **kwargs: Any) -> Awaitable[worker_http.WorkerResponse]:
    return worker_http.post(url, "/v1/x", body, kwargs.get("headers"), connect_timeout=2)


def test_sequential_requests_share_one_kept_alive_connection():
    worker = KeepAliveWorker(lambda body: answer(b"echo " + body))

    async def scenario(url: str) -> list[bytes]:
        bodies = []
        for n in range(3):
            response = await post(url, b'{"n": %d}' % n)
            bodies.append(await response.read_all(1000))
        return bodies

    assert asyncio.run(serving(worker, scenario)) == [
        b'echo {"n": 0}',
        b'echo {"n": 1}',
        b'echo {"n": 2}',
    ]
    assert worker.connections == 1


def test_a_connection_the_worker_closed_while_idle_is_replaced():
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(answer(b"once"))  # keep-alive by HTTP/1.1's default, then closed
        await writer.drain()
        writer.close()

    async def scenario(url: str) -> list[bytes]:
        first = await (await post(url)).read_all(100)
        await asyncio.sleep(0.1)  # the close reaches the pool
        second = await (await post(url)).read_all(100)
        return [first, second]

    assert asyncio.run(serving(handler, scenario)) == [b"once", b"once"]
    assert connections == 2


def test_a_chunked_stream_arrives_piece_by_piece_and_its_connection_is_kept():
    connections = 0
    go_on = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
            await go_on.wait()
            writer.write(chunk(b"data: [DONE]\n\n"))
            await asyncio.sleep(0.05)  # the terminator after the caller stopped reading
            writer.write(b"0\r\n\r\n")

    async def scenario(url: str) -> list[bytes]:
        response = await post(url)
        first = await response.read()
        go_on.set()
        last = await response.read()
        response.release()  # before the terminator: kept once it arrives
        await asyncio.sleep(0.2)
        again = await post(url)
        await again.read()
        again.close()
        return [first, last]

    assert asyncio.run(serving(handler, scenario)) == [b"data: 1\n\n", b"data: [DONE]\n\n"]
    assert connections == 1


def test_a_body_that_runs_to_the_connections_end_is_read_whole_and_not_reused():
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\npart one, ")
        await writer.drain()
        writer.write(b"part two")
        writer.close()

    async def scenario(url: str) -> list[bytes]:
        return [await (await post(url)).read_all(100) for _ in range(2)]

    assert asyncio.run(serving(handler, scenario)) == [b"part one, part two"] * 2
    assert connections == 2


def test_a_body_larger_than_the_read_buffer_arrives_whole():
    big = bytes(range(256)) * (3 * worker_http.PAUSE_READING_AT // 256)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer(big))
        await writer.drain()

    async def scenario(url: str) -> bytes:
        response = await post(url)
        await asyncio.sleep(0.3)  # let the worker fill the buffer: reading pauses
        return await response.read_all(len(big))

    assert asyncio.run(serving(handler, scenario)) == big


def test_an_answer_over_the_callers_limit_is_refused_and_its_connection_closed():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer(b"x" * 5000))

    async def scenario(url: str) -> Any:
        response = await post(url)
        try:
            await response.read_all(4096)
        except ProtocolError as exc:
            return exc, worker_http._pool().idle

    error, idle = asyncio.run(serving(handler, scenario))
    assert "over 4096 bytes" in str(error)
    assert not any(idle.values())


def test_a_stream_cut_mid_body_fails_its_reader():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(CHUNKED_HEAD + chunk(b"data: 1\n\n"))
        await writer.drain()
        writer.close()

    async def scenario(url: str) -> Any:
        response = await post(url)
        first = await response.read()
        with pytest.raises(ConnectionError, match="closed the connection"):
            await response.read()
        return first

    assert asyncio.run(serving(handler, scenario)) == b"data: 1\n\n"


def test_an_answer_that_is_not_http_is_a_protocol_error():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    async def scenario(url: str) -> Exception | None:
        try:
            await post(url)
        except ProtocolError as exc:
            return exc
        return None

    assert isinstance(asyncio.run(serving(handler, scenario)), ProtocolError)


def test_a_header_that_would_add_lines_to_the_request_is_refused_before_connecting():
    requests = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        requests += 1

    async def scenario(url: str) -> None:
        with pytest.raises(ValueError, match="would split the request"):
            await post(url, headers={"Authorization": "Bearer k\r\nX-Team: other"})

    asyncio.run(serving(handler, scenario))
    assert requests == 0


def test_the_request_carries_the_url_prefix_host_and_headers():
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, body = await read_request(reader)
        seen.extend([head, body])
        writer.write(answer(b"{}"))

    async def scenario(url: str) -> None:
        response = await worker_http.post(
            f"{url}/proxy", "/v1/chat", b'{"a": 1}', {"Authorization": "Bearer k"}, 2
        )
        await response.read_all(10)

    asyncio.run(serving(handler, scenario))
    head, body = seen
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /proxy/v1/chat HTTP/1.1"
    assert b"Authorization: Bearer k" in lines
    assert any(line.startswith(b"Host: 127.0.0.1:") for line in lines)
    assert body == b'{"a": 1}'


def test_a_refused_connection_is_a_connection_error():
    async def scenario() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(ConnectionError):
            await post(f"http://127.0.0.1:{port}")

    asyncio.run(scenario())


def test_closing_an_answer_already_released_leaves_the_pooled_connection_alone():
    worker = KeepAliveWorker(lambda body: answer(b"ok"))

    async def scenario(url: str) -> bytes:
        first = await post(url)
        await first.read_all(10)  # released: its connection is back in the pool
        first.close()  # e.g. an error path's cleanup: must not close the pooled connection
        second = await post(url)
        return await second.read_all(10)

    assert asyncio.run(serving(worker, scenario)) == b"ok"
    assert worker.connections == 1
