"""Tool calling, logprobs, reasoning and vLLM's own fields, in process: validation
(inference/chat_request.py, chat_options.py, chat_tools.py), assembling a reply from
deltas (inference/reply.py), cached replies (caching/exact.py) and the simulator's
replies (inference/sim/replies.py). The same surface through a live gateway with the
openai client: tests/test_openai_surface.py."""

import json
from typing import Any

import pytest

from caching import exact
from caching.exact import CachedReply
from inference.chat_request import InvalidRequest, chat_request_from
from inference.chat_tools import legacy_chunk, legacy_message
from inference.reply import ReplyAssembler
from inference.sim.replies import called_functions, reply_for
from inference.sim.text import prompt_tokens

pytestmark = pytest.mark.unit

USER = {"role": "user", "content": "What is the weather in Paris?"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
CALL: dict[str, Any] = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": "{}"},
}


def tool(**function: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "f", **function}}


NAMED_NOPE = {"type": "function", "function": {"name": "nope"}}


def chat(**fields: Any) -> Any:
    return chat_request_from({"model": "m", "messages": [USER], **fields})


def refused_param(**fields: Any) -> str | None:
    with pytest.raises(InvalidRequest) as refused:
        chat(**fields)
    return refused.value.param


def test_tools_and_every_tool_choice_pass_through_to_the_worker():
    named = {"type": "function", "function": {"name": "get_time"}}
    for choice in ("auto", "none", "required", named):
        body = chat(tools=[WEATHER, TIME], tool_choice=choice, parallel_tool_calls=False)
        upstream = body.upstream_body()
        assert upstream["tools"] == [WEATHER, TIME]
        assert upstream["tool_choice"] == choice
        assert upstream["parallel_tool_calls"] is False
    assert chat(tools=[WEATHER]).may_call_tools
    assert not chat(tools=[WEATHER], tool_choice="none").may_call_tools


def test_tool_schemas_count_in_the_admission_estimate():
    assert chat(tools=[WEATHER]).estimated_prompt_tokens() > chat().estimated_prompt_tokens() + 30


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"tools": []}, "tools"),
        ({"tools": {"type": "function"}}, "tools"),
        ({"tools": [WEATHER] * 129}, "tools"),
        ({"tools": [{"type": "custom", "custom": {"name": "x"}}]}, "tools.0.type"),
        ({"tools": [{"type": "function"}]}, "tools.0.function"),
        ({"tools": [tool(name="two words")]}, "tools.0.function.name"),
        ({"tools": [tool(parameters=[])]}, "tools.0.function.parameters"),
        ({"tools": [tool(extra=1)]}, "tools.0.function"),
        ({"tools": [WEATHER, WEATHER]}, "tools"),
        ({"tools": [tool(description="x" * 70_000)]}, "tools"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": ["auto"]}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": NAMED_NOPE}, "tool_choice"),
        ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
        ({"tools": [WEATHER], "functions": [WEATHER["function"]]}, "functions"),
        ({"functions": [{"name": "f"}], "function_call": {"name": "g"}}, "function_call"),
        ({"function_call": "auto"}, "function_call"),
        ({"functions": [{"name": "f"}], "tool_choice": "auto"}, "tool_choice"),
    ],
)
def test_bad_tool_definitions_are_refused_naming_the_parameter(fields, param):
    assert refused_param(**fields) == param


def test_tool_calls_and_results_in_the_history_pass_validation():
    history = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
    ]
    assert chat_request_from({"model": "m", "messages": history}).messages == history


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"role": "tool", "content": "x"}, "messages.1.tool_call_id"),
        ({"role": "tool", "tool_call_id": 7, "content": "x"}, "messages.1.tool_call_id"),
        ({"role": "user", "content": "x", "tool_calls": [CALL]}, "messages.1.tool_calls"),
        ({"role": "user", "content": "x", "tool_call_id": "call_1"}, "messages.1.tool_call_id"),
        ({"role": "assistant", "tool_calls": []}, "messages.1.tool_calls"),
        ({"role": "assistant", "tool_calls": [{**CALL, "type": "web"}]}, "messages.1.tool_calls.0"),
        (
            {
                "role": "assistant",
                "tool_calls": [{**CALL, "function": {**CALL["function"], "arguments": {}}}],
            },
            "messages.1.tool_calls.0",
        ),
        ({"role": "assistant", "tool_calls": [{**CALL, "id": ""}]}, "messages.1.tool_calls.0"),
        ({"role": "function", "content": "x"}, "messages.1.name"),
    ],
)
def test_bad_tool_messages_are_refused_naming_the_field(message, param):
    with pytest.raises(InvalidRequest) as refused:
        chat_request_from({"model": "m", "messages": [USER, message]})
    assert refused.value.param == param


def test_legacy_functions_are_sent_as_tools_and_answered_as_function_call():
    history = [
        USER,
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "done"},
    ]
    legacy = {"functions": [{"name": "f"}], "function_call": {"name": "f"}}
    request = chat_request_from({"model": "m", "messages": history, **legacy})
    assert request.legacy_functions
    assert request.options == {
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "parallel_tool_calls": False,
    }
    assert request.messages[1]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ]
    assert request.messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "done"}

    delta = {"tool_calls": [{"index": 0, "id": "x", "type": "function", "function": {"name": "f"}}]}
    chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    assert legacy_chunk(chunk)["choices"][0]["delta"] == {"function_call": {"name": "f"}}
    finished = legacy_chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    assert finished["choices"][0]["finish_reason"] == "function_call"
    message = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert legacy_message(message, "tool_calls") == (
        {"role": "assistant", "content": None, "function_call": CALL["function"]},
        "function_call",
    )


def test_ignored_fields_are_checked_then_dropped():
    request = chat(metadata={"team": "a"}, store=True, service_tier="auto", user="u1")
    assert request.upstream_body().keys() >= {"user"}
    assert not request.upstream_body().keys() & {"metadata", "store", "service_tier"}
    assert refused_param(metadata={"k": 1}) == "metadata"
    assert refused_param(metadata={str(i): "v" for i in range(17)}) == "metadata"
    assert refused_param(store="yes") == "store"
    assert refused_param(service_tier="gold") == "service_tier"
    assert refused_param(prediction={"type": "content", "content": "x"}) == "prediction"


VLLM_FIELDS = {
    "min_p": 0.05,
    "repetition_penalty": 1.1,
    "length_penalty": 1.0,
    "top_k": 40,
    "min_tokens": 2,
    "guided_json": {"type": "object"},
    "guided_regex": "[a-z]+",
    "guided_choice": ["yes", "no"],
    "guided_grammar": 'root ::= "yes" | "no"',
    "structured_outputs": {"choice": ["yes", "no"]},
    "chat_template_kwargs": {"enable_thinking": False},
    "skip_special_tokens": False,
    "include_stop_str_in_output": True,
    "spaces_between_special_tokens": False,
    "logprobs": True,
    "top_logprobs": 5,
}


def test_vllm_sampling_fields_pass_through_unchanged():
    assert chat(**VLLM_FIELDS).upstream_body().items() >= VLLM_FIELDS.items()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("min_p", 1.5),
        ("repetition_penalty", 0),
        ("repetition_penalty", "high"),
        ("length_penalty", 99),
        ("guided_json", {"d": "x" * 20_000}),
        ("guided_json", 5),
        ("guided_regex", "a" * 3000),
        ("guided_regex", ""),
        ("guided_choice", []),
        ("guided_choice", ["ok", 2]),
        ("guided_choice", ["x"] * 300),
        ("guided_grammar", "g" * 20_000),
        ("structured_outputs", {}),
        ("chat_template_kwargs", {"chat_template": "{{ 7 * 7 }}"}),
        ("chat_template_kwargs", ["enable_thinking"]),
        ("skip_special_tokens", 1),
        ("logprobs", "yes"),
        ("top_logprobs", 21),
    ],
)
def test_vllm_fields_out_of_type_range_or_size_are_refused(field, value):
    body = {"logprobs": True} if field == "top_logprobs" else {}
    assert refused_param(**body, **{field: value}) == field


def test_top_logprobs_needs_logprobs():
    assert refused_param(top_logprobs=2) == "top_logprobs"


def deltas(*items: dict[str, Any], finish: str = "stop") -> list[dict[str, Any]]:
    chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in items]
    return [*chunks, {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]


def test_a_reply_is_assembled_from_tool_call_deltas_by_index():
    reply = ReplyAssembler()
    for chunk in deltas(
        {"role": "assistant", "content": ""},
        {"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "f"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"x": '}}]},
        {"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "g"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]},
        {"tool_calls": "garbage"},  # a worker's odd field is skipped, never a 500
        finish="tool_calls",
    ):
        reply.add(chunk)
    assert reply.message() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }
    assert reply.finish_reason == "tool_calls" and reply.logprobs() is None


def test_reasoning_and_logprobs_are_assembled_in_order():
    reply = ReplyAssembler()
    token = {"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}
    for chunk in deltas({"reasoning_content": "Think"}, {"reasoning": "ing."}, {"content": "Hi"}):
        reply.add(chunk)
    reply.add({"choices": [{"index": 0, "delta": {}, "logprobs": {"content": [token]}}]})
    message = {"role": "assistant", "content": "Hi", "reasoning_content": "Thinking."}
    assert reply.message() == message
    assert reply.logprobs() == {"content": [token]}


def test_a_cached_tool_call_replays_as_deltas_that_assemble_to_the_same_reply():
    calls = [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    stored = CachedReply("", "tool_calls", 10, 5, reasoning_content="Because.", tool_calls=calls)
    again = CachedReply.decoded(json.loads(exact.encode(stored)))
    assert again == stored
    reply = ReplyAssembler()
    for chunk in exact.replay_chunks(again, "chatcmpl-x", 0, "m", include_usage=True):
        reply.add(chunk)
    assert reply.message() == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Because.",
        "tool_calls": calls,
    }
    assert reply.finish_reason == "tool_calls"


def test_entries_stored_before_tool_calls_were_kept_still_read():
    old = json.dumps(
        {"content": "Paris", "finish_reason": "stop", "prompt_tokens": 9, "completion_tokens": 1}
    )
    reply = CachedReply.decoded(json.loads(old))
    assert (reply.content, reply.tool_calls, reply.reasoning_content) == ("Paris", None, None)
    assert exact.encode(reply) == old  # a text reply is stored as before


def sim_reply(options: dict[str, Any], messages: list[dict[str, str]], max_tokens: int = 200):
    prompt = prompt_tokens(messages)
    return reply_for(options, messages, prompt, max_tokens, 20, None)


def test_the_simulator_calls_the_chosen_function_with_arguments_from_the_prompt():
    tools = [WEATHER, TIME]
    assert [f["name"] for f in called_functions({"tools": tools}, "user")] == ["get_weather"]
    assert called_functions({"tools": tools}, "tool") == []  # a tool result gets text
    assert called_functions({"tools": tools, "tool_choice": "none"}, "user") == []
    named = {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "get_time"}}}
    assert [f["name"] for f in called_functions(named, "tool")] == ["get_time"]
    required = {"tools": tools, "tool_choice": "required"}
    assert len(called_functions(required, "user")) == 2
    assert len(called_functions({**required, "parallel_tool_calls": False}, "user")) == 1

    reply = ReplyAssembler()
    for piece in sim_reply({"tools": tools}, [USER]).pieces:
        reply.add({"choices": [{"index": 0, "delta": piece.delta}]})
    [call] = reply.message()["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": USER["content"]}
    assert call["id"].startswith("chatcmpl-tool-")
    assert sim_reply({"tools": tools}, [USER]).calls


def test_the_simulator_reasons_first_when_thinking_is_enabled():
    thinking = {"chat_template_kwargs": {"enable_thinking": True}}
    pieces = sim_reply(thinking, [USER]).pieces
    kinds = [next(iter(piece.delta)) for piece in pieces]
    assert kinds[0] == "reasoning_content" and kinds[-1] == "content"
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning_content")
    assert all("reasoning_content" not in p.delta for p in sim_reply({}, [USER]).pieces)
