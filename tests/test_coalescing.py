"""Request coalescing through a live gateway: identical requests arriving while one is
generating share that generation (counted by the simulator), each with its own stream."""

import http.client
import json
import threading
import time
from collections import Counter
from typing import Any

import openai
import pytest

from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from tests.conftest import live_platform
from tests.sims import SimProcess
from tests.test_exact_cache import generations
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
MESSAGES: list[Any] = [{"role": "user", "content": "Write a haiku about queues."}]


@pytest.fixture
def slow_platform(redis_url):
    """The first token takes a second: long enough for 50 requests to pile up behind it."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=1000, fixed_itl_ms=20)
    try:
        yield from live_platform(
            redis_url, sim, requests_per_minute=1000, max_in_flight_per_worker=64
        )
    finally:
        sim.stop()


def ask(client: openai.OpenAI, stream: bool) -> tuple[str, str, str]:
    """Reply text, id and whether the gateway said it was coalesced."""
    raw = client.chat.completions.with_raw_response.create(
        model="small-model", messages=MESSAGES, temperature=0, max_tokens=8, stream=stream
    )
    coalesced = raw.headers.get("x-sluice-coalesced", "false")
    parsed: Any = raw.parse()
    if not stream:
        return parsed.choices[0].message.content or "", parsed.id, coalesced
    chunks = list(parsed)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, chunks[0].id, coalesced


def test_fifty_identical_requests_cause_one_generation(slow_platform):
    platform = slow_platform
    before = generations(platform)
    start = threading.Barrier(50)
    results: list[tuple[str, str, str]] = []

    def one(index: int) -> None:
        client = openai.OpenAI(
            base_url=platform["client"].base_url, api_key=platform["key"], max_retries=0, timeout=30
        )
        start.wait()
        results.append(ask(client, stream=index % 2 == 0))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(results) == 50
    assert generations(platform) == before + 1
    assert len({text for text, _, _ in results}) == 1 and results[0][0]
    assert len({request_id for _, request_id, _ in results}) == 50
    assert Counter(flag for _, _, flag in results) == {"true": 49, "false": 1}

    def all_recorded() -> list[UsageRecord]:  # billed as (or just after) each reply went out
        ingest("test-consumer")
        found = list(UsageRecord.objects.filter(request_id__in=[r for _, r, _ in results]))
        return found if len(found) == 50 else []

    records = wait_until(all_recorded, 5, "the 50 usage records")
    assert Counter(r.cache_result for r in records) == {"coalesced": 49, "miss": 1}
    assert all(
        r.completion_tokens == 0 and r.cost_micros == 0 and r.status == "ok"
        for r in records
        if r.cache_result == "coalesced"
    )


def test_the_first_caller_leaving_does_not_cut_off_the_others(slow_platform):
    platform = slow_platform
    before = generations(platform)
    body = {
        "model": "small-model",
        "messages": MESSAGES,
        "temperature": 0,
        "max_tokens": 8,
        "stream": True,
    }
    headers = {"Authorization": f"Bearer {platform['key']}"}
    follower: list[Any] = []

    def follow() -> None:
        # Join once the first caller's generation is running on the worker.
        wait_until(
            lambda: platform["sim"].metric("vllm:num_requests_running") == 1,
            5,
            "the first caller's generation to start",
        )
        client = openai.OpenAI(
            base_url=platform["client"].base_url, api_key=platform["key"], max_retries=0, timeout=30
        )
        follower.append(ask(client, stream=False))

    thread = threading.Thread(target=follow)
    thread.start()
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=30)
    connection.request(
        "POST",
        "/v1/chat/completions",
        body=json.dumps(body),
        headers={**headers, "Content-Type": "application/json"},
    )
    # Kept as a sleep: the first caller leaves after the follower has joined (at most a few
    # tenths in) but before the first token (a second in); nothing marks the moment between.
    time.sleep(0.6)
    connection.close()
    thread.join(timeout=30)

    text, _, coalesced = follower[0]
    assert coalesced == "true" and text
    assert generations(platform) == before + 1

    def first_recorded() -> bool:  # its settlement runs as its request is torn down
        ingest("test-consumer")
        return UsageRecord.objects.filter(cache_result="miss").exists()

    wait_until(first_recorded, 5, "the first caller's usage record")
    first = UsageRecord.objects.get(cache_result="miss")
    assert first.status == "cancelled"  # it really left, and the generation went on
