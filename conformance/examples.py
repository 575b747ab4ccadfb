"""Requests sent in the examples phase beside the description's own: one for each shape of
reply Sluice builds, so that every run holds each to OpenAI's response schema (generated
requests reach a reply less often, and rarely the rarer shapes).

The simulator answers each deterministically (docs/simulator.md): a tool call when tools
are offered, reasoning when the chat template is asked to think, logprobs when asked.
"""

from typing import Any

ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
EARLIER_CALL = {
    "role": "assistant",
    "content": None,
    "refusal": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ],
}


def chat_bodies(model: str) -> list[dict[str, Any]]:
    plain = {"model": model, "messages": ASK, "max_tokens": 16}
    return [
        plain,
        {**plain, "stream": True},
        {**plain, "stream": True, "stream_options": {"include_usage": True}},
        {**plain, "temperature": 0, "seed": 7},  # deterministic: cached, then replayed
        {**plain, "temperature": 0, "seed": 7},
        {**plain, "logprobs": True, "top_logprobs": 2},
        {**plain, "logprobs": True, "top_logprobs": 2, "stream": True},
        {**plain, "max_tokens": 60, "tools": [WEATHER]},
        {**plain, "max_tokens": 60, "tools": [WEATHER], "stream": True},
        {
            **plain,
            "max_tokens": 80,
            "tools": [WEATHER, TIME],
            "tool_choice": {"type": "function", "function": {"name": "get_time"}},
        },
        {**plain, "max_tokens": 80, "tools": [WEATHER, TIME], "tool_choice": "required"},
        {**plain, "max_tokens": 60, "functions": [WEATHER["function"]]},
        {
            **plain,
            "messages": [
                *ASK,
                EARLIER_CALL,
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
            ],
            "tools": [WEATHER],
        },
        {**plain, "max_tokens": 40, "chat_template_kwargs": {"enable_thinking": True}},
        {
            **plain,
            "max_tokens": 40,
            "chat_template_kwargs": {"enable_thinking": True},
            "stream": True,
        },
        {**plain, "response_format": {"type": "json_object"}, "n": 1, "stream": None},
        {
            **plain,
            "metadata": {"app": "conformance"},
            "store": False,
            "service_tier": "auto",
            "safety_identifier": "user-1",
            "prompt_cache_key": "conformance",
            "verbosity": "low",
            "modalities": ["text"],
            "reasoning_effort": "low",
        },
    ]


PROMPT = "The capital of France is"


def completion_bodies(model: str) -> list[dict[str, Any]]:
    """Text completions: the reply and the stream, the prompt echoed (the stream's opening
    chunk), several choices, a replay from the cache, integer logprobs (whole, streamed, for
    several choices), and every field served."""
    plain = {"model": model, "prompt": PROMPT, "max_tokens": 16}
    usage = {"include_usage": True}
    return [
        plain,
        {**plain, "stream": True},
        {**plain, "stream": True, "stream_options": usage},
        {**plain, "temperature": 0, "seed": 7},  # deterministic: cached, then replayed
        {**plain, "temperature": 0, "seed": 7},
        {**plain, "temperature": 0, "seed": 7, "stream": True},  # replayed as a stream
        {**plain, "echo": True},
        {**plain, "echo": True, "stream": True},
        {**plain, "n": 2},
        {**plain, "n": 2, "best_of": 2, "stream": True, "stream_options": usage},
        {**plain, "n": 3, "echo": True, "stream": True},
        {**plain, "logprobs": 2},
        {**plain, "logprobs": 0, "stream": True, "stream_options": usage},
        {**plain, "logprobs": 5, "n": 2},
        {**plain, "prompt": [PROMPT], "max_tokens": 1},  # cut at max_tokens: length
        {
            **plain,
            "stop": ["\n", "."],
            "top_p": 0.9,
            "presence_penalty": 0.5,
            "frequency_penalty": 0.5,
            "logit_bias": {"50256": -100},
            "user": "user-1",
            "suffix": " and that is all.",
        },
        {
            **plain,
            "max_tokens": None,
            "n": None,
            "stream": None,
            "echo": None,
            "best_of": None,
            "logprobs": None,
            "suffix": None,
        },
    ]


def embedding_bodies(model: str) -> list[dict[str, Any]]:
    return [
        {"model": model, "input": "The quick brown fox"},
        {"model": model, "input": ["one", "two", "three"], "encoding_format": "float"},
        {"model": model, "input": "The quick brown fox", "encoding_format": "base64"},
    ]
