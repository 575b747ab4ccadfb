"""The OpenAI-compatible API through a live gateway, with the official openai client."""

import asyncio
import http.client
import json
import time

import openai
import pytest

from gateway.accounts import actions
from gateway.accounts.quota_usage import read_team_usage
from gateway.accounts.records import QuotaLimits
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from tests.conftest import MESSAGES
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


def recorded(*request_ids: str) -> bool:
    """Whether the ledger has a record for each request, once its pending events are in."""
    ingest("test-consumer")
    return UsageRecord.objects.filter(request_id__in=request_ids).count() == len(request_ids)


def recorded_with(**fields: object) -> bool:
    ingest("test-consumer")
    return UsageRecord.objects.filter(**fields).exists()


def test_non_streaming_and_streaming_completions_with_the_openai_client(platform):
    client = platform["client"]
    reply = client.chat.completions.create(model="small-model", messages=MESSAGES, max_tokens=12)
    assert reply.model == "small-model"
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.completion_tokens <= 12

    stream = client.chat.completions.create(
        model="small-model",
        messages=MESSAGES,
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == reply.choices[0].message.content  # the simulator is deterministic
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == reply.usage.completion_tokens

    # Settlement finishes just after the last chunk; then the ledger records both requests.
    wait_until(lambda: recorded(reply.id, chunks[0].id), 5, "both requests' usage to be recorded")
    record = UsageRecord.objects.get(request_id=reply.id)
    assert (record.status, record.model, record.completion_tokens) == (
        "ok",
        "small-model",
        reply.usage.completion_tokens,
    )
    assert record.prompt_tokens == reply.usage.prompt_tokens and record.worker
    assert UsageRecord.objects.filter(request_id=chunks[0].id).exists()


def test_metrics_expose_queue_length_and_in_flight_per_worker(platform):
    client = platform["client"]
    client.chat.completions.create(model="small-model", messages=MESSAGES, max_tokens=2)
    list(client.chat.completions.create(model="small-model", messages=MESSAGES, stream=True))
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=5)
    connection.request("GET", "/metrics")
    text = connection.getresponse().read().decode()
    assert 'sluice_queue_length{deployment="small-model"} 0.0' in text
    assert f'sluice_worker_in_flight{{worker="{platform["sim"].url}"}} 0.0' in text
    assert 'sluice_requests_total{model="small-model",status="200"}' in text
    # The stream's only: a whole reply (not streamed) has no first token to time.
    assert 'sluice_time_to_first_token_seconds_count{model="small-model"} 1.0' in text
    assert 'sluice_tokens_total{kind="completion",model="small-model"}' in text


def test_the_async_client_streams_too(platform):
    async def run() -> str:
        client = openai.AsyncOpenAI(
            base_url=platform["client"].base_url, api_key=platform["key"], max_retries=0
        )
        stream = await client.chat.completions.create(
            model="small-model", messages=MESSAGES, max_tokens=5, stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(run())


def test_errors_have_openai_shape_and_status(platform):
    base = platform["client"].base_url
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=base, api_key="sk-sluice-nope", max_retries=0).models.list()
    client = platform["client"]
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES)
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="small-model", messages=[], max_tokens=5)
    with pytest.raises(openai.InternalServerError) as no_worker:
        client.chat.completions.create(model="model-without-workers", messages=MESSAGES)
    assert no_worker.value.status_code == 503

    limited = actions.issue_api_key(platform["team"], allowed_models=("other",)).plaintext
    with pytest.raises(openai.PermissionDeniedError):
        openai.OpenAI(base_url=base, api_key=limited, max_retries=0).chat.completions.create(
            model="small-model", messages=MESSAGES
        )


def test_rate_limits_answer_429_with_retry_after_and_headers(platform):
    actions.update_quota_policy(platform["team"], requests_per_minute=3)
    # Kept as a sleep: policy records reach every process within a second, and no probe
    # could tell when without spending the quota it is about to test.
    time.sleep(1.2)
    client = platform["client"].with_options(max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="small-model", messages=MESSAGES, max_tokens=2
    )
    assert raw.headers["x-ratelimit-limit-requests"] == "3"
    assert raw.headers["x-request-id"].startswith("chatcmpl-")
    assert raw.headers["x-content-type-options"] == "nosniff"
    with pytest.raises(openai.RateLimitError) as limited:
        for _ in range(5):
            client.chat.completions.create(model="small-model", messages=MESSAGES, max_tokens=2)
    headers = limited.value.response.headers
    assert 1 <= int(headers["retry-after"]) <= 60
    assert headers["x-ratelimit-remaining-requests"] == "0"
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=5)
    connection.request("GET", "/metrics")
    metrics_text = connection.getresponse().read().decode()
    assert 'sluice_quota_rejections_total{limit="requests_per_minute"}' in metrics_text
    assert 'sluice_requests_total{model="small-model",status="429"}' in metrics_text


def test_a_client_that_leaves_mid_stream_cancels_the_worker_and_pays_for_what_it_got(platform):
    body = {
        "model": "small-model",
        "messages": MESSAGES,
        "max_tokens": 400,
        "stream": True,
        "ignore_eos": True,
    }
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=30)
    connection.request(
        "POST",
        "/v1/chat/completions",
        body=json.dumps(body),
        headers={"Authorization": f"Bearer {platform['key']}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    received = [response.readline() for _ in range(6)]
    assert any(line.startswith(b"data: ") for line in received)
    assert platform["sim"].metric("vllm:num_requests_running") == 1
    connection.close()
    wait_until(
        lambda: platform["sim"].metric("vllm:num_requests_running") == 0,
        2.0,
        "the worker to stop generating",
    )
    # Settlement runs as the gateway notices the disconnect: the reservation (the prompt plus
    # the 400 tokens asked for) becomes what was produced (a few tokens plus the prompt).
    limits = QuotaLimits(tokens_per_minute=100_000)

    def tokens_used() -> int:
        used = {u.limit: u.used for u in read_team_usage(platform["team"].pk, limits)}
        return used["tokens_per_minute"]

    wait_until(lambda: tokens_used() < 200, 5, "the reservation to be settled")
    assert tokens_used() > 0
    # The warm-up request was "ok"; this one is the only "cancelled".
    wait_until(lambda: recorded_with(status="cancelled"), 5, "the cancelled request's record")
    cancelled = UsageRecord.objects.get(status="cancelled")
    assert 0 < cancelled.completion_tokens < 400


def test_oversized_bodies_get_413_even_when_chunked(platform):
    port = platform["gateway"].port
    big = b'{"model": "small-model", "messages": [{"role": "user", "content": "' + b"x" * 2_000_000
    declared = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    declared.request(
        "POST",
        "/v1/chat/completions",
        body=big,
        headers={"Authorization": f"Bearer {platform['key']}"},
    )
    assert declared.getresponse().status == 413

    chunked = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    chunked.request(
        "POST",
        "/v1/chat/completions",
        body=iter([big[i : i + 65536] for i in range(0, len(big), 65536)]),
        encode_chunked=True,
        headers={"Authorization": f"Bearer {platform['key']}", "Transfer-Encoding": "chunked"},
    )
    response = chunked.getresponse()
    assert response.status == 413
    assert json.loads(response.read())["error"]["code"] == "request_too_large"


def test_a_body_that_arrives_in_parts_is_read_whole(platform):
    """A chunked upload, its parts apart in time, reaches the server as several messages:
    the handler keeps one message in memory and spools several, and both read the same."""
    body = json.dumps({"model": "small-model", "messages": MESSAGES, "max_tokens": 3}).encode()

    def parts():
        for start in range(0, len(body), 16):
            time.sleep(0.02)  # each part a message of its own
            yield body[start : start + 16]

    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=10)
    connection.request(
        "POST",
        "/v1/chat/completions",
        body=parts(),
        encode_chunked=True,
        headers={"Authorization": f"Bearer {platform['key']}", "Transfer-Encoding": "chunked"},
    )
    response = connection.getresponse()
    reply = json.loads(response.read())
    assert response.status == 200, reply
    assert reply["object"] == "chat.completion" and reply["usage"]["completion_tokens"] > 0


def test_admin_static_files_are_served_without_a_cdn(platform):
    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=5)
    for path, marker in (
        ("/static/admin/css/base.css", b"body"),
        ("/static/chat/chat.js", b"WebSocket"),
    ):
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status == 200
        assert marker in response.read()
