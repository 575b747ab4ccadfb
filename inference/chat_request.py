"""Validate an OpenAI chat completion request body into what the gateway needs."""

import ipaddress
import json
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from inference.chat_options import (
    IGNORED,
    PASSTHROUGH,
    InvalidRequest,
    check_options,
    json_size,
    one_of,
)
from inference.chat_tools import check_message, check_tools, modern_messages

__all__ = ["ChatRequest", "InvalidRequest", "chat_request_from", "parse_chat_request"]

# "function": the legacy function-calling result, rewritten as a tool result (chat_tools).
ROLES = {"system", "user", "assistant", "tool", "developer", "function"}
DEFAULT_MAX_TOKENS = 512
# Every field the gateway reads; anything else is refused by name rather than silently
# dropped (options: inference/chat_options.py, tools: inference/chat_tools.py).
KNOWN = (
    PASSTHROUGH
    | IGNORED
    | {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "n",
    }
)
# Admission reserves max_tokens for one choice; a larger max_tokens than any deployed
# context would only be refused by the worker after queueing.
MAX_TOKENS_LIMIT = 32_768
# What the worker renders into the prompt besides the messages (tool schemas above all).
PROMPT_OPTIONS = ("tools", "response_format", "guided_json", "guided_grammar")


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    max_tokens: int
    stream: bool
    include_usage: bool
    options: dict[str, Any]
    # The request used the legacy functions fields: messages and options hold their
    # tool-calling form, and the reply goes back as function_call (inference/chat_tools.py).
    legacy_functions: bool = False

    def estimated_prompt_tokens(self) -> int:
        """What admission reserves for the prompt before the worker has counted it: an
        upper-leaning estimate, corrected by reconcile() to what the worker reports.

        UTF-8 bytes / 3 over every field of every message (names, tool-call ids, content
        parts too) and of what the worker renders into the prompt besides (tool schemas):
        English runs about 4 bytes a token, code about 3, and CJK text 3 bytes a character
        at about one token each, so the reservation is rarely short."""
        encoded = json.dumps(self.messages, ensure_ascii=False, separators=(",", ":"))
        rendered = sum(
            json_size(self.options[name]) for name in PROMPT_OPTIONS if name in self.options
        )
        return (len(encoded.encode()) + rendered) // 3 + 4 * len(self.messages) + 8

    def first_image_part(self) -> str | None:
        """Where the first image part is (a param path), or None for text only."""
        for index, message in enumerate(self.messages):
            content = message.get("content")
            if isinstance(content, list):
                for number, part in enumerate(content):
                    if part.get("type") == "image_url":
                        return f"messages.{index}.content.{number}.type"
        return None

    @property
    def may_call_tools(self) -> bool:
        """Whether the reply may be tool calls (tools offered, and not tool_choice none)."""
        return bool(self.options.get("tools")) and self.options.get("tool_choice") != "none"

    def upstream_body(self) -> dict[str, Any]:
        return {
            **self.options,
            "messages": self.messages,
            "max_tokens": self.max_tokens,
            "stream_options": {"include_usage": True},
        }


def _bad(message: str, param: str | None = None) -> InvalidRequest:
    return InvalidRequest(message, param)


MESSAGE_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "function_call"}
# Text parts reach every deployment; image parts only one marked accepts_images (checked
# once the deployment is known: ChatRequest.first_image_part). Audio and files: none.
CONTENT_PART_TYPES = {"text", "image_url"}
IMAGE_DETAILS = {"auto", "low", "high"}
MAX_IMAGE_URL_CHARS = 2048  # an http(s) address; data: URIs are bounded by the body limit
IMAGE_URL_SCHEMES = ("https://", "http://", "data:image/")


def _check_parts(content: list[Any], index: int) -> None:
    for number, part in enumerate(content):
        param = f"messages.{index}.content.{number}"
        if not isinstance(part, dict) or not one_of(part.get("type"), CONTENT_PART_TYPES):
            kind = part.get("type") if isinstance(part, dict) else None
            shown = repr(kind)[:40] if kind is None or isinstance(kind, str) else "non-string"
            raise _bad(
                f"messages[{index}].content[{number}] is a {shown} part; the gateway takes "
                f"{sorted(CONTENT_PART_TYPES)} parts only.",
                f"{param}.type",
            )
        if part["type"] == "image_url":
            _check_image_part(part, f"messages[{index}].content[{number}]", param)
        elif not isinstance(part.get("text"), str) or set(part) - {"type", "text"}:
            raise _bad(f"messages[{index}].content[{number}] must be {{type, text}}.", param)


def _internal_host(url: str) -> bool:
    """An address a worker must never be sent to fetch from: the cloud metadata service,
    loopback, private and link-local networks, by IP literal or as localhost. (Hostnames
    that resolve inward are the worker's egress filter's to stop: docs/security.md.)"""
    if url.startswith("data:"):
        return False
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost") or not host:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return not address.is_global


def _check_image_part(part: dict[str, Any], where: str, param: str) -> None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else None
    detail = image.get("detail", "auto") if isinstance(image, dict) else None
    if (
        set(part) - {"type", "image_url"}
        or not isinstance(image, dict)
        or set(image) - {"url", "detail"}
        or not isinstance(url, str)
        or not url.startswith(IMAGE_URL_SCHEMES)
        or (not url.startswith("data:") and len(url) > MAX_IMAGE_URL_CHARS)
        or not one_of(detail, IMAGE_DETAILS)
        or _internal_host(url)
    ):
        raise _bad(
            f"{where} must be {{type: image_url, image_url: {{url, detail}}}} with a public "
            f"https or http URL (up to {MAX_IMAGE_URL_CHARS} characters) or a data:image/ URL.",
            f"{param}.image_url",
        )


# Far beyond any real request (a JSON schema in response_format included), and far within
# what every encoder on the way recurses through: the cache key, the admission estimate and
# the worker's request each serialize the body again, a few levels deeper than it came.
MAX_NESTING = 64
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _check_values(body: dict[str, Any]) -> None:
    """Refuse what decodes but cannot travel on: nesting deeper than MAX_NESTING, strings
    with a lone surrogate (the escape \\ud800 decodes to one; it has no UTF-8 form, so
    encoding the body for a cache key or a worker would fail), and numbers out of float
    range (1e999 decodes to inf, which is not JSON). Iterative: the depth is the point."""
    for name, value in body.items():
        pending: list[tuple[Any, int]] = [(name, 0), (value, 1)]
        while pending:
            item, depth = pending.pop()
            if isinstance(item, str):
                if not item.isascii() and _SURROGATE.search(item):
                    raise _bad(f"'{name}' holds a lone surrogate: not valid Unicode text.", name)
            elif isinstance(item, float) and not math.isfinite(item):
                raise _bad(f"'{name}' holds a number out of range.", name)
            elif isinstance(item, dict | list) and depth > MAX_NESTING:
                raise _bad(f"'{name}' nests deeper than {MAX_NESTING} levels.", name)
            elif isinstance(item, dict):
                pending.extend((key, depth) for key in item)
                pending.extend((inner, depth + 1) for inner in item.values())
            elif isinstance(item, list):
                pending.extend((inner, depth + 1) for inner in item)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _check_messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise _bad("'messages' must be a non-empty array.", "messages")
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(role, str) or role not in ROLES:
            raise _bad(f"messages[{index}] needs a role in {sorted(ROLES)}.", f"messages.{index}")
        unknown = sorted(set(message) - MESSAGE_KEYS)
        if unknown:
            raise _bad(
                f"messages[{index}] has unknown field(s): {', '.join(unknown)}.",
                f"messages.{index}.{unknown[0]}",
            )
        content = message.get("content")
        if isinstance(content, list):
            _check_parts(content, index)
        elif not (content is None or isinstance(content, str)):
            raise _bad(
                f"messages[{index}].content must be a string or an array of parts.",
                f"messages.{index}.content",
            )
        check_message(message, index)
    return messages


def _check_max_tokens(body: dict[str, Any]) -> int:
    value = body.get("max_completion_tokens", body.get("max_tokens", DEFAULT_MAX_TOKENS))
    if value is None:
        return DEFAULT_MAX_TOKENS
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS_LIMIT:
        raise _bad(f"'max_tokens' must be an integer from 1 to {MAX_TOKENS_LIMIT}.", "max_tokens")
    return int(value)


def parse_chat_request(raw: bytes) -> ChatRequest:
    """A chat completion from an HTTP body."""
    try:
        # NaN and Infinity are not JSON; Python accepts them unless told otherwise.
        body = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError):
        raise _bad("The body is not valid JSON.") from None
    except RecursionError:  # the decoder's own depth limit (about 1,000 levels)
        raise _bad(f"The body nests deeper than {MAX_NESTING} levels.") from None
    return chat_request_from(body)


def chat_request_from(body: Any) -> ChatRequest:
    """A chat completion from already-decoded JSON (the WebSocket's message, a batch line)."""
    if not isinstance(body, dict):
        raise _bad("The body must be a JSON object.")
    _check_values(body)
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise _bad(f"Unrecognized request argument(s): {', '.join(unknown)}.", unknown[0])
    if body.get("n", 1) != 1 or isinstance(body.get("n"), bool):
        raise _bad("Only n=1 is supported: quotas reserve tokens for one choice.", "n")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _bad("'model' must be a non-empty string.", "model")
    stream = body.get("stream", False)
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream, bool) or not isinstance(stream_options, dict):
        raise _bad("'stream' must be a boolean and 'stream_options' an object.", "stream")
    messages = _check_messages(body.get("messages"))
    max_tokens = _check_max_tokens(body)
    options = check_options(body)
    tool_options, legacy_functions = check_tools(body)
    return ChatRequest(
        model=body["model"],
        messages=modern_messages(messages),
        max_tokens=max_tokens,
        stream=stream,
        include_usage=bool(stream_options.get("include_usage")),
        options={**options, **tool_options},
        legacy_functions=legacy_functions,
    )
