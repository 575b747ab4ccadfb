"""Validate an OpenAI chat completion request body into what the gateway needs."""

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from foundation.json_bytes import json_bytes
from inference.chat_options import (
    IGNORED,
    PASSTHROUGH,
    InvalidRequest,
    check_options,
    json_size,
    one_of,
)
from inference.chat_tools import check_message, check_tools, modern_messages
from inference.request_body import (
    MAX_CHOICES,
    MAX_TOKENS_LIMIT,
    check_max_tokens,
    check_n,
    check_object,
    check_stream,
    decode_body,
    max_tokens_given,
)

__all__ = [
    "MAX_CHOICES",
    "MAX_TOKENS_LIMIT",
    "ChatRequest",
    "InvalidRequest",
    "chat_request_from",
    "parse_chat_request",
]

# "function": the legacy function-calling result, rewritten as a tool result (chat_tools).
ROLES = {"system", "user", "assistant", "tool", "developer", "function"}
DEFAULT_MAX_TOKENS = 512
CHAT_PATH, TEXT_PATH = "/v1/chat/completions", "/v1/completions"  # a worker's endpoints
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
# What the worker renders into the prompt besides the messages (tool schemas above all).
PROMPT_OPTIONS = ("tools", "response_format", "guided_json", "guided_grammar", "suffix")


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
    # A text completion (/v1/completions, inference/text_completion.py): the prompt as the
    # worker gets it, sent to its /v1/completions. `messages` holds it as one user message
    # for what reads a request's messages (the admission estimate, routing's prefix, the
    # cache key); the worker never sees that form.
    text_prompt: str | None = None
    echo: bool = False  # a text completion's reply starts with its prompt
    # The client sent no max_tokens (nor max_completion_tokens): max_tokens is the default,
    # which gives way to the context window and the team's cap instead of being refused
    # for them (gateway/serving/admission.py, fit_max_tokens).
    max_tokens_defaulted: bool = False

    def estimated_prompt_tokens(self) -> int:
        """What admission reserves for the prompt before the worker has counted it: an
        upper-leaning estimate, corrected by reconcile() to what the worker reports.

        UTF-8 bytes / 3 over every field of every message (names, tool-call ids, content
        parts too) and of what the worker renders into the prompt besides (tool schemas):
        English runs about 4 bytes a token, code about 3, and CJK text 3 bytes a character
        at about one token each, so the reservation is rarely short."""
        encoded = json_bytes(self.messages)  # compact UTF-8, as json.dumps would size it
        rendered = sum(
            json_size(self.options[name]) for name in PROMPT_OPTIONS if name in self.options
        )
        return (len(encoded) + rendered) // 3 + 4 * len(self.messages) + 8

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

    @property
    def asks_whole_reply(self) -> bool:
        """Whether its worker may be asked for the whole reply at once rather than a stream
        (inference/client.py, `whole_from_worker`): the client does not stream it, and it
        asks no logprobs, whose alternatives for every token could take a whole reply past
        what one read may hold, where a stream reads it an event at a time."""
        logprobs = self.options.get("logprobs")  # a text completion's is a count: 0 asks too
        return (
            not self.stream
            and (logprobs is None or logprobs is False)
            and self.options.get("prompt_logprobs") is None
        )

    @property
    def upstream_path(self) -> str:
        return CHAT_PATH if self.text_prompt is None else TEXT_PATH

    def upstream_body(self) -> dict[str, Any]:
        # n only when above 1: the body of a single-choice request stays what every
        # OpenAI-compatible server takes (some know no n).
        choices = {"n": self.n} if self.n != 1 else {}
        prompt: dict[str, Any] = (
            {"messages": self.messages}
            if self.text_prompt is None
            else {"prompt": self.text_prompt}
        )
        return {
            **self.options,
            **choices,
            **prompt,
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
        address: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host)
    except ValueError:
        # The resolver also reads IPv4's other spellings as addresses: "127.1",
        # "0x7f000001", "2852039166" (169.254.169.254), "0177.0.0.1", "0".
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
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


def parse_chat_request(raw: bytes) -> ChatRequest:
    """A chat completion from an HTTP body."""
    return chat_request_from(decode_body(raw))


def chat_request_from(body: Any) -> ChatRequest:
    """A chat completion from already-decoded JSON (the WebSocket's message, a batch line)."""
    body = check_object(body, KNOWN)
    n = check_n(body)
    stream, include_usage = check_stream(body)
    messages = _check_messages(body.get("messages"))
    max_tokens = check_max_tokens(body, DEFAULT_MAX_TOKENS)
    options = check_options(body)
    tool_options, legacy_functions = check_tools(body)
    return ChatRequest(
        model=body["model"],
        messages=modern_messages(_for_workers(messages)),
        max_tokens=max_tokens,
        stream=stream,
        include_usage=include_usage,
        options={**options, **tool_options},
        legacy_functions=legacy_functions,
        n=n,
        max_tokens_defaulted=not max_tokens_given(body),
    )
