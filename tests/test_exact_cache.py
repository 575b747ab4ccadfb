"""The exact response cache through a live gateway, with the official openai client."""

import http.client
import json
import time
from typing import Any

import openai
import pytest
import redis

from caching import responses
from caching.actions import update_cache_policy
from caching.exact import KEY_PREFIX
from foundation.embedded_redis import free_port
from gateway.accounts import actions
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from tests.live import LiveGateway
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
SYSTEM = {"role": "system", "content": "Answer briefly."}
QUESTION = {"role": "user", "content": "What is the capital of France?"}


def ask(
    client: openai.OpenAI, messages: list[Any] | None = None, **options: Any
) -> tuple[str, str]:
    """The reply text and the x-sluice-cache header."""
    options = {"temperature": 0, "max_tokens": 5, **options}
    raw = client.chat.completions.with_raw_response.create(
        model="small-model", messages=messages or [SYSTEM, QUESTION], **options
    )
    reply = raw.parse()
    return reply.choices[0].message.content or "", raw.headers["x-sluice-cache"]


def generations(platform: dict[str, Any]) -> float:
    return float(platform["sim"].metric("vllm:request_success_total"))


def test_a_repeated_deterministic_request_is_answered_without_the_worker(platform):
    client = platform["client"]
    first, first_state = ask(client)
    before = generations(platform)
    second, second_state = ask(client)
    assert (first_state, second_state) == ("miss", "hit-exact")
    assert second == first
    assert generations(platform) == before  # no GPU work for the hit

    stream = client.chat.completions.create(
        model="small-model",
        messages=[SYSTEM, QUESTION],
        temperature=0,
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == first
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert generations(platform) == before

    def both_hits() -> bool:  # billed as (or just after) each reply went out
        ingest("test-consumer")
        return UsageRecord.objects.filter(cache_result="hit-exact").count() >= 2

    wait_until(both_hits, 5, "the two hits' usage records")
    hits = UsageRecord.objects.filter(cache_result="hit-exact")
    assert hits.count() == 2
    assert {(r.prompt_tokens, r.completion_tokens, r.cost_micros) for r in hits} == {(0, 0, 0)}

    metrics = metric_lines(platform)
    assert metrics['sluice_cache_results_total{model="small-model",result="hit-exact"}'] == 2
    assert metrics['sluice_cache_results_total{model="small-model",result="miss"}'] == 1
    assert metrics['sluice_cache_tokens_saved_total{model="small-model"}'] > 0


def metric_lines(platform: dict[str, Any]) -> dict[str, float]:
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=5)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    return {
        name: float(value)
        for name, _, value in (
            line.rpartition(" ") for line in text.splitlines() if not line.startswith("#")
        )
    }


def test_another_team_never_gets_a_cached_reply(platform):
    ask(platform["client"])
    other = actions.issue_api_key(actions.create_team("Other")).plaintext
    client = openai.OpenAI(base_url=platform["client"].base_url, api_key=other, max_retries=0)
    assert ask(client)[1] == "miss"


@pytest.mark.parametrize(
    ("messages", "options"),
    [
        ([{"role": "system", "content": "Answer at length."}, QUESTION], {}),
        (
            [
                SYSTEM,
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
                QUESTION,
            ],
            {},
        ),
        (None, {"max_tokens": 4}),
        (None, {"seed": 7}),
        (None, {"top_p": 0.5}),
        (None, {"stop": ["\n"]}),
    ],
    ids=["system-prompt", "earlier-turns", "max-tokens", "seed", "top-p", "stop"],
)
def test_any_change_to_the_context_or_sampling_misses(platform, messages, options):
    assert ask(platform["client"])[1] == "miss"
    assert ask(platform["client"], messages, **options)[1] == "miss"


def test_sampled_requests_bypass_the_cache(platform):
    client = platform["client"]
    assert ask(client, temperature=0.7)[1] == "bypass"
    assert ask(client, temperature=0.7)[1] == "bypass"


def test_cache_control_and_ttl_headers(platform):
    client = platform["client"]
    assert ask(client, extra_headers={"Cache-Control": "no-store"})[1] == "miss"
    assert ask(client, extra_headers={"Cache-Control": "no-cache"})[1] == "bypass"  # stores
    assert ask(client)[1] == "hit-exact"
    assert ask(client, extra_headers={"Cache-Control": "no-cache"})[1] == "bypass"

    assert ask(client, max_tokens=3, extra_headers={"x-sluice-cache-ttl": "40"})[1] == "miss"
    cache = redis.Redis.from_url(platform["redis_url"])

    def kept_for_40_s() -> bool:  # seen from another connection a few ms after the reply
        ttls = [cache.ttl(key) for key in cache.scan_iter("sluice:cache:exact:*")]
        return any(30 < ttl <= 40 for ttl in ttls)

    wait_until(kept_for_40_s, 5, "the reply kept for the 40 s its header asked")
    with pytest.raises(openai.BadRequestError) as bad:
        ask(client, extra_headers={"x-sluice-cache-ttl": "soon"})
    assert bad.value.body["param"] == "x-sluice-cache-ttl"  # type: ignore[index]


def test_a_dead_cache_sends_requests_to_the_model_and_says_bypass(redis_url, upstream_sim):
    team = actions.create_team("Acme")
    deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
    fleet.register_worker(deployment, upstream_sim.url, registered_by="test")
    gateway = LiveGateway(redis_url, CACHE_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    try:
        key = actions.issue_api_key(team).plaintext
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
        text, state = wait_until(
            lambda: ask(client),
            10,
            "the gateway to serve small-model (the scraper publishes the worker)",
            ignoring=(openai.InternalServerError,),
            poll_s=0.2,
        )
        assert state == "bypass" and text
        assert ask(client)[1] == "bypass"
    finally:
        gateway.stop()


def report(platform: dict[str, Any], api_key: str, body: object) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=5)
    connection.request(
        "POST",
        "/v1/cache/false-hits",
        body=json.dumps(body),
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_a_reported_false_hit_removes_the_entry_for_its_team_only(platform, redis_url):
    client = platform["client"]
    ask(client)
    raw = client.chat.completions.with_raw_response.create(
        model="small-model", messages=[SYSTEM, QUESTION], temperature=0, max_tokens=5
    )
    assert raw.headers["x-sluice-cache"] == "hit-exact"
    request_id = raw.parse().id
    # The note a report reads lives as long as the entry can (the default hour), not a day.
    cache, note = redis.Redis.from_url(redis_url), responses.served_key(request_id)
    note_ttl = wait_until(lambda: max(cache.ttl(note), 0), 5, "the hit's note (after its reply)")
    assert 3000 < note_ttl <= 3600

    stranger = actions.issue_api_key(actions.create_team("Other")).plaintext
    assert report(platform, stranger, {"request_id": request_id})[0] == 404
    assert ask(client)[1] == "hit-exact"  # a stranger's report changed nothing

    status, body = report(platform, platform["key"], {"request_id": request_id})
    assert (status, body) == (200, {"request_id": request_id, "removed": True})
    assert ask(client)[1] == "miss"  # the next identical request goes to the model
    assert report(platform, platform["key"], {"request_id": request_id})[0] == 404
    assert report(platform, platform["key"], {"id": 1})[0] == 400
    assert metric_lines(platform)["sluice_cache_false_hits_total"] == 1


def test_a_hit_after_redis_forgot_its_scripts_still_raises_the_entrys_value(platform):
    """Hits are counted by script SHA in the hit's one pipeline; after a Redis restart
    (SCRIPT FLUSH here) the count must not be lost, or eviction would undervalue it."""
    client = platform["client"]
    cache = redis.Redis.from_url(platform["redis_url"], decode_responses=True)
    assert [ask(client)[1] for _ in range(2)] == ["miss", "hit-exact"]
    cache.script_flush()
    assert ask(client)[1] == "hit-exact"
    team = platform["team"].pk

    def frequency() -> int | None:
        [meta] = cache.hvals(f"sluice:cache:gdsf:{{exact:{team}}}:meta")
        return int(json.loads(meta)["f"]) if json.loads(meta)["f"] == 3 else None

    assert wait_until(frequency, 5, "the third request's hit to be counted") == 3


def test_a_sampled_reply_is_kept_five_minutes_and_a_deterministic_one_an_hour(platform):
    """Where a team caches sampled replies, they live sampled_ttl_s (300 s); deterministic
    ones keep the exact cache's hour."""
    update_cache_policy(platform["team"].pk, cache_sampled=True)
    time.sleep(2.1)  # every gateway process re-reads its copy of the policy within 2 s
    client, cache = platform["client"], redis.Redis.from_url(platform["redis_url"])
    for text, temperature in (("Tell me a story", 0.9), ("What is 2 + 2?", 0)):
        client.chat.completions.create(
            model="small-model",
            max_tokens=4,
            messages=[{"role": "user", "content": text}],
            temperature=temperature,
        )

    def ttls() -> list[int]:
        found = sorted(cache.ttl(k) for k in cache.scan_iter(f"{KEY_PREFIX}*"))
        return found if len(found) == 2 else []

    sampled, deterministic = wait_until(ttls, 10, "both replies to be kept")
    assert 0 < sampled <= 300 < deterministic <= 3600
