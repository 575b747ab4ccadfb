"""What a streamed chat chunk shows the client, whatever shape the worker gave it."""

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gateway.api.views import CHAT
from inference.chat_request import parse_chat_request

USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def run_of(include_usage: bool) -> Any:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    body.update(stream=True, stream_options={"include_usage": include_usage})
    return cast(Any, SimpleNamespace(chat=parse_chat_request(json.dumps(body).encode())))


def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": choices,
        "usage": usage,
    }


LAST = [{"index": 0, "delta": {"content": "!"}, "finish_reason": "stop"}]


@pytest.mark.unit
def test_usage_on_the_last_choice_chunk_is_stripped_and_the_choice_kept_when_not_asked_for():
    shown = CHAT.chunk(run_of(False), chunk(LAST, USAGE))
    assert shown is not None and shown["choices"] == LAST and "usage" not in shown


@pytest.mark.unit
def test_a_usage_only_chunk_is_shown_only_when_asked_for():
    usage_only = chunk([], USAGE)
    assert CHAT.chunk(run_of(False), usage_only) is None
    shown = CHAT.chunk(run_of(True), usage_only)
    assert shown is not None and shown["usage"] == USAGE
    with_choice = CHAT.chunk(run_of(True), chunk(LAST, USAGE))
    assert with_choice is not None and with_choice["usage"] == USAGE
