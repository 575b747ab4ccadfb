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
# Admission reserves max_tokens for each choice; a larger max_tokens than any deployed
# context would only be refused by the worker after queueing.
MAX_TOKENS_LIMIT = 32_768
# The most choices (n) one request may ask for. Admission reserves n x max_tokens up front,
# and the worker runs the n sequences side by side in its batch: a larger n lets one request
# hold a team's whole token minute and a worker's batch slots at once. Eight covers
# best-of-n sampling and self-consistency voting; more is a batch (gateway/batches).
MAX_CHOICES = 8
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
    # What to do when the prompt plus max_tokens does not fit the context window, as the
    # client asked for this request (refuse, clamp or trim: gateway/serving/context_trim.py
    # checks it); None follows the team's policy. Not part of the body: HTTP's
    # x-sluice-context-policy header, or the socket's context_policy field.
    context_policy: str | None = None
    # How many choices to generate (OpenAI's n): the worker samples them from one prompt,
    # each up to max_tokens; admission reserves n x max_tokens (gateway/serving/admission.py).
    n: int = 1

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
        # n only when above 1: the body of a single-choice request stays what every
        # OpenAI-compatible server takes (some know no n).
        choices = {"n": self.n} if self.n != 1 else {}
        return {
            **self.options,
            **choices,
            "messages": self.messages,
            "max_tokens": self.max_tokens,
            "stream_options": {"include_usage": True},
        }


def _bad(message: str, param: str | None = None) -> InvalidRequest:
    return InvalidRequest(message, param)


MESSAGE_KEYS = {
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "function_call",
    "refusal",  # an assistant turn's refusal, as OpenAI's replies carry it (null or text)
}
# Text parts reach every deployment; image parts only one marked accepts_images (checked
# once the deployment is known: ChatRequest.first_image_part). Audio and files: none.
CONTENT_PART_TYPES = {"text", "image_url"}
# prompt_cache_breakpoint (on text and image parts): an OpenAI prompt-cache hint, accepted
# and dropped (a vLLM worker caches prefixes by itself).
TEXT_PART_KEYS = {"type", "text", "prompt_cache_breakpoint"}
BREAKPOINT = {"mode": "explicit"}
IMAGE_DETAILS = {"auto", "low", "high"}
MAX_IMAGE_URL_CHARS = 2048  # an http(s) address; data: URIs are bounded by the body limit
IMAGE_URL_SCHEMES = ("https://", "http://", "data:image/")


def _breakpoint(part: dict[str, Any]) -> bool:
    """Whether a part's prompt_cache_breakpoint, if any, is OpenAI's {mode: explicit}."""
    return bool(part.get("prompt_cache_breakpoint", BREAKPOINT) == BREAKPOINT)


def _check_parts(content: list[Any], index: int, role: str) -> None:
    # An assistant turn may carry its refusal as a part, as OpenAI's replies have it.
    types = CONTENT_PART_TYPES | ({"refusal"} if role == "assistant" else set())
    for number, part in enumerate(content):
        param = f"messages.{index}.content.{number}"
        if not isinstance(part, dict) or not one_of(part.get("type"), types):
            kind = part.get("type") if isinstance(part, dict) else None
            shown = repr(kind)[:40] if kind is None or isinstance(kind, str) else "non-string"
            raise _bad(
                f"messages[{index}].content[{number}] is a {shown} part; the gateway takes "
                f"{sorted(types)} parts only.",
                f"{param}.type",
            )
        if part["type"] == "refusal":
            if not isinstance(part.get("refusal"), str) or set(part) != {"type", "refusal"}:
                raise _bad(f"messages[{index}].content[{number}] must be {{type, refusal}}.", param)
        elif part["type"] == "image_url":
            _check_image_part(part, f"messages[{index}].content[{number}]", param)
        elif (
            not isinstance(part.get("text"), str)
            or set(part) - TEXT_PART_KEYS
            or not _breakpoint(part)
        ):
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
        set(part) - {"type", "image_url", "prompt_cache_breakpoint"}
        or not _breakpoint(part)
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


def _plain_part(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "refusal":
        return {"type": "text", "text": part["refusal"]}
    return {k: v for k, v in part.items() if k != "prompt_cache_breakpoint"}


def _for_workers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as every worker reads them: without OpenAI's prompt-cache hints, and
    with an assistant's refusal (the field or parts) as its text, what vLLM makes of them;
    other servers may not know either."""
    plain = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(
            p["type"] == "refusal" or "prompt_cache_breakpoint" in p for p in content
        ):
            message = {**message, "content": [_plain_part(p) for p in content]}
        if "refusal" in message:
            refusal = message["refusal"]
            message = {k: v for k, v in message.items() if k != "refusal"}
            if message.get("content") is None and refusal is not None:
                message["content"] = refusal
        plain.append(message)
    return plain


def _calls_in(message: dict[str, Any]) -> bool:
    return message.get("tool_calls") is not None or message.get("function_call") is not None


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
        if message.get("name") is not None and not isinstance(message["name"], str):
            raise _bad(f"messages[{index}].name must be a string.", f"messages.{index}.name")
        refusal = message.get("refusal")
        if refusal is not None and (role != "assistant" or not isinstance(refusal, str)):
            raise _bad(
                f"messages[{index}].refusal must be a string, on an assistant message.",
                f"messages.{index}.refusal",
            )
        content = message.get("content")
        if role == "assistant" and content is None and refusal is None and not _calls_in(message):
            raise _bad(
                f"messages[{index}] is an assistant message with no content: it needs content, "
                "a refusal, tool_calls or function_call.",
                f"messages.{index}.content",
            )
        if isinstance(content, list):
            _check_parts(content, index, role)
        elif not (content is None or isinstance(content, str)):
            raise _bad(
                f"messages[{index}].content must be a string or an array of parts.",
                f"messages.{index}.content",
            )
        check_message(message, index)
    return messages


def _check_max_tokens(body: dict[str, Any]) -> int:
    """max_completion_tokens, else max_tokens, else the default; each is checked when given
    (a null max_completion_tokens must not let a malformed max_tokens through)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 1 <= value <= MAX_TOKENS_LIMIT
        ):
            raise _bad(f"'{name}' must be an integer from 1 to {MAX_TOKENS_LIMIT}.", "max_tokens")
    for name in ("max_completion_tokens", "max_tokens"):
        if body.get(name) is not None:
            return int(body[name])
    return DEFAULT_MAX_TOKENS


def _check_n(body: dict[str, Any]) -> int:
    """n: an integer from 1 to MAX_CHOICES; null is the field left out (1)."""
    n = body.get("n")
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise _bad(f"'n' must be an integer from 1 to {MAX_CHOICES}.", "n")
    return int(n)


# include_obfuscation: OpenAI pads its stream chunks against side channels; accepted and
# ignored (the gateway does not pad).
STREAM_OPTIONS = {"include_usage", "include_obfuscation"}


def _stream_options(options: dict[str, Any]) -> bool:
    return all(
        one_of(key, STREAM_OPTIONS) and (value is None or isinstance(value, bool))
        for key, value in options.items()
    )


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
    # null is the field left out, as OpenAI reads it (n, stream and stream_options are nullable)
    n = _check_n(body)
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _bad("'model' must be a non-empty string.", "model")
    stream = False if body.get("stream") is None else body["stream"]
    stream_options = {} if body.get("stream_options") is None else body["stream_options"]
    if not isinstance(stream, bool):
        raise _bad("'stream' must be a boolean.", "stream")
    if not isinstance(stream_options, dict) or not _stream_options(stream_options):
        raise _bad(
            "'stream_options' must be an object of include_usage and include_obfuscation, "
            "each a boolean.",
            "stream_options",
        )
    messages = _check_messages(body.get("messages"))
    max_tokens = _check_max_tokens(body)
    options = check_options(body)
    tool_options, legacy_functions = check_tools(body)
    return ChatRequest(
        model=body["model"],
        messages=modern_messages(_for_workers(messages)),
        max_tokens=max_tokens,
        stream=stream,
        include_usage=bool(stream_options.get("include_usage")),
        options={**options, **tool_options},
        legacy_functions=legacy_functions,
        n=n,
    )
