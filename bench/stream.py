"""Stream chat completions at several concurrency levels and report throughput and latency.

    .venv/bin/python -m bench.stream --url http://127.0.0.1:PORT/v1 \
        --model smollm2-135m-instruct [--api-key KEY] [--concurrency 1,4,16] [--max-tokens 64]

Points at a worker directly or at Sluice (with --api-key), so the two can be compared.
Each request asks for exactly --max-tokens tokens (ignore_eos) so levels are comparable.
"""

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import dataclass

import aiohttp


@dataclass
class Result:
    ttft: float
    latency: float
    tokens: int


async def one(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    max_tokens: int,
    index: int,
    headers: dict[str, str],
) -> Result:
    prompt = f"Write a story about robot {index}."
    body = {
        "model": model,
        "stream": True,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": prompt}],
    }
    started = time.perf_counter()
    ttft, tokens = None, 0
    async with session.post(f"{url}/chat/completions", json=body, headers=headers) as response:
        response.raise_for_status()
        async for raw in response.content:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            elif ttft is None and any(c["delta"].get("content") for c in chunk["choices"]):
                ttft = time.perf_counter() - started
    return Result(ttft or 0.0, time.perf_counter() - started, tokens)


async def level(
    url: str, model: str, concurrency: int, requests: int, max_tokens: int, api_key: str
) -> str:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    queue = list(range(requests))
    results: list[Result] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def client() -> None:
            while queue:
                results.append(await one(session, url, model, max_tokens, queue.pop(), headers))

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    tokens = sum(r.tokens for r in results)
    per_stream = statistics.median(r.tokens / max(r.latency - r.ttft, 1e-9) for r in results)
    ttft = statistics.median(r.ttft for r in results)
    latency = statistics.median(r.latency for r in results)
    return (
        f"{concurrency:>5} {requests:>5} {tokens / elapsed:>9.1f} {requests / elapsed:>7.2f} "
        f"{ttft:>9.3f} {latency:>9.2f} {per_stream:>11.1f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="requests per client")
    options = parser.parse_args()
    print(
        f"{'conc':>5} {'reqs':>5} {'tok/s':>9} {'req/s':>7} {'TTFT P50':>9} "
        f"{'lat P50':>9} {'tok/s/strm':>11}"
    )
    for concurrency in (int(c) for c in options.concurrency.split(",")):
        print(
            await level(
                options.url,
                options.model,
                concurrency,
                concurrency * options.rounds,
                options.max_tokens,
                options.api_key,
            ),
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())
