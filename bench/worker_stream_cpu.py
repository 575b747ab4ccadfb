"""Measure the gateway's CPU per streamed chunk in its worker client (inference/client.py,
inference/worker_http.py): what every token of every reply costs before the pipeline
sees it, since the gateway streams from its workers even for a non-streamed request.

    .venv/bin/python -m bench.worker_stream_cpu [--chunks 64] [--streams 640] \
        [--concurrency 32] [--client-cpu 0] [--server-cpu 1]

Starts a fake worker in a child process (pinned to --server-cpu) that streams
`--chunks` SSE chunks 1 ms apart, as vLLM streams tokens, then streams `--streams`
completions from it through `stream_from_worker`, `--concurrency` at once, in this process
(pinned to --client-cpu). The figure is this process's CPU time per chunk read. Compare
two commits by running it in a worktree of each, alternately (the machines here vary by
2x from day to day).
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import time
from typing import Any

import django
import uvloop


def _serve(port: int, chunks: int, cpu: int) -> None:
    """A worker as vLLM's server (uvicorn) streams: one write per event, each a whole
    HTTP chunk, on kept-alive connections."""
    os.sched_setaffinity(0, {cpu})
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    def framed(event: bytes) -> bytes:
        return f"{len(event):x}\r\n".encode() + event + b"\r\n"

    events = []
    for index in range(chunks):
        choice = {"index": 0, "delta": {"content": f" token{index}"}, "finish_reason": None}
        chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "choices": [choice]}
        events.append(framed(b"data: " + json.dumps(chunk).encode() + b"\n\n"))
    last = framed(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    async def conversation(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while request := await reader.readuntil(b"\r\n\r\n"):
                length = next(
                    int(line.split(b":")[1])
                    for line in request.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                await reader.readexactly(length)
                writer.write(head)
                for event in events:
                    writer.write(event)
                    await asyncio.sleep(0.001)
                writer.write(last)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(conversation, "127.0.0.1", port)
        await server.serve_forever()

    uvloop.run(serve())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _measure(url: str, streams: int, concurrency: int) -> tuple[int, float]:
    from inference.client import stream_from_worker

    body: dict[str, Any] = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 64}
    slots = asyncio.Semaphore(concurrency)

    async def one() -> int:
        async with slots:
            return sum([1 async for _ in stream_from_worker(url, "fake", body)])

    await asyncio.gather(*(one() for _ in range(concurrency)))  # connections opened, warm
    started = time.process_time()
    read = sum(await asyncio.gather(*(one() for _ in range(streams))))
    return read, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--streams", type=int, default=640)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--client-cpu", type=int, default=0)
    parser.add_argument("--server-cpu", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    django.setup()
    port = _free_port()
    server = multiprocessing.Process(
        target=_serve, args=(port, args.chunks, args.server_cpu), daemon=True
    )
    server.start()
    try:
        for _ in range(100):  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        os.sched_setaffinity(0, {args.client_cpu})
        url = f"http://127.0.0.1:{port}"
        read, cpu_s = uvloop.run(_measure(url, args.streams, args.concurrency))
        per_chunk_us = cpu_s / read * 1e6
        print(f"{read} chunks in {args.streams} streams: {per_chunk_us:.2f} us of CPU a chunk")
    finally:
        server.terminate()
        server.join()


if __name__ == "__main__":
    main()
