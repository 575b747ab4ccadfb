"""OpenAI's text completions (/v1/completions): a prompt in, text out, for code-completion
clients and base models.

A text completion takes the chat pipeline whole (admission, exact cache, coalescing,
routing, settlement) as a ChatRequest with `text_prompt` set, so nothing downstream has a
second path to keep right. The differences live at the two edges, here: the request's
fields and defaults (max_tokens 16, as OpenAI's), the worker's text chunks read as deltas
(`as_chat_chunk`) on the way in, and deltas written back as text chunks and replies on the
way out (`text_chunk`, `text_reply`). The semantic cache never answers one: a prompt to be
continued has no question whose paraphrase would have the same continuation.

`logprobs` is OpenAI's integer form here (0 to 5 alternatives a token), passed to the
worker as it is: vLLM answers it on /v1/completions in the same legacy shape (`tokens`,
`token_logprobs`, `top_logprobs`, `text_offset`), which rides the pipeline's chat chunks
under each choice unchanged and is written back as it came (whole replies concatenate the
chunks' lists: inference/reply.py). Such a request bypasses the caches, as chat's does.

Not served, each refused by name: several prompts in one request, token-id prompts,
`logprobs` with `echo` (the prompt's own logprobs: the gateway echoes the prompt itself, and
the worker is never asked to score it), and `best_of` above `n` (vLLM no longer samples
best-of).
"""

from typing import Any

from inference.chat_options import OPENAI_OPTIONS, VLLM_OPTIONS, InvalidRequest, check_options
from inference.chat_request import TEXT_PATH, ChatRequest
from inference.request_body import (
    check_max_tokens,
    check_n,
    check_object,
    check_stream,
    decode_body,
    max_tokens_given,
)

__all__ = [
    "TEXT_PATH",
    "as_chat_chunk",
    "echo_chunk",
    "parse_text_completion",
    "text_chunk",
    "text_logprobs",
    "text_reply",
]

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
MAX_LOGPROBS = 5  # OpenAI's limit for the integer logprobs (vLLM's --max-logprobs is 20)
MAX_SUFFIX_CHARS = 64 * 1024
# The sampling options a text prompt takes: the chat ones less those about messages, tools
# and structured replies' formats (vLLM's guided fields still apply to text).
OPTIONS = (OPENAI_OPTIONS - {"response_format", "reasoning_effort", "top_logprobs"}) | (
    VLLM_OPTIONS - {"chat_template_kwargs"}
)
KNOWN = OPTIONS | {
    "model",
    "prompt",
    "max_tokens",
    "stream",
    "stream_options",
    "n",
    "echo",
    "suffix",
    "best_of",
}


def parse_text_completion(raw: bytes) -> ChatRequest:
    """A text completion from an HTTP body."""
    return text_completion_from(decode_body(raw))


def text_completion_from(body: Any) -> ChatRequest:
    """A text completion from decoded JSON (an HTTP body, a batch line)."""
    body = check_object(body, KNOWN)
    prompt = _prompt(body.get("prompt"))
    n = check_n(body)
    best_of = body.get("best_of")
    if best_of is not None and (type(best_of) is not int or best_of != n):  # not True or 1.0
        raise InvalidRequest(
            "'best_of' is served only equal to n (each choice is returned): sampling more "
            "candidates than are returned is not supported.",
            "best_of",
        )
    echo = body.get("echo")
    if echo is not None and not isinstance(echo, bool):
        raise InvalidRequest("'echo' must be a boolean.", "echo")
    logprobs = _logprobs(body.get("logprobs"), bool(echo))
    suffix = body.get("suffix")
    if suffix is not None and (not isinstance(suffix, str) or len(suffix) > MAX_SUFFIX_CHARS):
        raise InvalidRequest(
            f"'suffix' must be a string of at most {MAX_SUFFIX_CHARS} characters.", "suffix"
        )
    stream, include_usage = check_stream(body)
    # logprobs is checked above in its integer form (chat's is a boolean)
    options = check_options({k: v for k, v in body.items() if k != "logprobs"})
    if logprobs is not None:
        options["logprobs"] = logprobs
    if suffix:  # for a worker that takes it (vLLM refuses it: relayed as its 400)
        options["suffix"] = suffix
    return ChatRequest(
        model=body["model"],
        messages=[{"role": "user", "content": prompt}],
        max_tokens=check_max_tokens(body, DEFAULT_MAX_TOKENS),
        stream=stream,
        include_usage=include_usage,
        options=options,
        n=n,
        text_prompt=prompt,
        echo=bool(echo),
        max_tokens_defaulted=not max_tokens_given(body),
    )


def _logprobs(value: Any, echo: bool) -> int | None:
    """OpenAI's integer logprobs: how many alternatives to return beside each chosen token
    (0: the chosen token's own logprob only). With echo, OpenAI scores the prompt's tokens
    too; the gateway echoes the prompt itself and never has the worker score it, so the
    pair is refused rather than answered without the prompt's half."""
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= MAX_LOGPROBS:  # not True, not 1.0
        raise InvalidRequest(
            f"'logprobs' must be an integer from 0 to {MAX_LOGPROBS} (how many alternatives "
            "to return for each token; /v1/chat/completions takes logprobs: true and "
            "top_logprobs).",
            "logprobs",
        )
    if echo:
        raise InvalidRequest(
            "'logprobs' with 'echo' is not served: the prompt's own logprobs are not "
            "returned. Ask without echo for the generated tokens' logprobs.",
            "logprobs",
        )
    return value


def text_logprobs(value: Any) -> dict[str, Any] | None:
    """A choice's logprobs when they are the legacy text form (a worker's, read
    defensively), else None."""
    if isinstance(value, dict) and isinstance(value.get("tokens"), list):
        return value
    return None


def _prompt(value: Any) -> str:
    """One text prompt: a string, or an array holding one string."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(isinstance(v, int | float | list) for v in value):
        # token ids, or numbers a client wrote as decimals (1.0 is an integer to JSON
        # Schema): not several prompts, which the message below would tell it to split
        message = "Token-id prompts are not served: send the prompt as text."
    elif isinstance(value, list) and len(value) > 1:
        message = (
            "One prompt per request: send each prompt as its own request, or many as a "
            "batch (/v1/batches)."
        )
    else:
        message = "'prompt' must be a non-empty string."
    raise InvalidRequest(message, "prompt")


def as_chat_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """A worker's text completion chunk as the chat chunk the pipeline reads: each choice's
    text as its delta's content. Read defensively, as every worker chunk is."""
    choices = chunk.get("choices")
    deltas = [
        {
            "index": choice.get("index", 0),
            "delta": {"content": choice["text"] if isinstance(choice.get("text"), str) else ""},
            # the legacy form rides along unchanged, for text_chunk and the reply assembler
            "logprobs": text_logprobs(choice.get("logprobs")),
            "finish_reason": choice.get("finish_reason"),
        }
        for choice in (choices if isinstance(choices, list) else [])
        if isinstance(choice, dict)
    ]
    return {**chunk, "object": "chat.completion.chunk", "choices": deltas}


def text_chunk(chunk: dict[str, Any], include_usage: bool) -> dict[str, Any] | None:
    """A pipeline chunk as the client's text_completion chunk; None when it carries nothing
    a text client reads (a replay's opening role delta, a usage chunk not asked for)."""
    choices = []
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        text = delta.get("content") if isinstance(delta.get("content"), str) else ""
        logprobs = text_logprobs(choice.get("logprobs"))
        # a token that decodes to no text yet (part of a character) still has its logprob
        if text or logprobs is not None or choice.get("finish_reason") is not None:
            choices.append(
                {
                    "index": choice.get("index", 0),
                    "text": text,
                    "logprobs": logprobs,
                    "finish_reason": choice.get("finish_reason"),
                }
            )
    usage = chunk.get("usage") if include_usage else None
    if not choices and not usage:
        return None
    shaped = {
        "id": chunk.get("id"),
        "object": "text_completion",
        "created": chunk.get("created"),
        "model": chunk.get("model"),
        "choices": choices,
    }
    if usage:
        shaped["usage"] = usage
    return shaped


def echo_chunk(chat: ChatRequest, request_id: str, created: int, model: str) -> dict[str, Any]:
    """The stream's first chunk when the client asked for echo: the prompt, each choice."""
    assert chat.text_prompt is not None
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": index, "text": chat.text_prompt, "logprobs": None, "finish_reason": None}
            for index in range(chat.n)
        ],
    }


def text_reply(chat_reply: dict[str, Any], chat: ChatRequest) -> dict[str, Any]:
    """An assembled chat.completion body (gateway/serving/chat_body.py) as OpenAI's
    text_completion reply."""
    echoed = chat.text_prompt if chat.echo and chat.text_prompt is not None else ""
    return {
        "id": chat_reply["id"],
        "object": "text_completion",
        "created": chat_reply["created"],
        "model": chat_reply["model"],
        "choices": [
            {
                "index": choice["index"],
                "text": echoed + (choice["message"].get("content") or ""),
                "logprobs": text_logprobs(choice.get("logprobs")),
                "finish_reason": choice["finish_reason"],
            }
            for choice in chat_reply["choices"]
        ],
        "usage": chat_reply["usage"],
    }
