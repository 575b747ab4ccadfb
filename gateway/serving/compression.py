"""Prompt compression, opt-in per team (QuotaPolicy.compress_prompts): fewer prompt tokens
for the same answer, by leaving out what a model does not read for meaning.

Three rules, each conservative on purpose, because a compressed prompt is what the model
answers and what the caches key on:

- whitespace: trailing spaces and tabs at the ends of lines, carriage returns, and runs of
  more than one blank line go; indentation and spaces inside a line stay (code and string
  literals depend on them);
- duplicates: of a run of identical messages back to back (same role, same content, no
  tool calls: a client's retry loop, a double submit) only the last is kept; system and
  developer messages are never left out, and the last user message is never left out;
- tool outputs: a tool result longer than TOOL_OUTPUT_MAX_CHARS keeps its head and tail
  with a marker saying how much was left out (a log dump, a whole file).

A text completion is never compressed: its prompt is continued, not read. What was saved is
told in the x-sluice-prompt-compressed header (characters left out).
"""

import re
from dataclasses import dataclass, replace
from typing import Any

from inference.chat_request import ChatRequest

TOOL_OUTPUT_MAX_CHARS = 6_000
TOOL_OUTPUT_KEEP_CHARS = 2_000  # at the head and at the tail each
NEVER_DROPPED = frozenset({"system", "developer"})
_TRAILING = re.compile(r"[ \t]+$", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class Compressed:
    chat: ChatRequest
    chars_saved: int = 0
    messages_dropped: int = 0
    tool_outputs_trimmed: int = 0


def compress(chat: ChatRequest) -> Compressed:
    if chat.text_prompt is not None:
        return Compressed(chat)
    before = _size(chat.messages)
    tidied = [_tidy(message) for message in chat.messages]
    messages = [message for message, _ in tidied]
    trimmed = sum(1 for _, was_trimmed in tidied if was_trimmed)
    kept = _without_repeats(messages)
    saved = before - _size(kept)
    if saved <= 0:
        return Compressed(chat)
    return Compressed(replace(chat, messages=kept), saved, len(messages) - len(kept), trimmed)


def collapse_whitespace(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _BLANK_RUNS.sub("\n\n", _TRAILING.sub("", text))


def trim_tool_output(text: str) -> str:
    if len(text) <= TOOL_OUTPUT_MAX_CHARS:
        return text
    left_out = len(text) - 2 * TOOL_OUTPUT_KEEP_CHARS
    head, tail = text[:TOOL_OUTPUT_KEEP_CHARS], text[-TOOL_OUTPUT_KEEP_CHARS:]
    return f"{head}\n[... {left_out} characters of this output left out ...]\n{tail}"


def _tidy(message: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A copy of the message with its text tidied, and whether a tool output was trimmed."""
    tool = message.get("role") == "tool"
    content = message.get("content")
    if isinstance(content, str):
        text = collapse_whitespace(content)
        shortened = trim_tool_output(text) if tool else text
        return {**message, "content": shortened}, shortened != text
    if isinstance(content, list):
        parts, trimmed = [], False
        for part in content:
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                text = collapse_whitespace(part["text"])
                shortened = trim_tool_output(text) if tool else text
                trimmed = trimmed or shortened != text
                part = {**part, "text": shortened}
            parts.append(part)
        return {**message, "content": parts}, trimmed
    return dict(message), False


def _without_repeats(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message identical to the one before it left out (the later copy is kept, so the
    last user message always stays)."""
    kept: list[dict[str, Any]] = []
    for message in messages:
        if kept and _repeats(kept[-1], message):
            kept.pop()
        kept.append(message)
    return kept


def _repeats(earlier: dict[str, Any], message: dict[str, Any]) -> bool:
    return (
        earlier == message
        and message.get("role") not in NEVER_DROPPED
        and not message.get("tool_calls")
        and message.get("role") != "tool"  # a tool result answers its own call
    )


def _size(messages: list[dict[str, Any]]) -> int:
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
    return total
