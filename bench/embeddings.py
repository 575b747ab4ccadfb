"""Embeddings through the gateway against the built-in embedder called in this process.

    .venv/bin/python -m bench.embeddings [--requests 200] [--inputs 1] [--concurrency 1,8]

The same closed loop twice at each concurrency: `in-process` awaits embed_texts() (what
the gateway's /v1/embeddings runs for the built-in model: one input at a time in the
process's embedding thread) from `--concurrency` tasks; `gateway` sends POST /v1/embeddings
(base64, as the openai client asks by default) to a fresh gateway process (uvicorn, as
`make run` starts one) from as many connections, so the difference is the gateway's share:
HTTP, the key, admission, counting the tokens, settlement and the JSON answer. Prints
requests/s and P50/P99 latency as a markdown table (docs/benchmarks.md).

It runs against a private Redis 8 (never a platform's) and the configured database, which
must be migrated (`make run` does it), where it creates a team and a key and deletes them
at the end.
"""

import argparse
import asyncio
import os
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
django.setup()

import aiohttp  # noqa: E402
from django.conf import settings  # noqa: E402

from bench.fairness import Child  # noqa: E402
from bench.loadtest.summary import percentile  # noqa: E402
from foundation.embedded_redis import free_port  # noqa: E402
from foundation.redis_clients import reset_clients  # noqa: E402
from gateway.accounts import actions  # noqa: E402
from inference.builtin_embedder import embed_texts  # noqa: E402
from inference.deployments import BUILTIN_EMBEDDING_MODEL  # noqa: E402
from scaling.replay.live.private_redis import PrivateRedis  # noqa: E402


@dataclass(frozen=True)
class Level:
    path: str
    concurrency: int
    inputs: int
    requests: int
    seconds: float
    latencies_s: list[float]

    def row(self) -> str:
        p50 = percentile(self.latencies_s, 0.5) or 0.0
        p99 = percentile(self.latencies_s, 0.99) or 0.0
        rate = self.requests / self.seconds
        return (
            f"| {self.path} | {self.concurrency} | {self.inputs} | {rate:,.0f} | "
            f"{p50 * 1000:.2f} | {p99 * 1000:.2f} |"
        )


def texts_for(number: int, inputs: int) -> list[str]:
    """Short questions, different for every request (nothing here is cached anyway)."""
    return [f"Request {number}, question {i}: how do I rotate an API key?" for i in range(inputs)]


async def closed_loop(
    path: str, concurrency: int, requests: int, inputs: int, call: Callable[[int], Awaitable[None]]
) -> Level:
    """`concurrency` clients share `requests` requests, each sent when its last one ended."""
    numbers = iter(range(requests))
    latencies: list[float] = []

    async def client() -> None:
        for number in numbers:
            started = time.perf_counter()
            await call(number)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return Level(path, concurrency, inputs, requests, time.perf_counter() - started, latencies)


async def in_process(concurrency: int, requests: int, inputs: int) -> Level:
    async def call(number: int) -> None:
        await embed_texts(texts_for(number, inputs))

    await call(-1)  # loads the model
    return await closed_loop("in-process", concurrency, requests, inputs, call)


async def through_gateway(
    url: str, key: str, concurrency: int, requests: int, inputs: int
) -> Level:
    headers = {"Authorization": f"Bearer {key}"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def call(number: int) -> None:
            body = {
                "model": BUILTIN_EMBEDDING_MODEL,
                "input": texts_for(number, inputs),
                "encoding_format": "base64",
            }
            async with session.post(f"{url}/v1/embeddings", json=body) as response:
                if response.status != 200:
                    raise RuntimeError(f"{response.status}: {await response.text()}")
                await response.read()

        await call(-1)  # the gateway loads its model
        return await closed_loop("gateway", concurrency, requests, inputs, call)


def start_gateway(redis_url: str) -> tuple[Child, str]:
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "REDIS_URL": redis_url,
        "CACHE_REDIS_URL": redis_url,
        "DATABASE_URL": settings.DATABASE_URL,
        "SLUICE_WORKERS": "",
        "GATEWAY_PROCESSES": "1",
        "LOG_LEVEL": "WARNING",
    }
    server = [sys.executable, "-m", "uvicorn", "gateway.asgi:application"]
    server += ["--port", str(port), "--no-access-log", "--log-level", "warning"]
    return Child(server, env), f"http://127.0.0.1:{port}"


async def measure(args: argparse.Namespace, redis_url: str, key: str) -> list[Level]:
    levels = [int(c) for c in args.concurrency.split(",")]
    results = [await in_process(c, args.requests, args.inputs) for c in levels]
    gateway, url = start_gateway(redis_url)
    try:
        await gateway.wait_for(f"{url}/readyz", "the gateway")
        for c in levels:
            results.append(await through_gateway(url, key, c, args.requests, args.inputs))
    finally:
        gateway.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="per level")
    parser.add_argument("--inputs", type=int, default=1, help="texts per request")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated levels")
    args = parser.parse_args()
    redis = PrivateRedis("")  # never a platform's: its quotas and ledger stay untouched
    redis_url = redis.start()
    settings.REDIS_URL = settings.CACHE_REDIS_URL = redis_url
    reset_clients()
    unlimited: dict[str, int | None] = {
        "requests_per_minute": 10**9,
        "tokens_per_minute": 2 * 10**9,
        "tokens_per_month": 10**15,
    }
    team = actions.create_team(f"bench-embeddings-{secrets.token_hex(3)}", **unlimited)
    try:
        key = actions.issue_api_key(team, name="bench").plaintext
        results = asyncio.run(measure(args, redis_url, key))
    finally:
        team.delete()
        redis.stop()
    print("| path | concurrency | inputs/request | requests/s | P50 ms | P99 ms |")
    print("|---|---|---|---|---|---|")
    for level in results:
        print(level.row())


if __name__ == "__main__":
    main()
