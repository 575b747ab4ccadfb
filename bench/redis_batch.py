"""Measure the gateway's CPU per batched Redis command: redis-py's pipeline against the
pipelined connection the hot path uses (foundation/redis_batch.py, redis_pipe.py).

    .venv/bin/python -m bench.redis_batch [--callers 64] [--rounds 300]

Starts the bundled Redis 8 on a free port. Each round, `callers` coroutines each send two
commands (HINCRBY, then GET) at once, as concurrent requests do; the figure is this
process's CPU time (not Redis's) per command, both ways alternated twice. Pin it to one
core (`taskset -c 1`) to see the hot path's situation, where Redis shares that core.
"""

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
import uvloop

from foundation import embedded_redis
from foundation.redis_batch import CommandBatcher

Send = Callable[[tuple[Any, ...]], Awaitable[Any]]


class PipelineBatcher:
    """What foundation/redis_batch.py did before: one redis-py pipeline per event-loop turn."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self.pending: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []

    def submit(self, command: tuple[Any, ...]) -> "asyncio.Future[Any]":
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        if not self.pending:
            loop.call_soon(lambda: loop.create_task(self._send()))
        self.pending.append((command, reply))
        return reply

    async def _send(self) -> None:
        batch, self.pending = self.pending, []
        pipe = self.client.pipeline(transaction=False)
        for command, _ in batch:
            pipe.execute_command(*command)
        for (_, reply), result in zip(batch, await pipe.execute(), strict=True):
            reply.set_result(result)


async def cpu_per_command(send: Send, callers: int, rounds: int) -> float:
    async def caller(n: int) -> None:
        await send(("HINCRBY", "bench:counts", "requests", 1))
        await send(("GET", f"bench:key:{n}"))

    started = time.process_time()
    for _ in range(rounds):
        await asyncio.gather(*(caller(n) for n in range(callers)))
    return (time.process_time() - started) / (rounds * callers * 2) * 1e6


async def compare(url: str, callers: int, rounds: int) -> None:
    client = aioredis.from_url(url, decode_responses=True)
    pipelined = CommandBatcher(client)
    old = PipelineBatcher(client)
    ways: dict[str, Send] = {
        "redis-py pipeline": old.submit,
        "pipelined connection": lambda command: pipelined.submit(*command),
    }
    for send in ways.values():  # warm both (connections, scripts, caches)
        await cpu_per_command(send, callers, 5)
    for _ in range(2):
        for name, send in ways.items():
            micros = await cpu_per_command(send, callers, rounds)
            print(f"{name:22s} {micros:6.1f} us of this process's CPU per command")
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=300)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        process, url = embedded_redis.start(Path(data))
        try:
            uvloop.run(compare(url, options.callers, options.rounds))
        finally:
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    main()
