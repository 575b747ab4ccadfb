"""A whole (non-streamed) chat.completion body in OpenAI's shape, assembled from a
completion's stream: what the HTTP adapter answers a non-streaming request with, and what
a batch line's output holds; and a text completion's (/v1/completions), from the same."""

from typing import Any

from gateway.serving.completion import Completion
from inference.chat_tools import legacy_message
from inference.reply import ReplyAssembler
from inference.text_completion import text_reply


async def collect_reply(run: Completion) -> dict[str, Any]:
    """The whole reply from the stream's deltas: text, reasoning, tool calls, logprobs, for
    each of the request's n choices (the chunks of all choices interleave, each delta under
    its choice's index; one assembler reads each index)."""
    replies = [ReplyAssembler(index) for index in range(run.chat.n)]
    async for chunk in run.stream():
        for reply in replies:
            reply.add(chunk)
    prompt, completion = run.used_tokens()  # the worker's: every choice's tokens, summed
    return {
        "id": run.request_id,
        "object": "chat.completion",
        "created": run.created,
        "model": run.deployment.name,
        "choices": [_choice(run, reply) for reply in replies],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": run.cached_prompt_tokens()},
        },
    }


async def collect_text_reply(run: Completion) -> dict[str, Any]:
    """A text completion's whole reply (object text_completion, each choice's text)."""
    return text_reply(await collect_reply(run), run.chat)


def _choice(run: Completion, reply: ReplyAssembler) -> dict[str, Any]:
    message, finish = reply.message(), reply.finish_reason
    if run.chat.legacy_functions:
        message, finish = legacy_message(message, finish)
    # OpenAI's schema requires refusal (null: no worker here refuses) beside the content.
    message, logprobs = {**message, "refusal": None}, reply.logprobs()
    if logprobs is not None and "content" in logprobs:  # chat's shape (not a text completion's)
        logprobs["refusal"] = None
    return {"index": reply.index, "message": message, "logprobs": logprobs, "finish_reason": finish}
