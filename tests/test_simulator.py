"""The simulator must behave like vLLM on one GPU; measured in simulated seconds."""

import asyncio
import statistics

import aiohttp
import pytest

from inference.sim.engine import Engine, SimRequest
from inference.sim.kv import KVBlocks
from inference.sim.metrics import SimMetrics
from inference.sim.profiles import PROFILES
from inference.sim.server import build_app
from inference.sim.text import completion, prompt_tokens
from tests.waiting import async_wait_until

pytestmark = pytest.mark.unit

FAST = 10_000.0  # time scale: steps sleep ~0 s of wall time; the engine's clock is simulated


def make_request(text: str, output_tokens: int, system: str = "") -> SimRequest:
    messages = [{"role": "user", "content": text}]
    if system:
        messages.insert(0, {"role": "system", "content": system})
    prompt = prompt_tokens(messages)
    return SimRequest(prompt=prompt, output=completion(prompt, output_tokens, 1, ignore_eos=True))


async def run_all(engine: Engine, requests: list[SimRequest]) -> None:
    async def drain(request: SimRequest) -> None:
        while await request.tokens.get() is not None:
            pass

    for request in requests:
        engine.submit(request)
    await asyncio.gather(*(drain(r) for r in requests))


def closed_batch(profile_name: str, concurrency: int, prompt_words: int = 100, output: int = 64):
    async def measure() -> tuple[float, list[float]]:
        engine = Engine(PROFILES[profile_name], SimMetrics("m"), time_scale=FAST)
        runner = asyncio.create_task(engine.run())
        requests = [
            make_request(f"request {i} " + "word " * prompt_words, output)
            for i in range(concurrency)
        ]
        await run_all(engine, requests)
        runner.cancel()
        ttfts = [r.first_token_clock - r.submitted_clock for r in requests]  # type: ignore[operator]
        return concurrency * output / engine.clock, ttfts

    return asyncio.run(measure())


def test_output_is_deterministic_from_the_prompt():
    prompt = prompt_tokens([{"role": "user", "content": "What is the capital of France?"}])
    assert completion(prompt, 50, 40) == completion(prompt, 50, 40)
    other = prompt_tokens([{"role": "user", "content": "What is the capital of Spain?"}])
    assert completion(prompt, 50, 40, ignore_eos=True) != completion(other, 50, 40, ignore_eos=True)


def test_throughput_rises_with_concurrency_until_a_knee_at_max_num_seqs():
    profile = PROFILES["a10g-llama3-8b"]
    rate = {n: closed_batch(profile.name, n)[0] for n in (1, 8, 64, 256)}
    assert rate[8] > 5 * rate[1]
    assert rate[64] > 2 * rate[8]
    # Beyond max_num_seqs (64) extra requests only queue: throughput stops growing.
    assert rate[256] < 1.15 * rate[64]


def test_ttft_grows_with_queueing():
    _, alone = closed_batch("a10g-llama3-8b", 1)
    _, crowded = closed_batch("a10g-llama3-8b", 256)
    assert statistics.median(crowded) > 10 * alone[0]
    assert max(crowded) > 3 * statistics.median(crowded[:64])


def test_prefix_reuse_lowers_ttft():
    system = "You are a careful assistant. " * 300  # ~1,800 shared tokens

    async def two_in_a_row() -> tuple[float, float, Engine]:
        engine = Engine(PROFILES["a10g-llama3-8b"], SimMetrics("m"), time_scale=FAST)
        runner = asyncio.create_task(engine.run())
        first, second = make_request("one", 4, system), make_request("two", 4, system)
        await run_all(engine, [first])
        await run_all(engine, [second])
        runner.cancel()
        ttft = [r.first_token_clock - r.submitted_clock for r in (first, second)]  # type: ignore[operator]
        return ttft[0], ttft[1], engine

    cold, warm, engine = asyncio.run(two_in_a_row())
    assert warm < cold / 3
    metrics = engine.metrics.render().decode()
    assert 'vllm:prefix_cache_hits_total{model_name="m"} 0.0' not in metrics


def test_running_requests_hold_a_computed_prefix_once_and_unused_blocks_stay_cached():
    kv, prefix = KVBlocks(total=100), [1, 2, 3, 4]  # a prompt's four full blocks
    assert kv.cached_prefix(prefix) == 0
    assert kv.admit([], private=6)  # computes everything: 4 prompt blocks + tail + output
    first: list[int] = []
    assert kv.share(prefix, first) == 4 and kv.in_use() == 6
    assert kv.cached_prefix(prefix) == 4
    assert kv.admit(prefix, private=2)  # the same prefix: only its own 2 blocks are new
    second = list(prefix)
    assert kv.in_use() == 8
    kv.release(first, 2)
    kv.release(second, 2)
    assert kv.in_use() == 0 and kv.cached_prefix(prefix) == 4  # free, still cached
    assert kv.admit([], private=97)  # memory pressure evicts the prefix's tail first
    assert kv.cached_prefix(prefix) == 3
    assert not kv.admit([], private=4)  # 97 + 4 > 100: the request waits


@pytest.fixture
def sim_url(unused_tcp_port_factory=None):
    """A simulator served over HTTP in a background thread."""
    import threading

    from aiohttp import web

    from foundation.embedded_redis import free_port

    port = free_port()
    loop = asyncio.new_event_loop()
    app = build_app(PROFILES["cpu-smollm2-135m"], "sim")
    runner = web.AppRunner(app, handler_cancellation=True)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)


async def running_requests(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(f"{url}/metrics") as response:
        for line in (await response.text()).splitlines():
            if line.startswith("vllm:num_requests_running"):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no vllm:num_requests_running in /metrics")


def test_a_client_that_disconnects_frees_its_slot_within_a_second(sim_url):
    async def scenario() -> float:
        async with aiohttp.ClientSession() as session:
            body = {
                "model": "sim",
                "stream": True,
                "max_tokens": 500,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": "tell me a long story"}],
            }
            response = await session.post(f"{sim_url}/v1/chat/completions", json=body)
            await response.content.readline()
            before = await running_requests(session, sim_url)
            response.close()

            async def freed() -> bool:
                return await running_requests(session, sim_url) == 0

            await async_wait_until(freed, 1.0, "the slot to be freed", poll_s=0.02)
            return before

    assert asyncio.run(scenario()) == 1.0


def test_the_http_api_rejects_bad_bodies_like_vllm(sim_url):
    async def scenario() -> list[int]:
        async with aiohttp.ClientSession() as session:
            statuses = []
            for body in (
                {"model": "sim"},
                {"model": "nope", "messages": [{"role": "user", "content": "hi"}]},
                [1, 2],
            ):
                async with session.post(f"{sim_url}/v1/chat/completions", json=body) as r:
                    statuses.append(r.status)
            return statuses

    assert asyncio.run(scenario()) == [400, 404, 400]
