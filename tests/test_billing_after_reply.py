"""A non-streamed reply goes out before its billing round trip, and a stream ends before
it, and both are billed all the same: the quota was reserved at admission, so the client
need not wait for the reconcile. A cacheable reply does not wait for its store either, and
an identical question asked at once still finds it. Before the reply, the exact cache's
lookup does not wait for admission's round trip: the two travel together."""

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import redis

from caching.exact import KEY_PREFIX
from gateway.accounts import actions
from gateway.accounts.quota_usage import read_team_usage
from gateway.accounts.records import quota_limits_from_row
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from tests.live import LiveGateway
from tests.sims import SimProcess
from tests.waiting import wait_until

PAUSE_S = 6.0
QUESTION: list[Any] = [{"role": "user", "content": "Name a colour."}]


@pytest.fixture
def platform(redis_url: str) -> Iterator[dict[str, Any]]:
    """A worker a second from its first token, and a gateway whose Redis commands wait out
    a paused Redis (30 s) instead of failing after the default second."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=1000, fixed_itl_ms=5)
    gateway = None
    try:
        team = actions.create_team("Acme", requests_per_minute=100, tokens_per_minute=100_000)
        deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
        fleet.register_worker(deployment, sim.url, registered_by="test")
        gateway = LiveGateway(redis_url, REDIS_SOCKET_TIMEOUT_S="30")
        key = actions.issue_api_key(team).plaintext
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)

        def served() -> bool:
            client.chat.completions.create(model="small-model", messages=QUESTION, max_tokens=1)
            return True

        wait_until(served, 15, "small-model served", ignoring=(openai.APIError,), poll_s=0.2)
        yield {"client": client, "team": team, "sim": sim, "redis_url": redis_url}
    finally:
        if gateway is not None:
            gateway.stop()
        sim.stop()


def _minute_tokens(team: Any) -> int:
    usage = read_team_usage(team.pk, quota_limits_from_row(team.quota))
    return next(u.used for u in usage if u.limit == "tokens_per_minute")


def _ledger_tokens() -> int:
    ingest("test-consumer")
    return sum(r.prompt_tokens + r.completion_tokens for r in UsageRecord.objects.all())


def _minute_tokens_once_settled(team: Any) -> int:
    """The minute's tokens once the warm-up requests are settled (the ledger agrees)."""
    wait_until(lambda: _minute_tokens(team) == _ledger_tokens(), 10, "warm-up settled")
    return _minute_tokens(team)


def _pause_writes_once_generating(
    platform: dict[str, Any],
) -> tuple[threading.Thread, list[float], redis.Redis]:
    """A thread that pauses the primary Redis's writes for PAUSE_S once the worker is
    generating; the list gets the moment the pause ends."""
    primary = redis.Redis.from_url(platform["redis_url"])
    paused_until: list[float] = []

    def pause() -> None:
        wait_until(
            lambda: platform["sim"].metric("vllm:num_requests_running") == 1, 5, "the generation"
        )
        primary.execute_command("CLIENT", "PAUSE", int(PAUSE_S * 1000), "WRITE")
        paused_until.append(time.monotonic() + PAUSE_S)

    pausing = threading.Thread(target=pause)
    pausing.start()
    return pausing, paused_until, primary


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_reply_goes_out_while_its_billing_waits_and_is_billed_after(platform):
    team = platform["team"]
    before = _minute_tokens_once_settled(team)
    pausing, paused_until, primary = _pause_writes_once_generating(platform)
    reply = platform["client"].chat.completions.create(
        model="small-model", messages=QUESTION, max_tokens=400, temperature=0.7
    )
    arrived = time.monotonic()
    pausing.join()
    # The primary Redis still refuses writes: the reply did not wait for its billing, and
    # its reservation (the prompt plus the 400 tokens asked for) is what the minute counts.
    assert arrived < paused_until[0]
    assert reply.usage is not None and reply.choices[0].message.content
    used = reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert _minute_tokens(team) - before >= reply.usage.prompt_tokens + 400 > used
    primary.execute_command("CLIENT", "UNPAUSE")
    wait_until(lambda: _minute_tokens(team) - before == used, 10, "the reconcile")

    def recorded() -> list[UsageRecord]:
        ingest("test-consumer")
        return list(UsageRecord.objects.filter(request_id=reply.id))

    [record] = wait_until(recorded, 10, "the usage record")
    assert (record.prompt_tokens, record.completion_tokens) == (
        reply.usage.prompt_tokens,
        reply.usage.completion_tokens,
    )


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_stream_ends_while_its_billing_waits_and_is_billed_after(platform):
    """The stream's response ends with its [DONE] event; the settlement that follows (the
    reconcile and the usage event) does not keep the connection open. Read to the end of
    the body, as curl and most SSE clients do (the openai client stops at
    [DONE] and closes the connection, so it would not notice)."""
    team, client = platform["team"], platform["client"]
    before = _minute_tokens_once_settled(team)
    pausing, paused_until, primary = _pause_writes_once_generating(platform)
    body = {
        "model": "small-model",
        "messages": QUESTION,
        "max_tokens": 400,
        "temperature": 0.7,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = urllib.request.Request(
        f"{client.base_url}chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {client.api_key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        raw = response.read()  # to the end of the body, not only to [DONE]
    ended = time.monotonic()
    pausing.join()
    assert ended < paused_until[0]
    events = [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    usage = chunks[-1]["usage"]
    assert any(c["choices"] and c["choices"][0]["delta"].get("content") for c in chunks)
    used = usage["prompt_tokens"] + usage["completion_tokens"]
    assert _minute_tokens(team) - before >= usage["prompt_tokens"] + 400 > used
    primary.execute_command("CLIENT", "UNPAUSE")
    wait_until(lambda: _minute_tokens(team) - before == used, 10, "the reconcile")

    def recorded() -> list[UsageRecord]:
        ingest("test-consumer")
        return list(UsageRecord.objects.filter(request_id=chunks[0]["id"]))

    [record] = wait_until(recorded, 10, "the usage record")
    assert (record.prompt_tokens, record.completion_tokens) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_cacheable_reply_goes_out_while_its_store_waits_and_a_re_ask_finds_it(platform):
    """The caches' commands are queued before the reply and sent after it: the reply
    arrives while Redis refuses writes. The re-ask, made while the store still waits, is
    looked up after it (the same connection), so it is a hit, not a second generation."""
    team, client = platform["team"], platform["client"]
    before = _minute_tokens_once_settled(team)
    question: list[Any] = [{"role": "user", "content": "Name a metal."}]
    pausing, paused_until, primary = _pause_writes_once_generating(platform)
    first = client.chat.completions.with_raw_response.create(
        model="small-model", messages=question, max_tokens=40, temperature=0
    )
    arrived = time.monotonic()
    pausing.join()
    assert arrived < paused_until[0]
    assert first.headers["x-sluice-cache"] == "miss"
    again = client.chat.completions.with_raw_response.create(
        model="small-model", messages=question, max_tokens=40, temperature=0
    )
    assert again.headers["x-sluice-cache"] == "hit-exact"
    reply, replayed = first.parse(), again.parse()
    assert replayed.choices[0].message.content == reply.choices[0].message.content
    assert reply.usage is not None
    used = reply.usage.prompt_tokens + reply.usage.completion_tokens
    primary.execute_command("CLIENT", "UNPAUSE")
    # Billed once: the hit costs the team nothing.
    wait_until(lambda: _minute_tokens(team) - before == used, 10, "the reconcile")


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_exact_lookup_goes_out_while_admission_waits_for_redis(platform):
    """The exact cache's GET is sent with admission's quota script, not after its answer:
    while the primary Redis holds the script (its writes paused), the GET is already
    served (a read goes through a write pause), and the request goes on once it ends."""
    primary = redis.Redis.from_url(platform["redis_url"])
    question: list[Any] = [{"role": "user", "content": "Name a river."}]
    replies: list[Any] = []

    def ask() -> None:
        replies.append(
            platform["client"].chat.completions.with_raw_response.create(
                model="small-model", messages=question, max_tokens=5, temperature=0
            )
        )

    with primary.monitor() as monitor:
        primary.execute_command("CLIENT", "PAUSE", int(PAUSE_S * 1000), "WRITE")
        paused_until = time.monotonic() + PAUSE_S
        asking = threading.Thread(target=ask)
        asking.start()
        seen = None
        while seen is None and time.monotonic() < paused_until:
            command = monitor.next_command()["command"]
            if command.startswith(f"GET {KEY_PREFIX}"):
                seen = time.monotonic()
    assert seen is not None and seen < paused_until - 1.0, "no exact lookup during the pause"
    assert not replies  # admission still waits for the script
    primary.execute_command("CLIENT", "UNPAUSE")
    asking.join(15)
    assert replies and replies[0].headers["x-sluice-cache"] == "miss"
