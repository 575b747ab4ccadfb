"""Attacks one tenant could make on the platform, each against a live gateway
(docs/security.md lists them with what stops them)."""

import asyncio
import http.client
import json
import threading
import time
from typing import Any

import aiohttp
import openai
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from gateway.accounts import actions
from gateway.accounts.models import Team
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from tests.conftest import live_platform
from tests.sims import SimProcess
from tests.waiting import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
MESSAGES: list[Any] = [{"role": "user", "content": "Recite the alphabet slowly."}]


@pytest.fixture
def paced_platform(redis_url):
    """A worker whose reply takes about two seconds: long enough to join it and leave it."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=200, fixed_itl_ms=30)
    try:
        yield from live_platform(redis_url, sim, requests_per_minute=1000)
    finally:
        sim.stop()


def _start_and_leave(
    platform: dict[str, Any], body: dict[str, Any], joined: threading.Event
) -> None:
    """Start the generation, read its first chunk, wait for the follower, then hang up."""
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=30)
    headers = {"Authorization": f"Bearer {platform['key']}", "Content-Type": "application/json"}
    connection.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
    response = connection.getresponse()
    assert response.status == 200
    assert response.fp is not None
    while not response.fp.readline().startswith(b"data:"):
        pass  # until the first chunk: the generation is running
    joined.wait(timeout=10)
    connection.close()


def test_leaving_a_coalesced_generation_does_not_make_it_free(paced_platform):
    """Caller A starts a long deterministic generation, B asks the same and shares it, A
    hangs up: the team must still be billed the whole generation, exactly once."""
    platform = paced_platform
    body = {
        "model": "small-model",
        "messages": MESSAGES,
        "temperature": 0,
        "max_tokens": 60,
        "ignore_eos": True,
        "stream": True,
    }
    joined = threading.Event()
    leaver = threading.Thread(target=_start_and_leave, args=(platform, body, joined))
    leaver.start()
    time.sleep(0.5)  # part of the attack: B arrives while A's generation is under way
    follower = openai.OpenAI(
        base_url=platform["client"].base_url, api_key=platform["key"], max_retries=0, timeout=30
    )
    stream = follower.chat.completions.with_raw_response.create(
        model="small-model",
        messages=MESSAGES,
        temperature=0,
        max_tokens=60,
        extra_body={"ignore_eos": True},
        stream=True,
        stream_options={"include_usage": True},
    )
    assert stream.headers.get("x-sluice-coalesced") == "true"
    joined.set()  # A hangs up now, mid-generation
    chunks = list(stream.parse())
    leaver.join(timeout=30)
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == 60  # B got the whole reply

    deadline = time.monotonic() + 10
    while True:  # A's settlement waits for the shared generation to end
        ingest("test-consumer")
        records = list(UsageRecord.objects.all().order_by("created_at"))
        if any(r.cache_result == "miss" for r in records):
            break
        assert time.monotonic() < deadline, "the first caller's request was never settled"
        time.sleep(0.1)
    # The platform fixture's warm-up requests (sampled, so "bypass") are not part of this.
    billed = [
        (r.cache_result, r.prompt_tokens, r.completion_tokens)
        for r in records
        if r.cache_result != "bypass"
    ]
    assert sorted(billed) == [
        ("coalesced", 0, 0),
        ("miss", usage.prompt_tokens, usage.completion_tokens),
    ]


def test_a_member_removed_from_the_team_is_refused_on_an_open_socket(platform):
    """Authorization is read for every message, not once at connect: a web user taken out of
    their team stops being served within two seconds, without reconnecting."""
    team = Team.objects.get(pk=platform["team"].pk)
    user = get_user_model().objects.create_user("mallory", password="a-long-password-1")
    actions.add_member(team, user)
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    url = platform["gateway"].url

    async def chat(socket: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
        await socket.send_json(
            {
                "type": "chat",
                "model": "small-model",
                "max_tokens": 2,
                "messages": [{"role": "user", "content": "Hi"}],
            }
        )
        event: dict[str, Any] = await socket.receive_json(timeout=10)
        while event["type"] not in ("done", "error"):
            event = await socket.receive_json(timeout=10)
        return event

    async def scenario() -> tuple[str, dict[str, Any], float]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                url.replace("http://", "ws://") + "/ws/chat/",
                headers={"Origin": url, "Cookie": cookie},
            ) as socket,
        ):
            first = (await chat(socket))["type"]
            await asyncio.to_thread(actions.remove_member, team, user)
            removed_at = time.monotonic()
            while True:
                event = await chat(socket)
                if event["type"] == "error" or time.monotonic() - removed_at > 5:
                    return first, event, time.monotonic() - removed_at

    first, refused, after_s = asyncio.run(scenario())
    assert first == "done"
    assert refused["type"] == "error" and refused["error"]["code"] == "unauthenticated"
    assert after_s < 2.0


def _healthz_latencies(port: int, stop: threading.Event, seen: list[float]) -> None:
    while not stop.is_set():
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        connection.close()
        seen.append(time.monotonic() - started)
        time.sleep(0.02)  # pacing the probe, not synchronisation


def test_questions_built_to_stall_verification_do_not_freeze_the_gateway(platform):
    """Hundreds of numbers in a question, asked twice with one number repeated (the exact
    key differs, the semantic candidate matches at about 1.0): verification used to be
    cubic in them, on the event loop. Other requests on the process must keep being
    answered."""
    client, port = platform["client"], platform["gateway"].port
    long_list = " ".join(str(n) for n in range(1200))  # ~4.7 KB: past the semantic limit (3,000)
    short_list = " ".join(str(n) for n in range(240))[:999]  # within it: verified
    # 2,689 characters, 983 tokens: embedded whole, its one nearest candidate verified
    near_limit = " ".join(str(n) for n in range(700))
    stop, latencies = threading.Event(), list[float]()
    probe = threading.Thread(target=_healthz_latencies, args=(port, stop, latencies))
    probe.start()
    try:
        # " 1" repeats a number already listed: the same anchors, another text to verify
        for question in (
            long_list,
            long_list + " 1",
            short_list,
            short_list + " 1",
            near_limit,
            near_limit + " 1",
        ):
            raw = client.chat.completions.with_raw_response.create(
                model="small-model",
                messages=[{"role": "user", "content": question}],
                temperature=0,
                max_tokens=2,
            )
            assert raw.headers["x-sluice-cache"] == "miss"  # neither is answered by the other
    finally:
        stop.set()
        probe.join(timeout=10)
    assert latencies and max(latencies) < 0.1, f"/healthz took {[round(x, 3) for x in latencies]} s"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/metrics")
    metrics_text = connection.getresponse().read().decode()
    assert 'sluice_cache_semantic_skips_total{reason="too_long"} 2.0' in metrics_text
    assert 'sluice_cache_semantic_rejections_total{reason="too_many_anchors"} 2.0' in metrics_text


def test_one_team_cannot_hit_another_teams_prefix_cache(platform):
    """Time to first token reveals whether a prompt's opening is in a worker's prefix cache.
    With a per-team cache_salt, team B sending team A's long system prompt computes it anew
    (no shared KV blocks), while team A's own repeat still hits."""
    sim = platform["sim"]
    other = actions.issue_api_key(actions.create_team("Other", requests_per_minute=100))
    messages: list[Any] = [
        {"role": "system", "content": "You are the support assistant of Acme. " * 40},
        {"role": "user", "content": "Hello"},
    ]

    def ask(key: str) -> float:
        """Prefix-cache hit tokens on the worker that this request added."""
        client = openai.OpenAI(base_url=platform["client"].base_url, api_key=key, max_retries=0)
        before = sim.metric("vllm:prefix_cache_hits_total")
        client.chat.completions.create(
            model="small-model", messages=messages, max_tokens=1, temperature=0.7
        )
        return float(sim.metric("vllm:prefix_cache_hits_total") - before)

    ask(platform["key"])  # team A computes the prompt's blocks
    assert ask(other.plaintext) == 0  # team B gets nothing from them
    assert ask(platform["key"]) > 100  # team A's repeat reuses them


def test_a_workers_refusal_does_not_reach_the_client_in_its_own_words(platform):
    """A worker's 4xx body can name its internal model path or address: the client is told
    the worker refused, never what it said (the gateway's log has it)."""
    deployment = fleet.ensure_deployment("misnamed", served_model_name="/srv/weights/secret-v7")
    fleet.register_worker(deployment, platform["sim"].url, registered_by="test")
    client = platform["client"]

    def refused() -> openai.BadRequestError:
        try:
            client.chat.completions.create(model="misnamed", messages=MESSAGES, max_tokens=2)
        except openai.BadRequestError as exc:
            return exc
        raise AssertionError("the worker accepted a model it does not serve")

    error = wait_until(
        refused,
        10,
        "the gateway to know the deployment and its worker",
        ignoring=(openai.NotFoundError, openai.InternalServerError),
    )
    assert error.status_code == 400
    assert "secret-v7" not in error.message and "127.0.0.1" not in error.message
    assert "refused" in error.message
    # Refused before its first chunk: the client got an error, so nothing is billed.

    def settled() -> bool:
        ingest("test-consumer")
        return UsageRecord.objects.filter(model="misnamed", status="failed").exists()

    wait_until(settled, 10, "the refused request to be settled")
    billed = UsageRecord.objects.filter(model="misnamed").values_list(
        "prompt_tokens", "completion_tokens", "cost_micros"
    )
    assert set(billed) == {(0, 0, 0)}
