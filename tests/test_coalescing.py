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
import redis

from caching import exact
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from tests.conftest import live_platform
from tests.sims import SimProcess
from tests.test_exact_cache import generations, report
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


def generating(platform: dict[str, Any]) -> None:
    wait_until(
        lambda: platform["sim"].metric("vllm:num_requests_running") == 1,
        5,
        "a generation to start on the worker",
    )


def client_of(platform: dict[str, Any]) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=platform["client"].base_url, api_key=platform["key"], max_retries=0, timeout=30
    )


def test_fifty_identical_requests_cause_one_generation(slow_platform):
    """25 streams arrive together and share one; 25 requests not streamed arrive while it
    runs and read it too (they would otherwise ask for a whole reply of their own)."""
    platform = slow_platform
    before = generations(platform)
    start = threading.Barrier(25)
    results: list[tuple[str, str, str]] = []

    def one(index: int) -> None:
        client = client_of(platform)
        streamed = index % 2 == 0
        if streamed:
            start.wait()
        else:
            generating(platform)
        results.append(ask(client, stream=streamed))

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


def test_identical_requests_not_streamed_share_one_whole_reply(slow_platform):
    platform = slow_platform
    before = generations(platform)
    start = threading.Barrier(20)
    results: list[tuple[str, str, str]] = []

    def one() -> None:
        client = client_of(platform)
        start.wait()
        results.append(ask(client, stream=False))

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(results) == 20
    assert generations(platform) == before + 1
    assert len({text for text, _, _ in results}) == 1 and results[0][0]
    assert Counter(flag for _, _, flag in results) == {"true": 19, "false": 1}


def test_a_stream_does_not_wait_for_a_whole_reply_being_made(slow_platform):
    """A request not streamed asks its worker for the whole reply, which has no first chunk
    before its end: an identical stream arriving meanwhile starts its own generation."""
    platform = slow_platform
    before = generations(platform)
    whole: list[tuple[str, str, str]] = []
    thread = threading.Thread(target=lambda: whole.append(ask(client_of(platform), False)))
    thread.start()
    generating(platform)
    text, _, coalesced = ask(client_of(platform), stream=True)
    thread.join(timeout=30)

    assert coalesced == "false" and whole[0][2] == "false"
    assert text and text == whole[0][0]
    assert generations(platform) == before + 2


BODY: dict[str, Any] = {
    "model": "small-model",
    "messages": MESSAGES,
    "temperature": 0,
    "max_tokens": 8,
}


def json_headers(platform: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {platform['key']}", "Content-Type": "application/json"}


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
        generating(platform)  # join once the first caller's generation runs on the worker
        follower.append(ask(client_of(platform), stream=False))

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


def test_a_shared_reply_is_kept_though_its_first_caller_left_and_its_reader_can_report_it(
    slow_platform, redis_url
):
    """The first caller is billed the whole generation its readers got, so the reply is
    kept as any whole reply (it was not, its caller having left); and a reader's reply,
    being the kept one, can be reported as a false hit (it could not: 404)."""
    platform = slow_platform
    before = generations(platform)
    body = {**BODY, "stream": True}
    follower: list[Any] = []

    def follow() -> None:
        generating(platform)
        follower.append(ask(client_of(platform), stream=True))

    thread = threading.Thread(target=follow)
    thread.start()
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=30)
    connection.request(
        "POST", "/v1/chat/completions", body=json.dumps(body), headers=json_headers(platform)
    )
    time.sleep(0.6)  # as above: after the follower joined, before the first token
    connection.close()
    thread.join(timeout=30)
    text, follower_id, coalesced = follower[0]
    assert coalesced == "true" and text

    cache = redis.Redis.from_url(redis_url)
    wait_until(
        lambda: any(cache.scan_iter(f"{exact.KEY_PREFIX}*", count=1000)),
        10,
        "the shared reply to be kept once the generation ends",
    )
    again = client_of(platform).chat.completions.with_raw_response.create(
        model="small-model", messages=MESSAGES, temperature=0, max_tokens=8
    )
    assert again.headers["x-sluice-cache"] == "hit-exact"
    assert again.parse().choices[0].message.content == text
    assert generations(platform) == before + 1

    status, answer = report(platform, platform["key"], {"request_id": follower_id})
    assert (status, answer) == (200, {"request_id": follower_id, "removed": True})
    assert ask(client_of(platform), stream=False)[2] == "false"
    assert generations(platform) == before + 2  # the reported reply no longer answers
