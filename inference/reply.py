"""One whole reply from the chunks a worker streams: text, reasoning, tool calls, logprobs.

A client that did not ask for a stream gets the reply this assembles (gateway/api/views.py),
and the caches keep it (caching/exact.py). Its worker was asked for the whole reply at once
(inference/client.py), which `as_one_chunk` turns into one chunk, so that every reply, a
stream's or not, is read the same way.
Chunks come from a worker, so they are read defensively: a field of an unexpected type is
skipped, never an exception that would turn a finished generation into a 500.

vLLM streams a tool call as OpenAI does: a first delta with the call's index, id, type and
function name, then fragments of its JSON arguments under the same index. Reasoning
(a reasoning parser's output) arrives as `reasoning_content` deltas; newer vLLM versions
call the field `reasoning`, which is read as the same thing.

Logprobs come in one of two shapes: chat's (`{content: [entry per token]}`), or a text
completion's legacy one (`{tokens, token_logprobs, top_logprobs, text_offset}`, a list each,
one entry a token: inference/text_completion.py); each chunk's lists are appended to the
reply's, in the shape they came in.
"""

from typing import Any

REASONING_FIELDS = ("reasoning_content", "reasoning")
# A text completion's logprobs (OpenAI's legacy shape): four lists, one entry a token.
TEXT_LOGPROB_FIELDS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


def carries_output(chunk: dict[str, Any]) -> bool:
    """Whether a chunk holds generated tokens (text, reasoning or a tool call's part)."""
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and (
            delta.get("content") or delta.get("tool_calls") or _reasoning_of(delta)
        ):
            return True
    return False


def _reasoning_of(delta: dict[str, Any]) -> str:
    for field in REASONING_FIELDS:
        text = delta.get(field)
        if isinstance(text, str) and text:
            return text
    return ""


def as_one_chunk(reply: dict[str, Any]) -> dict[str, Any]:
    """A worker's whole (non-streamed) chat.completion as the one chunk the pipeline reads:
    each choice's message as its delta, each tool call under its position's index as a
    stream numbers them. Read defensively, as every worker chunk is."""
    choices = reply.get("choices")
    deltas = [
        {
            "index": choice.get("index", 0),
            "delta": _message_as_delta(choice.get("message")),
            "logprobs": choice.get("logprobs"),
            "finish_reason": choice.get("finish_reason"),
        }
        for choice in (choices if isinstance(choices, list) else [])
        if isinstance(choice, dict)
    ]
    return {**reply, "object": "chat.completion.chunk", "choices": deltas}


def estimated_output_tokens(chunk: dict[str, Any]) -> int:
    """The tokens a chunk's deltas hold, estimated as a prompt is at admission (UTF-8 bytes
    / 3, leaning high), at least one per choice with output: for a whole reply from a
    worker that reported no usage, where a stream would count one token per chunk."""
    total = 0
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        parts = [delta.get("content"), _reasoning_of(delta)]
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                parts += [function.get("name"), function.get("arguments")]
        size = sum(len(part.encode()) for part in parts if isinstance(part, str))
        total += -(-size // 3)  # rounded up: one token at least for any output
    return total


def _message_as_delta(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {}
    calls = message.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return message
    numbered = [
        {**call, "index": position} if isinstance(call, dict) else call
        for position, call in enumerate(calls)
    ]
    return {**message, "tool_calls": numbered}


def openai_logprobs(chunk: dict[str, Any]) -> dict[str, Any]:
    """chunk with each choice's logprobs in OpenAI's shape, {content, refusal}: vLLM sends
    content only, and OpenAI's schema (and strict clients) require both."""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not any(
        isinstance(c, dict)
        and isinstance(c.get("logprobs"), dict)
        and "refusal" not in c["logprobs"]
        for c in choices
    ):
        return chunk
    fixed = [
        {**c, "logprobs": {**c["logprobs"], "refusal": None}}
        if isinstance(c, dict) and isinstance(c.get("logprobs"), dict)
        else c
        for c in choices
    ]
    return {**chunk, "choices": fixed}


class ReplyAssembler:
    """Feed it every chunk of the stream, then read the one choice it assembles: `index`
    (0 unless the request asked for n > 1 choices; the others' deltas are skipped)."""

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.logprob_tokens: list[Any] | None = None  # None: the worker sent no logprobs
        self.text_logprobs: dict[str, list[Any]] | None = None  # a text completion's
        self.finish_reason: str | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if not isinstance(choice, dict) or choice.get("index", 0) != self.index:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta)
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
                if self.logprob_tokens is None:
                    self.logprob_tokens = []
                self.logprob_tokens.extend(logprobs["content"])  # not a copy per chunk
            elif isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list):
                self._text_logprobs(logprobs)
            finish = choice.get("finish_reason")
            if isinstance(finish, str):
                self.finish_reason = finish

    def _text_logprobs(self, logprobs: dict[str, Any]) -> None:
        """Append a chunk's legacy lists; one missing (or not a list) is padded with nulls,
        so the four stay one entry a token."""
        count = len(logprobs["tokens"])
        kept = self.text_logprobs or {field: [] for field in TEXT_LOGPROB_FIELDS}
        for field in TEXT_LOGPROB_FIELDS:
            value = logprobs.get(field)
            kept[field] += (
                value if isinstance(value, list) and len(value) == count else [None] * count
            )
        self.text_logprobs = kept

    def _delta(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        reasoning = _reasoning_of(delta)
        if reasoning:
            self.reasoning.append(reasoning)
        calls = delta.get("tool_calls")
        for position, part in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(part, dict):
                self._call_part(part, position)

    def _call_part(self, part: dict[str, Any], position: int) -> None:
        index = part.get("index", position)
        if not isinstance(index, int):
            return
        call = self.calls.setdefault(
            index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if isinstance(part.get("id"), str) and part["id"]:
            call["id"] = part["id"]
        if isinstance(part.get("type"), str):
            call["type"] = part["type"]
        function = part.get("function")
        if isinstance(function, dict):
            name, arguments = function.get("name"), function.get("arguments")
            if isinstance(name, str) and name and not call["function"]["name"]:
                call["function"]["name"] = name
            if isinstance(arguments, str):
                call["function"]["arguments"] += arguments

    @property
    def text(self) -> str:
        return "".join(self.content)

    @property
    def reasoning_text(self) -> str | None:
        return "".join(self.reasoning) or None

    @property
    def tool_calls(self) -> list[dict[str, Any]] | None:
        return [self.calls[index] for index in sorted(self.calls)] or None

    def message(self) -> dict[str, Any]:
        """The assistant message, as OpenAI's non-streamed reply has it: content null when
        the reply is tool calls only."""
        tool_calls = self.tool_calls
        text = self.text
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if text or not tool_calls else None,
        }
        if self.reasoning_text is not None:
            message["reasoning_content"] = self.reasoning_text
        if tool_calls:
            message["tool_calls"] = tool_calls
        return message

    def logprobs(self) -> dict[str, Any] | None:
        """The reply's logprobs in the shape the worker sent them; None if it sent none."""
        if self.text_logprobs is not None:
            return dict(self.text_logprobs)
        return None if self.logprob_tokens is None else {"content": self.logprob_tokens}
