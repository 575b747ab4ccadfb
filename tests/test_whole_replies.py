"""A request the client does not stream is asked of its worker non-streamed: one read and
one parse for the whole reply, not an event per token (docs/scaling.md, "Tokens relayed").
What the worker is sent, how its reply is read, and how its failures are classed."""

import asyncio
import json
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import pytest
from aiohttp import web

from gateway.accounts.quotas import RateLimitState, Reservation
from gateway.serving.admission import Target
from gateway.serving.completion import Completion
from inference import client
from inference.chat_request import CHAT_PATH, TEXT_PATH, ChatRequest
from inference.client import UpstreamError, whole_from_worker
from inference.deployments import DeploymentInfo
from inference.reply import ReplyAssembler, as_one_chunk, estimated_output_tokens
from tests.test_batch_routing import worker as worker_view
from tests.test_worker_first_chunk import worker

pytestmark = pytest.mark.unit
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
BODY = {
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 16,
    "n": 2,
    "stream_options": {"include_usage": True},  # what the pipeline's body carries for a stream
}
# vLLM's non-streamed reply: two choices, the second a tool call with no content.
VLLM_REPLY = {
    "id": "chatcmpl-worker",
    "object": "chat.completion",
    "created": 1,
    "model": "upstream",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Sunny.", "tool_calls": []},
            "logprobs": {"content": [{"token": "Sunny", "logprob": -0.1}]},
            "finish_reason": "stop",
        },
        {
            "index": 1,
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning_content": "They want the weather.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        },
    ],
    "usage": {"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16},
}


def ask(handler: Handler, path: str = CHAT_PATH) -> list[dict[str, Any]] | UpstreamError:
    """Every chunk whole_from_worker yields against a worker answering with handler, or
    the UpstreamError it raised."""

    async def scenario() -> list[dict[str, Any]] | UpstreamError:
        async with worker(handler, path) as url:
            try:
                return [chunk async for chunk in whole_from_worker(url, "upstream", BODY, path)]
            except UpstreamError as exc:
                return exc

    return asyncio.run(scenario())


def test_the_worker_is_asked_for_a_whole_reply_without_stream_options():
    received: list[dict[str, Any]] = []

    async def answer(request: web.Request) -> web.StreamResponse:
        received.append(await request.json())
        return web.json_response(VLLM_REPLY)

    assert not isinstance(ask(answer), UpstreamError)
    [sent] = received
    assert sent["stream"] is False and "stream_options" not in sent  # vLLM refuses it so
    assert sent["model"] == "upstream" and sent["n"] == 2 and sent["max_tokens"] == 16


def test_a_whole_reply_is_one_chunk_that_assembles_to_each_choice():
    async def answer(request: web.Request) -> web.StreamResponse:
        return web.json_response(VLLM_REPLY)

    chunks = ask(answer)
    assert not isinstance(chunks, UpstreamError) and len(chunks) == 1
    [chunk] = chunks
    assert chunk["usage"]["completion_tokens"] == 9
    first, second = ReplyAssembler(0), ReplyAssembler(1)
    first.add(chunk)
    second.add(chunk)
    assert first.message() == {"role": "assistant", "content": "Sunny."}
    assert first.logprobs() == {"content": [{"token": "Sunny", "logprob": -0.1}]}
    assert second.finish_reason == "tool_calls"
    assert second.message() == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "They want the weather.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }


def test_a_text_completions_whole_reply_is_read_as_a_chat_chunk():
    async def answer(request: web.Request) -> web.StreamResponse:
        reply = {
            "object": "text_completion",
            "choices": [{"index": 0, "text": " blue.", "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
        }
        return web.json_response(reply)

    chunks = ask(answer, TEXT_PATH)
    assert not isinstance(chunks, UpstreamError)
    reply = ReplyAssembler(0)
    reply.add(chunks[0])
    assert (reply.text, reply.finish_reason) == (" blue.", "stop")


def test_a_worker_slower_than_the_reply_timeout_fails_and_is_not_asked_again(settings):
    """It may have generated all along: another worker would be asked to do it again."""
    settings.UPSTREAM_REPLY_TIMEOUT_S = 0.3
    settings.UPSTREAM_FIRST_TOKEN_TIMEOUT_S = 0.1  # a stream's: not what bounds a whole reply

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.2)  # past the first-token timeout, within the reply's
        return web.json_response(VLLM_REPLY)

    assert not isinstance(ask(slow), UpstreamError)

    async def slower(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(1.0)
        return web.json_response(VLLM_REPLY)

    failure = ask(slower)
    assert isinstance(failure, UpstreamError) and not failure.retryable
    assert "in time" in str(failure)


def test_a_worker_that_drops_the_connection_before_its_reply_may_be_retried_elsewhere():
    async def crash(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()
        await asyncio.sleep(0.1)
        return web.json_response(VLLM_REPLY)

    failure = ask(crash)
    assert isinstance(failure, UpstreamError) and failure.retryable


@pytest.mark.parametrize(
    ("status", "body", "retryable"),
    [
        (400, json.dumps({"error": {"message": "bad request"}}), False),  # the client's fault
        (503, "overloaded", True),
        (200, "[1, 2]", True),  # not an object: another worker may answer properly
        (200, "{not json", True),
    ],
)
def test_a_workers_refusal_or_unreadable_reply_is_classed(status, body, retryable):
    async def answer(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, text=body, content_type="application/json")

    failure = ask(answer)
    assert isinstance(failure, UpstreamError) and failure.retryable is retryable
    assert failure.status == (status if status != 200 else None)


def test_a_reply_over_the_size_limit_is_not_asked_of_another_worker(monkeypatch):
    """It was generated already: another worker would generate it again, to the same end."""
    monkeypatch.setattr(client, "MAX_WHOLE_REPLY_BYTES", 100)

    async def answer(request: web.Request) -> web.StreamResponse:
        return web.json_response(VLLM_REPLY)  # about 800 bytes

    failure = ask(answer)
    assert isinstance(failure, UpstreamError) and not failure.retryable
    assert "over 100 bytes" in str(failure)


def chat(stream: bool = False, **options: Any) -> ChatRequest:
    return ChatRequest("m", [{"role": "user", "content": "hi"}], 16, stream, False, options)


def test_only_a_request_not_streamed_and_without_logprobs_is_asked_whole():
    assert chat().asks_whole_reply
    assert chat(logprobs=False).asks_whole_reply
    assert not chat(stream=True).asks_whole_reply
    assert not chat(logprobs=True, top_logprobs=5).asks_whole_reply  # KBs a token
    assert not chat(logprobs=0).asks_whole_reply  # a text completion's: the token's own
    assert not chat(prompt_logprobs=1).asks_whole_reply


def test_a_whole_reply_without_usage_is_counted_by_its_size_not_as_one_token():
    """Billing's fallback where a worker reports no usage: a stream counts a token per
    chunk, and a whole reply is one chunk."""
    chunk = as_one_chunk({k: v for k, v in VLLM_REPLY.items() if k != "usage"})
    # "Sunny." (6 bytes), then the reasoning (22) and the call's name and arguments (23)
    assert estimated_output_tokens(chunk) == 2 + 15
    assert estimated_output_tokens(as_one_chunk({"choices": [{"message": {}}]})) == 0


@pytest.mark.parametrize(
    ("batch_id", "completion_tokens"), [("", 16 * 2), ("batch_1", 0)], ids=["client", "batch"]
)
def test_a_whole_reply_cut_off_is_billed_its_max_tokens_unless_its_batch_runner_stopped(
    batch_id, completion_tokens
):
    """A client that leaves a whole reply pays for what its worker may have made (the
    worker cannot say how far it got); a batch line is cut only by its runner stopping,
    the platform's doing: its prompt only, as a gateway's drain."""

    async def tokenize(request: web.Request) -> web.StreamResponse:
        return web.json_response({"count": 7})

    async def scenario() -> tuple[int, int]:
        async with worker(tokenize, "/tokenize") as url:
            chat = ChatRequest("m", [{"role": "user", "content": "hi"}], 16, False, False, {}, n=2)
            state = RateLimitState(None, None, 0.0, None, None, 0.0)
            reservation = Reservation(1, None, 50, 0, 0, "2026-12", state, batch_id=batch_id)
            deployment = DeploymentInfo("m", Decimal(1), Decimal(1), 0)
            cut = Completion("chatcmpl-cut", chat, Target(deployment), reservation)
            cut.dispatched_to = worker_view(url)  # its worker took it; its status: cancelled
            assert cut.asks_whole_reply and cut.status == "cancelled"
            return await cut.billed_tokens()

    assert asyncio.run(scenario()) == (7, completion_tokens)
