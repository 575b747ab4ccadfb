"""The keys prefix and session affinity route on, computed once per request.

A worker's prefix cache holds the KV blocks of prompts it has seen, keyed by their leading
tokens. Requests that share a system prompt (one tenant's assistant, say) share those
blocks, so the system prompt is the prefix key. Without one, the first characters of the
first message stand in: few-shot templates and later turns of one conversation start the
same way. The key is a stable hash (not Python's salted hash()), so every gateway process
sends one prefix to the same worker.
"""

import hashlib
from collections.abc import Sequence
from typing import Any

from scaling.routing.router import RouteContext

# About 128 tokens: long enough that unrelated prompts rarely agree on all of it, short
# enough that a conversation's first message is usually whole inside it.
LEADING_CHARS = 512
SYSTEM_ROLES = {"system", "developer"}


def _text(content: Any) -> str:
    """A message's text, whether a string or OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def prefix_key(messages: Sequence[dict[str, Any]]) -> str | None:
    """The leading system messages' hash, or that of the first message's opening."""
    system = []
    for message in messages:
        if message.get("role") not in SYSTEM_ROLES:
            break
        system.append(_text(message.get("content")))
    if any(system):
        return "s:" + _digest("\x1e".join(system))
    if not messages:
        return None
    opening = _text(messages[0].get("content"))[:LEADING_CHARS]
    return "m:" + _digest(opening) if opening else None


def route_context(
    deployment: str,
    policy: str,
    messages: Sequence[dict[str, Any]],
    user: object = None,
    scope: str = "",
) -> RouteContext:
    """Everything routing needs from one chat request; `user` is OpenAI's end-user id.
    `scope` (a team) keeps affinity within it: two teams sending the same system prompt
    are not steered to one worker (their KV blocks are not shared anyway: cache_salt)."""
    session = user if isinstance(user, str) and user else None
    key = prefix_key(messages)
    if key is not None and scope:
        key = f"{scope}|{key}"
    if session is not None and scope:
        session = f"{scope}|{session}"
    return RouteContext(deployment, policy, key, session)
