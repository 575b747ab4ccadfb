"""Bad input and failures on the HTTP API, through a live gateway: OpenAI's error shape and
status for each, and never a 500."""

import http.client
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.embedded_redis import free_port
from foundation.redis_clients import reset_clients
from gateway.accounts import actions
from gateway.accounts.records import key_records
from tests.conftest import MESSAGES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
REFUSALS = {400, 404, 413, 503}  # 503: `model-without-workers`, the one valid model

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "assistant", "tool", "robot"]) | json_values},
        optional={"content": st.text(max_size=50) | json_values, "name": json_values},
    ),
    max_size=3,
)
bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {
            "model": st.just("model-without-workers") | json_values,
            "messages": messages | json_values,
        },
        optional={
            "max_tokens": st.integers() | json_values,
            "stream": json_values,
            "stream_options": json_values,
            "temperature": st.floats(allow_nan=True, allow_infinity=True) | json_values,
            "top_p": json_values,
            "n": json_values,
            "stop": json_values,
            "seed": json_values,
            "tools": json_values,
        },
    ).map(lambda v: json.dumps(v).encode()),
)


@pytest.fixture
def connection(platform: dict[str, Any]) -> Iterator[http.client.HTTPConnection]:
    conn = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=10)
    yield conn
    conn.close()


def test_a_thousand_malformed_bodies_are_refused_in_openai_shape_never_with_a_500(
    platform: dict[str, Any], connection: http.client.HTTPConnection
) -> None:
    unlimited = actions.issue_api_key(actions.create_team("Fuzz", **actions.NO_LIMITS)).plaintext
    statuses: set[int] = set()

    @settings(
        max_examples=1000,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(bodies)
    def post(raw: bytes) -> None:
        connection.request(
            "POST",
            "/v1/chat/completions",
            body=raw,
            headers={"Authorization": f"Bearer {unlimited}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        body = json.loads(response.read())
        statuses.add(response.status)
        assert response.status in REFUSALS, body
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert response.getheader("x-request-id", "").startswith("chatcmpl-")

    post()
    assert {400, 503} <= statuses  # the fuzzer reached both validation and dispatch


def test_a_stream_over_quota_gets_429_with_retry_after_and_rate_limit_headers(platform):
    actions.update_quota_policy(platform["team"], requests_per_minute=1)
    # Kept as a sleep: policy records reach every process within a second, and no probe
    # could tell when without spending the quota it is about to test.
    time.sleep(1.2)
    client = platform["client"]
    with pytest.raises(openai.RateLimitError) as limited:
        for _ in range(3):
            for _chunk in client.chat.completions.create(
                model="small-model", messages=MESSAGES, max_tokens=2, stream=True
            ):
                pass
    headers = limited.value.response.headers
    assert 1 <= int(headers["retry-after"]) <= 60
    assert headers["x-ratelimit-limit-requests"] == "1"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert limited.value.body["code"] == "requests_per_minute"  # type: ignore[index]


def test_a_worker_dying_mid_stream_ends_the_stream_with_an_error_chunk(platform):
    stream = platform["client"].chat.completions.create(
        model="small-model",
        messages=MESSAGES,
        max_tokens=300,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    received = 0
    with pytest.raises(openai.APIError) as failed:
        for _chunk in stream:
            received += 1
            if received == 3:
                platform["sim"].process.send_signal(signal.SIGKILL)
    assert 3 <= received < 300
    assert "worker failed" in failed.value.message


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models"])
def test_redis_down_answers_503_in_openai_shape(settings, path):
    key = actions.issue_api_key(actions.create_team("Acme")).plaintext
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    reset_clients()
    key_records.clear_local()
    client, auth = AsyncClient(), {"Authorization": f"Bearer {key}"}
    if path == "/v1/models":
        response = async_to_sync(client.get)(path, headers=auth)
    else:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        response = async_to_sync(client.post)(
            path, body, content_type="application/json", headers=auth
        )
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "service_unavailable"
