"""n > 1 choices through a live gateway and the simulator, with the official openai client:
every choice assembled or streamed under its index, usage counting every choice (the
prompt once), admission reserving n x max_tokens, never cached, and refused on the web
chat's socket."""

import asyncio
from typing import Any

import openai
import pytest
from channels.testing import WebsocketCommunicator

from gateway.accounts import actions
from gateway.asgi import application
from inference.chat_request import MAX_CHOICES, chat_request_from
from tests.conftest import MESSAGES
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


def test_three_choices_come_back_assembled_with_usage_summed_over_them(platform):
    reply = platform["client"].chat.completions.create(
        model="small-model", messages=MESSAGES, max_tokens=40, n=3
    )
    assert [choice.index for choice in reply.choices] == [0, 1, 2]
    assert all(choice.message.content for choice in reply.choices)
    assert all(choice.finish_reason in ("stop", "length") for choice in reply.choices)
    assert len({choice.message.content for choice in reply.choices}) > 1  # sampled apart
    single = platform["client"].chat.completions.create(
        model="small-model", messages=MESSAGES, max_tokens=40
    )
    assert reply.choices[0].message.content == single.choices[0].message.content
    assert reply.usage is not None and single.usage is not None
    assert reply.usage.prompt_tokens == single.usage.prompt_tokens  # the prompt once
    words = sum(len((c.message.content or "").split()) for c in reply.choices)
    assert reply.usage.completion_tokens == words  # a simulated token is a word
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + words


def test_two_choices_stream_under_their_indices_with_one_usage_at_the_end(platform):
    stream = platform["client"].chat.completions.create(
        model="small-model",
        messages=MESSAGES,
        max_tokens=30,
        n=2,
        stream=True,
        stream_options={"include_usage": True},
    )
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    usages = []
    for chunk in stream:
        if chunk.usage is not None:
            usages.append(chunk.usage)
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
    assert set(texts) == {0, 1} and all(texts.values())
    assert set(finishes) == {0, 1}
    [usage] = usages
    assert usage.completion_tokens == sum(len(text.split()) for text in texts.values())


def test_admission_reserves_max_tokens_for_every_choice(platform):
    """A TPM that holds max_tokens once, not three times: n=3 is refused (the request alone
    exceeds it, so it never could pass), n=1 still goes through."""
    client = platform["client"]
    actions.update_quota_policy(platform["team"], tokens_per_minute=10_000)

    def applied() -> bool:  # a one-token request reads the limit back in its headers
        raw = client.chat.completions.with_raw_response.create(
            model="small-model", messages=MESSAGES, max_tokens=1
        )
        return bool(raw.headers["x-ratelimit-limit-tokens"] == "10000")

    wait_until(applied, 15, "the tighter TPM to apply", poll_s=0.3)
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(
            model="small-model", messages=MESSAGES, max_tokens=4_000, n=3
        )
    assert refused.value.code == "tokens_per_minute"
    assert "alone exceeds" in refused.value.message  # 3 x 4,000 never fits 10,000
    reply = client.chat.completions.create(model="small-model", messages=MESSAGES, max_tokens=4_000)
    assert len(reply.choices) == 1


@pytest.mark.parametrize("n", [0, MAX_CHOICES + 1, True, 1.5, "2"])
def test_n_outside_one_to_max_choices_is_refused(platform, n):
    with pytest.raises(openai.BadRequestError) as refused:
        platform["client"].chat.completions.create(
            model="small-model", messages=MESSAGES, max_tokens=5, extra_body={"n": n}
        )
    assert refused.value.status_code == 400
    assert refused.value.param == "n"


def test_several_choices_are_neither_cached_nor_served_from_the_cache(platform):
    client = platform["client"]
    options: dict[str, Any] = {
        "model": "small-model",
        "messages": [{"role": "user", "content": "Cache me if you can."}],
        "max_tokens": 10,
        "temperature": 0,
    }
    single = [client.chat.completions.with_raw_response.create(**options) for _ in range(2)]
    assert [raw.headers["x-sluice-cache"] for raw in single] == ["miss", "hit-exact"]
    several = [client.chat.completions.with_raw_response.create(**options, n=2) for _ in range(2)]
    assert [raw.headers["x-sluice-cache"] for raw in several] == ["bypass", "bypass"]
    assert all(len(raw.parse().choices) == 2 for raw in several)


def test_the_upstream_body_carries_n_only_above_one():
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert "n" not in chat_request_from(body).upstream_body()
    assert "n" not in chat_request_from({**body, "n": None}).upstream_body()
    assert chat_request_from({**body, "n": 4}).upstream_body()["n"] == 4


async def _socket_error(api_key: str) -> dict[str, Any]:
    socket = WebsocketCommunicator(
        application, "/ws/chat/", headers=[(b"origin", b"http://127.0.0.1:8000")]
    )
    assert (await socket.connect())[0]
    await socket.send_json_to({"type": "auth", "api_key": api_key})
    assert (await socket.receive_json_from(timeout=5))["type"] == "ready"
    assert (await socket.receive_json_from(timeout=5))["type"] == "quota"
    await socket.send_json_to(
        {"type": "chat", "model": "small-model", "max_tokens": 5, "messages": MESSAGES, "n": 2}
    )
    event: dict[str, Any] = await socket.receive_json_from(timeout=10)
    await socket.disconnect()
    return event


def test_the_web_chat_refuses_several_choices(redis_url):
    team = actions.create_team("Acme", **{**actions.NO_LIMITS, "requests_per_minute": 100})
    event = asyncio.run(_socket_error(actions.issue_api_key(team).plaintext))
    assert event["type"] == "error", event
    assert "n must be 1" in str(event)
