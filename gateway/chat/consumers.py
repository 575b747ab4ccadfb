"""WebSocket chat at /ws/chat/ (protocol: docs/websocket.md).

The consumer only speaks the protocol; admission, streaming and settlement are the same
code the HTTP API uses (gateway.api.admission, CompletionRun).
"""

import asyncio
import json
import logging
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from gateway.accounts.authentication import AuthenticationFailed, ScopeDenied, authenticate_key
from gateway.accounts.quota_usage import read_team_usage
from gateway.accounts.quotas import AdmissionUnavailable
from gateway.accounts.records import limits_for_team
from gateway.api.admission import Caller, prepare_completion
from gateway.api.completions import CompletionRun, upstream_api_error
from gateway.api.errors import ApiError
from gateway.cache import planner
from gateway.cache.exact import CacheDirectives
from gateway.chat.callers import caller_for_user
from gateway.redis_clients import RedisUnavailable
from inference.client import UpstreamError

logger = logging.getLogger(__name__)


class ChatConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    caller: Caller | None
    generation: "asyncio.Task[None] | None"

    async def connect(self) -> None:
        self.caller = await caller_for_user(self.scope.get("user"))
        self.generation = None
        await self.accept()
        if self.caller is not None:
            await self._send_quota(self.caller)

    async def disconnect(self, code: int) -> None:
        if self.generation is not None:
            self.generation.cancel()  # a closed socket stops the upstream generation

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "auth":
            await self._authenticate(str(content.get("api_key", "")))
        elif kind == "chat":
            await self._start(content)
        elif kind == "stop":
            if self.generation is not None:
                self.generation.cancel()
        else:
            await self._error(400, "Messages are {type: auth | chat | stop}.", "invalid_request")

    async def _authenticate(self, api_key: str) -> None:
        try:
            self.caller = Caller.from_key(await authenticate_key(api_key, "inference"))
        except (AuthenticationFailed, ScopeDenied) as exc:
            await self._error(401, str(exc), "invalid_api_key")
            return
        except RedisUnavailable as exc:
            await self._error(503, str(exc), "service_unavailable")
            return
        await self.send_json({"type": "ready"})
        await self._send_quota(self.caller)

    async def _start(self, content: dict[str, Any]) -> None:
        if self.caller is None:
            await self._error(
                401, "Log in, or send {type: auth, api_key} first.", "unauthenticated"
            )
        elif self.generation is not None and not self.generation.done():
            await self._error(409, "A reply is still streaming; send {type: stop} first.", "busy")
        else:
            body = {k: v for k, v in content.items() if k != "type"}
            self.generation = asyncio.create_task(self._generate(self.caller, body))

    async def _generate(self, caller: Caller, body: dict[str, Any]) -> None:
        request_id = f"chatcmpl-{uuid.uuid4().hex}"
        try:
            chat, deployment, reservation = await prepare_completion(
                caller, json.dumps({**body, "stream": True}).encode()
            )
        except ApiError as error:
            await self.send_json({"type": "error", "id": request_id, **error.body()})
            return
        # The same caches as the HTTP API (a sampled chat bypasses them unless the team's
        # cache policy says to cache sampled requests too).
        cache = await planner.plan(CacheDirectives(), caller.team_id, deployment, chat)
        run = CompletionRun(request_id, chat, deployment, reservation, cache)
        chunks = run.chunks()
        event = "done"
        try:
            first = await run.first_chunk(chunks)
            await self._relay(request_id, first)
            async for chunk in chunks:
                await self._relay(request_id, chunk)
        except ApiError as error:
            await self.send_json({"type": "error", "id": request_id, **error.body()})
            return
        except UpstreamError as exc:
            await self.send_json(
                {"type": "error", "id": request_id, **upstream_api_error(exc).body()}
            )
            return
        except asyncio.CancelledError:
            event = "stopped"
        finally:
            await asyncio.shield(chunks.aclose())  # settles the reservation, bills what was made
        prompt, completion = run.used_tokens()
        await self.send_json(
            {
                "type": event,
                "id": request_id,
                "model": deployment.name,
                "cache": run.cache_result,
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )
        await self._send_quota(caller)

    async def _send_quota(self, caller: Caller) -> None:
        """What the team has left of each limit, so the page can show it before and after."""
        try:
            limits = await limits_for_team(caller.team_id)
            usage = await sync_to_async(read_team_usage, thread_sensitive=False)(
                caller.team_id, limits
            )
        except (AdmissionUnavailable, RedisUnavailable):
            logger.warning("quota usage for team %s unreadable: Redis is down", caller.team_id)
            return  # the chat itself reports Redis trouble on the next request
        await self.send_json({"type": "quota", "limits": [item.as_dict() for item in usage]})

    async def _relay(self, request_id: str, chunk: dict[str, Any]) -> None:
        for choice in chunk.get("choices", []):
            text = (choice.get("delta") or {}).get("content")
            if text:
                await self.send_json({"type": "delta", "id": request_id, "content": text})

    async def _error(self, status: int, message: str, code: str) -> None:
        await self.send_json({"type": "error", **ApiError(status, message, code).body()})
