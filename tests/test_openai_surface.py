"""Tool calling, logprobs, reasoning, vLLM's own fields and GET /v1/models/{id} through a
live gateway and the simulator, with the official openai client (sync, async, streaming).
The simulator's deterministic replies (docs/simulator.md, inference/sim/replies.py) make
every answer here known in advance."""

import asyncio
import json
from typing import Any

import openai
import pytest

from tests.conftest import MESSAGES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

QUESTION = "What is the weather in Paris?"
ASK: list[Any] = [{"role": "user", "content": QUESTION}]
WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    },
}
TIME: Any = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
NOT_OFFERED = {"type": "function", "function": {"name": "get_time"}}
THINKING = {"chat_template_kwargs": {"enable_thinking": True}}


def streamed_calls(stream: Any) -> tuple[dict[int, dict[str, str]], str | None, int]:
    """A stream's tool calls assembled by index, its finish_reason and how many chunks
    carried an arguments fragment."""
    calls: dict[int, dict[str, str]] = {}
    finish, fragments = None, 0
    for chunk in stream:
        for choice in chunk.choices:
            for part in choice.delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                if part.id:
                    call["id"] = part.id
                if part.function and part.function.name:
                    assert not call["arguments"], "the name comes before the arguments"
                    call["name"] = part.function.name
                if part.function and part.function.arguments:
                    call["arguments"] += part.function.arguments
                    fragments += 1
            finish = choice.finish_reason or finish
    return calls, finish, fragments


def test_a_tool_call_is_assembled_in_a_reply_and_streamed_in_fragments(platform):
    client = platform["client"]
    reply = client.chat.completions.create(
        model="small-model", messages=ASK, tools=[WEATHER], max_tokens=60
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": QUESTION, "days": 6}

    stream = client.chat.completions.create(
        model="small-model", messages=ASK, tools=[WEATHER], max_tokens=60, stream=True
    )
    calls, finish, fragments = streamed_calls(stream)
    assert finish == "tool_calls" and fragments > 3
    assert calls == {
        0: {"id": call.id, "name": "get_weather", "arguments": call.function.arguments}
    }


def test_tool_choice_names_the_function_or_asks_for_every_one(platform):
    client = platform["client"]
    named = client.chat.completions.create(
        model="small-model",
        messages=ASK,
        tools=[WEATHER, TIME],
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        max_tokens=60,
    )
    assert [c.function.name for c in named.choices[0].message.tool_calls or []] == ["get_time"]

    stream = client.chat.completions.create(
        model="small-model",
        messages=ASK,
        tools=[WEATHER, TIME],
        tool_choice="required",
        max_tokens=80,
        stream=True,
    )
    calls, finish, _ = streamed_calls(stream)
    assert finish == "tool_calls"
    assert [calls[i]["name"] for i in sorted(calls)] == ["get_weather", "get_time"]

    one = client.chat.completions.create(
        model="small-model",
        messages=ASK,
        tools=[WEATHER, TIME],
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=60,
    )
    assert len(one.choices[0].message.tool_calls or []) == 1
    text = client.chat.completions.create(
        model="small-model", messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=8
    )
    assert text.choices[0].message.content and not text.choices[0].message.tool_calls


def test_a_tool_result_goes_back_and_gets_an_answer_with_the_async_client(platform):
    async def round_trip() -> tuple[Any, Any]:
        client = openai.AsyncOpenAI(
            base_url=platform["client"].base_url, api_key=platform["key"], max_retries=0
        )
        first = await client.chat.completions.create(
            model="small-model", messages=ASK, tools=[WEATHER], max_tokens=60
        )
        message = first.choices[0].message
        call = (message.tool_calls or [])[0]
        history = [
            *ASK,
            message.model_dump(exclude_none=True),  # content null, as the client sends it
            {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"},
        ]
        second = await client.chat.completions.create(
            model="small-model", messages=history, tools=[WEATHER], max_tokens=8
        )
        return first, second

    first, second = asyncio.run(round_trip())
    assert first.choices[0].finish_reason == "tool_calls"
    assert second.choices[0].message.content and not second.choices[0].message.tool_calls
    assert second.choices[0].finish_reason in ("stop", "length")


def test_an_exact_cache_hit_replays_a_tool_call_in_the_shape_it_was_generated(platform):
    client = platform["client"]
    options: dict[str, Any] = {
        "model": "small-model",
        "messages": ASK,
        "tools": [WEATHER],
        "temperature": 0,
        "max_tokens": 60,
        "extra_body": THINKING,
    }
    generated = client.chat.completions.with_raw_response.create(**options)
    replayed = client.chat.completions.with_raw_response.create(**options)
    assert (generated.headers["x-sluice-cache"], replayed.headers["x-sluice-cache"]) == (
        "miss",
        "hit-exact",
    )
    first, again = generated.parse().choices[0], replayed.parse().choices[0]
    assert first.message.model_extra and first.message.model_extra["reasoning_content"]
    assert again.model_dump() == first.model_dump()  # content null, tool_calls, reasoning

    stream = client.chat.completions.create(**options, stream=True)
    calls, finish, _ = streamed_calls(stream)
    [call] = first.message.tool_calls or []
    assert finish == "tool_calls"
    assert calls == {
        0: {"id": call.id, "name": call.function.name, "arguments": call.function.arguments}
    }

    other_tools = client.chat.completions.with_raw_response.create(**{**options, "tools": [TIME]})
    assert other_tools.headers["x-sluice-cache"] == "miss"  # the tools are in the key


def test_logprobs_are_assembled_relayed_and_never_cached(platform):
    client = platform["client"]
    options: dict[str, Any] = {
        "model": "small-model",
        "messages": MESSAGES,
        "temperature": 0,
        "max_tokens": 6,
        "logprobs": True,
        "top_logprobs": 2,
    }
    raw = client.chat.completions.with_raw_response.create(**options)
    reply = raw.parse()
    assert raw.headers["x-sluice-cache"] == "bypass"
    content = (reply.choices[0].logprobs and reply.choices[0].logprobs.content) or []
    assert "".join(t.token for t in content) == reply.choices[0].message.content
    assert reply.usage is not None and len(content) == reply.usage.completion_tokens
    assert all(len(t.top_logprobs) == 2 and t.top_logprobs[0].token == t.token for t in content)
    assert all(t.logprob <= 0 for t in content)

    streamed: list[Any] = []
    for chunk in client.chat.completions.create(**options, stream=True):
        for choice in chunk.choices:
            streamed += (choice.logprobs and choice.logprobs.content) or []
    assert [t.model_dump() for t in streamed] == [t.model_dump() for t in content]
    again = client.chat.completions.with_raw_response.create(**options)
    assert again.headers["x-sluice-cache"] == "bypass"


def test_reasoning_content_is_kept_in_streams_and_assembled_replies(platform):
    client = platform["client"]
    reply = client.chat.completions.create(
        model="small-model", messages=ASK, max_tokens=40, extra_body=THINKING
    )
    message = reply.choices[0].message
    assert (message.model_extra or {})["reasoning_content"] == f"Let me think about: {QUESTION}"
    assert message.content
    reasoning, text = [], []
    for chunk in client.chat.completions.create(
        model="small-model", messages=ASK, max_tokens=40, extra_body=THINKING, stream=True
    ):
        for choice in chunk.choices:
            reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
            text.append(choice.delta.content or "")
    assert "".join(reasoning) == f"Let me think about: {QUESTION}"
    assert "".join(text) == message.content


def test_ignored_and_vllm_fields_are_accepted_and_ignored_ones_miss_no_cache_hit(platform):
    client = platform["client"]
    vllm = {
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "top_k": 40,
        "min_tokens": 1,
        "guided_choice": ["yes", "no"],
        "skip_special_tokens": True,
        "include_stop_str_in_output": False,
        "spaces_between_special_tokens": True,
        "chat_template_kwargs": {"enable_thinking": False},
    }

    def ask(**ignored: Any) -> str:
        raw = client.chat.completions.with_raw_response.create(
            model="small-model",
            messages=MESSAGES,
            temperature=0,
            max_tokens=4,
            user="someone",
            extra_body=vllm,
            **ignored,
        )
        assert raw.parse().choices[0].message.content
        return str(raw.headers["x-sluice-cache"])

    assert ask(metadata={"app": "a"}, store=True, service_tier="auto") == "miss"
    # Not sent to the worker, not in the key: the same request otherwise is a hit.
    assert ask(metadata={"app": "b"}, store=False, service_tier="default") == "hit-exact"


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools.0.function.name"),
        ({"tools": [{"type": "web_search"}]}, "tools.0.type"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {}}}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": NOT_OFFERED}, "tool_choice"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"messages": [*ASK, {"role": "tool", "content": "x"}]}, "messages.1.tool_call_id"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"extra_body": {"min_p": 2}}, "min_p"),
        ({"extra_body": {"guided_regex": "x" * 5000}}, "guided_regex"),
        ({"service_tier": "gold"}, "service_tier"),
    ],
)  # fmt: skip
def test_bad_tool_shapes_and_fields_get_400_naming_the_param(platform, options, param):
    with pytest.raises(openai.BadRequestError) as refused:
        platform["client"].chat.completions.create(
            **{"model": "small-model", "messages": ASK, "max_tokens": 4, **options}
        )
    assert refused.value.body["param"] == param  # type: ignore[index]
    assert refused.value.body["code"] == "invalid_request"  # type: ignore[index]


def test_legacy_functions_get_a_function_call_back(platform):
    client = platform["client"]
    function = WEATHER["function"]
    reply = client.chat.completions.create(
        model="small-model",
        messages=ASK,
        functions=[function],
        function_call={"name": "get_weather"},
        max_tokens=60,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "function_call" and not choice.message.tool_calls
    assert choice.message.function_call is not None
    assert choice.message.function_call.name == "get_weather"
    assert json.loads(choice.message.function_call.arguments)["city"] == QUESTION

    name, arguments = "", ""
    for chunk in client.chat.completions.create(
        model="small-model",
        messages=ASK,
        functions=[function],
        max_tokens=60,
        stream=True,
    ):
        for streamed in chunk.choices:
            assert not streamed.delta.tool_calls
            if streamed.delta.function_call:
                name += streamed.delta.function_call.name or ""
                arguments += streamed.delta.function_call.arguments or ""
    assert (name, arguments) == ("get_weather", choice.message.function_call.arguments)


def test_a_model_is_retrieved_by_id_or_is_a_404_in_openai_shape(platform):
    client = platform["client"]
    model = client.models.retrieve("small-model")
    assert (model.id, model.object, model.owned_by) == ("small-model", "model", "sluice")
    listed = {m.id: m for m in client.models.list()}
    assert listed["small-model"] == model
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("no-such-model")
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]
    assert missing.value.body["param"] == "model"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("org/no-such-model")  # an id with a slash is still an id
    stranger = openai.OpenAI(base_url=client.base_url, api_key="sk-sluice-nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        stranger.models.retrieve("small-model")
