"""The exact response cache: a reply stored under a hash of everything that shapes it.

The key covers the team (no cross-team hits, ever), the deployment and its revision, the
whole message list (system prompt and every earlier turn), max_tokens and every option
passed to the model (sampling parameters, stop, seed, response_format...). Change any of
them and the request misses: a user who edited their context never gets the old answer.

Only deterministic requests are cached (temperature 0, or a seed): a sampled reply is one
draw among many and replaying it would change what the caller asked for.

A reply is kept whole: its text, its reasoning and its tool calls, so that a replay has the
shape of the generation it replaces. Entries stored before reasoning and tool calls were
kept (text only) read as replies without them.
"""

import asyncio
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from django.conf import settings

from foundation.redis_batch import may_go_unawaited
from foundation.redis_clients import REDIS_FAILURES, async_cache_redis_batch
from inference.chat_request import ChatRequest, InvalidRequest
from inference.deployments import DeploymentInfo
from inference.reply import ReplyAssembler

KEY_PREFIX = "sluice:cache:exact:"


@dataclass(frozen=True)
class CachedReply:
    content: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    reasoning_content: str | None = None
    # Complete calls, as a non-streamed reply has them: [{id, type, function: {name,
    # arguments}}].
    tool_calls: list[dict[str, Any]] | None = None

    @classmethod
    def assembled(
        cls, reply: ReplyAssembler, prompt_tokens: int, completion_tokens: int
    ) -> "CachedReply":
        return cls(
            reply.text,
            reply.finish_reason,
            prompt_tokens,
            completion_tokens,
            reply.reasoning_text,
            reply.tool_calls,
        )

    @classmethod
    def decoded(cls, stored: dict[str, Any]) -> "CachedReply":
        """From an entry's JSON, whichever version of this class wrote it."""
        known = {field.name for field in fields(cls)}
        return cls(**{k: v for k, v in stored.items() if k in known})


@dataclass(frozen=True)
class CacheDirectives:
    """What the caller asked of the cache: Cache-Control no-cache (do not answer from the
    cache), no-store (do not keep this reply), x-sluice-cache-ttl (seconds to keep it)."""

    lookup: bool = True
    store: bool = True
    ttl_s: int | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> "CacheDirectives":
        """From HTTP headers (case-insensitive, as Django's request.headers)."""
        control = {part.strip().lower() for part in headers.get("Cache-Control", "").split(",")}
        ttl_s = None
        raw_ttl = headers.get("x-sluice-cache-ttl")
        if raw_ttl is not None:
            if (
                not (raw_ttl.isascii() and raw_ttl.isdigit())
                or len(raw_ttl) > 12  # int() refuses over 4,300 digits: a 500, not a 400
                or not 1 <= int(raw_ttl) <= settings.CACHE_EXACT_MAX_TTL_S
            ):
                raise InvalidRequest(
                    f"x-sluice-cache-ttl must be whole seconds from 1 to "
                    f"{settings.CACHE_EXACT_MAX_TTL_S}",
                    "x-sluice-cache-ttl",
                )
            ttl_s = int(raw_ttl)
        return cls("no-cache" not in control, "no-store" not in control, ttl_s)


def is_deterministic(chat: ChatRequest) -> bool:
    """Whether a replay is what the caller asked for (otherwise: only if the policy says)."""
    return chat.options.get("temperature") == 0 or chat.options.get("seed") is not None


def cache_key(team_id: int, deployment: DeploymentInfo, chat: ChatRequest) -> str:
    material = {
        "team": team_id,
        "deployment": deployment.name,
        "revision": deployment.revision,
        "messages": chat.messages,
        "max_tokens": chat.max_tokens,
        "options": chat.options,
    }
    if chat.text_prompt is not None:  # a text to continue, never the same as a chat turn
        material["endpoint"] = chat.upstream_path
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return KEY_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


class CacheUnavailable(Exception):
    """The cache's Redis failed: the request goes to the model and says `bypass`."""


def lookup_submitted(key: str) -> "asyncio.Future[Any]":
    """The GET of the entry under key, in this event-loop turn's cache Redis batch when
    this returns: read it with looked_up(), or cancel() it (unsent, it is not sent)."""
    return may_go_unawaited(async_cache_redis_batch().submit("GET", key))


async def looked_up(raw: "asyncio.Future[Any]") -> CachedReply | None:
    """The entry lookup_submitted() asked for; CacheUnavailable if Redis failed."""
    try:
        value = await raw
    except REDIS_FAILURES as exc:
        raise CacheUnavailable(str(exc)) from exc
    return None if value is None else CachedReply.decoded(json.loads(value))


def encode(reply: CachedReply) -> str:
    """Without the fields a text reply leaves empty: old and new text entries are alike."""
    stored = asdict(reply)
    for name in ("reasoning_content", "tool_calls"):
        if stored[name] is None:
            del stored[name]
    return json.dumps(stored)


def replay_chunks(
    reply: CachedReply, request_id: str, created: int, model: str, include_usage: bool
) -> list[dict[str, Any]]:
    """The stored reply as the chunks a generation would have streamed."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": request_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    if reply.reasoning_content:
        chunks.append(chunk({"reasoning_content": reply.reasoning_content}))
    if reply.content or not reply.tool_calls:
        chunks.append(chunk({"content": reply.content}))
    for index, call in enumerate(reply.tool_calls or []):  # each call whole, in one delta
        chunks.append(chunk({"tool_calls": [{"index": index, **call}]}))
    chunks.append(chunk({}, reply.finish_reason))
    if include_usage:
        chunks.append(
            {
                "id": request_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage(reply),
            }
        )
    return chunks


def usage(reply: CachedReply) -> dict[str, Any]:
    """A replayed reply's usage: what it cost when generated, its whole prompt reported as
    cached (OpenAI's prompt_tokens_details), since none of it was processed again."""
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.prompt_tokens},
    }
