"""A request that ends before the worker's usage chunk is billed for the prompt the worker
processed, counted with the worker's own tokenizer (vLLM's /tokenize), never 0 and never a
characters-per-token guess."""

import http.client
import json
import time
from typing import Any

import openai
import pytest

from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference.chat_request import ChatRequest
from inference.sim.text import prompt_tokens
from tests.conftest import live_platform
from tests.sims import SimProcess
from tests.waiting import wait_until

# Words the simulator's tokenizer counts one by one: far from bytes / 3.
MESSAGES: list[Any] = [
    {"role": "system", "content": "Answer in one word."},
    {"role": "user", "content": "Which planet is the largest in the solar system?"},
]


@pytest.fixture
def slow_platform(redis_url):
    """A worker that takes two seconds to its first token, then a token every 50 ms."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=2000, fixed_itl_ms=50)
    try:
        yield from live_platform(redis_url, sim)
    finally:
        sim.stop()


def _stream_then_hang_up(
    platform: dict[str, Any], *, after_first_token: bool, stream: bool = True
) -> None:
    body = {
        "model": "small-model",
        "messages": MESSAGES,
        "max_tokens": 200,
        "ignore_eos": True,
        "stream": stream,
    }
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=30)
    headers = {"Authorization": f"Bearer {platform['key']}", "Content-Type": "application/json"}
    connection.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
    if after_first_token:
        response = connection.getresponse()
        assert response.status == 200 and response.fp is not None
        while not _has_text(response.fp.readline()):
            pass  # until a chunk with text: the worker is generating
    else:
        time.sleep(0.8)  # the worker has the request, its first token is 1.2 s away
    connection.close()


def _has_text(line: bytes) -> bool:
    if not line.startswith(b"data: {"):
        return False
    choices = json.loads(line[6:])["choices"]
    return any((choice.get("delta") or {}).get("content") for choice in choices)


def _settled_records(expected: int) -> list[UsageRecord]:
    def cancelled() -> list[UsageRecord]:
        ingest("test-consumer")
        # Not the fixture's warm-up requests: they completed, or failed before a worker.
        records = list(UsageRecord.objects.filter(status="cancelled"))
        return records if len(records) >= expected else []

    return wait_until(cancelled, 15, "the abandoned request to be settled")


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_client_leaving_before_the_first_token_pays_for_its_prompt(slow_platform):
    _stream_then_hang_up(slow_platform, after_first_token=False)
    [record] = _settled_records(1)
    assert record.status == "cancelled"
    assert (record.prompt_tokens, record.completion_tokens) == (len(prompt_tokens(MESSAGES)), 0)


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_client_leaving_mid_stream_pays_the_prompt_its_worker_counted(slow_platform):
    _stream_then_hang_up(slow_platform, after_first_token=True)
    [record] = _settled_records(1)
    assert record.status == "cancelled"
    assert record.prompt_tokens == len(prompt_tokens(MESSAGES))
    assert 1 <= record.completion_tokens < 200


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_client_leaving_a_reply_it_did_not_stream_pays_its_max_tokens(slow_platform):
    """Its worker was asked for the whole reply, which cannot tell how far it got: billed
    as reserved, so leaving cannot make a generation free."""
    _stream_then_hang_up(slow_platform, after_first_token=False, stream=False)
    [record] = _settled_records(1)
    assert record.status == "cancelled"
    assert (record.prompt_tokens, record.completion_tokens) == (len(prompt_tokens(MESSAGES)), 200)


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_reply_not_streamed_past_its_timeout_is_a_502_billed_its_prompt(redis_url, monkeypatch):
    """Its worker had the request, prefilled it and may have generated all along; the
    client got an error, so no completion tokens, and the timeout is not retried."""
    monkeypatch.setenv("UPSTREAM_REPLY_TIMEOUT_S", "1")  # the gateway's environment
    # A warm-up's few tokens come within the timeout; 200 of them, 50 ms apart, do not.
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=50, fixed_itl_ms=50)
    try:
        platform = live_platform(redis_url, sim)
        client = next(platform)["client"]
        with pytest.raises(openai.APIStatusError) as refused:
            client.with_options(max_retries=0).chat.completions.create(
                model="small-model",
                messages=MESSAGES,
                max_tokens=200,
                extra_body={"ignore_eos": True},
            )
        assert refused.value.status_code == 502
        # Not any failed record: the platform's warm-up may have met the worker not ready yet.
        request_id = refused.value.response.headers["x-request-id"]

        def failed() -> list[UsageRecord]:
            ingest("test-consumer")
            return list(UsageRecord.objects.filter(request_id=request_id, status="failed"))

        [record] = wait_until(failed, 15, "the timed-out request's usage record")
        assert (record.prompt_tokens, record.completion_tokens) == (len(prompt_tokens(MESSAGES)), 0)
        platform.close()
    finally:
        sim.stop()


def _chat(messages: list[dict[str, Any]]) -> ChatRequest:
    return ChatRequest("m", messages, 16, False, False, {})


@pytest.mark.unit
def test_the_admission_estimate_does_not_undercount_cjk_text():
    # About one token per CJK character in real tokenizers; chars / 3 guessed a third.
    question = "太阳系中最大的行星是哪一颗请详细说明理由" * 10  # 200 characters
    assert _chat([{"role": "user", "content": question}]).estimated_prompt_tokens() >= 200


@pytest.mark.unit
def test_the_admission_estimate_counts_fields_beside_the_content():
    plain = [{"role": "user", "content": "hi"}]
    named = [{"role": "user", "content": "hi", "name": "x" * 300}]
    assert _chat(named).estimated_prompt_tokens() >= _chat(plain).estimated_prompt_tokens() + 90


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_request_is_reconciled_even_when_redis_forgot_the_script_meanwhile(slow_platform):
    """Settlement sends reconcile and the usage event in one pipeline, by the script's SHA:
    a Redis restart between admission and settlement (here: SCRIPT FLUSH) must not leave
    the reservation fully charged."""
    import redis

    from gateway.accounts.quota_usage import read_team_usage
    from gateway.accounts.records import quota_limits_from_row

    platform = slow_platform
    client = platform["client"]
    stream = client.chat.completions.create(
        model="small-model", messages=MESSAGES, max_tokens=300, stream=True, temperature=0.7
    )
    redis.Redis.from_url(platform["redis_url"]).script_flush()  # admitted, not yet settled
    list(stream)
    team = platform["team"]
    limits = quota_limits_from_row(team.quota)

    def settled_tokens() -> int:
        ingest("test-consumer")
        return sum(r.prompt_tokens + r.completion_tokens for r in UsageRecord.objects.all())

    def reconciled() -> bool:  # every reservation brought down to what was used
        used = {u.limit: u.used for u in read_team_usage(team.pk, limits)}
        return used["tokens_per_minute"] == settled_tokens()

    wait_until(reconciled, 10, "the team's minute tokens to equal the settled tokens")
