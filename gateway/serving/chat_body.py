"""A whole (non-streamed) chat.completion body in OpenAI's shape, assembled from a
completion's stream: what the HTTP adapter answers a non-streaming request with, and what
a batch line's output holds."""

from typing import Any

from gateway.serving.completion import Completion
from inference.chat_tools import legacy_message
from inference.reply import ReplyAssembler


async def collect_reply(run: Completion) -> dict[str, Any]:
    """The whole reply from the stream's deltas: text, reasoning, tool calls, logprobs."""
    reply = ReplyAssembler()
    async for chunk in run.stream():
        reply.add(chunk)
    prompt, completion = run.used_tokens()
    message, finish = reply.message(), reply.finish_reason
    if run.chat.legacy_functions:
        message, finish = legacy_message(message, finish)
    # OpenAI's schema requires refusal (null: no worker here refuses) beside the content.
    message, logprobs = {**message, "refusal": None}, reply.logprobs()
    if logprobs is not None:
        logprobs["refusal"] = None
    choice = {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}
    return {
        "id": run.request_id,
        "object": "chat.completion",
        "created": run.created,
        "model": run.deployment.name,
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": run.cached_prompt_tokens()},
        },
    }
