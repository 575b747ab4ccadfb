"""WebSocket chat at /ws/chat/ (protocol: docs/websocket.md): a thin adapter around the
serving pipeline, as the HTTP view is.

The socket holds a credential (the logged-in user, or the key from an auth message); the
pipeline authorizes it again for every chat message, so a revoked key or a user taken out
of their team is refused at their next message, not at their next connection. Errors use
the same table, so a fault has the same code here as over HTTP. Message rates and failed
authentications are limited per socket and per client address (gateway/chat/limits.py).

A reply's chunks go out as events (gateway/chat/events.py): text as `delta`, tool calls as
`tool_call_delta`; `done` says how it ended and repeats the calls assembled.

When the process drains (SIGTERM, gateway/drain.py), each socket is a `DrainableSocket`:
an idle one is told at once that the server is restarting (an `error` event,
`503 service_unavailable`, which the web chat shows before it reconnects) and closed with
1012 (service restart); one with a reply streaming lets the reply finish (`done`, then
`quota`) and then does the same. A reply still streaming near the drain deadline is
stopped, as a client's `stop` would stop it.
"""

import asyncio
import json
import logging
from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from caching.exact import CacheDirectives
from foundation.redis_clients import RedisUnavailable
from gateway.accounts.quota_usage import read_team_usage
from gateway.accounts.quotas import AdmissionUnavailable
from gateway.accounts.records import limits_for_team
from gateway.chat.events import chunk_events, ending
from gateway.chat.history import ChatThread, completion_body, reply_figures
from gateway.chat.limits import SocketLimits
from gateway.drain import drain
from gateway.drain_asgi import restarting
from gateway.serving.admission import (
    ApiKeyCredential,
    Credential,
    NoCredential,
    SessionUserCredential,
)
from gateway.serving.context_trim import POLICY_FIELD, Policy, with_requested_policy
from gateway.serving.errors import DOMAIN_ERRORS, ApiError, Busy, api_error
from gateway.serving.pipeline import new_request_id, open_completion
from inference.chat_request import ChatRequest, InvalidRequest, chat_request_from
from inference.reply import ReplyAssembler

logger = logging.getLogger(__name__)
INTERNAL_ERROR = ApiError(500, "The gateway failed on this reply; try again.", "internal_error")
NO_CACHE_FIELD = "no_cache"  # a chat message's: answer afresh, as HTTP's Cache-Control: no-cache


# A socket may guess keys only this often before it is closed: guessing must cost a new
# connection (and a new TLS handshake in production) per few tries.
MAX_FAILED_AUTHS = 5


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


class ChatConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    # No channel layer: a chat socket neither sends to nor hears from other processes, and
    # with one every socket held a blocking read on the primary Redis, so a Redis restart
    # dropped every open socket (the chaos run found it). An alias that names no layer.
    channel_layer_alias = "none"
    credential: Credential
    generation: "asyncio.Task[None] | None"
    streaming: bool  # a reply is on its way; "done" clears it, before the quota follows
    socket_closed: bool  # by either side: nothing more is sent
    restart_told: bool  # the drain's restart event is sent (or on its way): only once
    failed_auths: int
    limits: SocketLimits

    async def connect(self) -> None:
        user = self.scope.get("user")
        logged_in = user is not None and user.is_authenticated and user.pk is not None
        session_key = getattr(self.scope.get("session"), "session_key", None)
        self.credential = (
            SessionUserCredential(int(user.pk), session_key) if logged_in else NoCredential()
        )
        self.generation = None
        self.streaming = False
        self.socket_closed = False
        self.restart_told = False
        self.failed_auths = 0
        self.limits = SocketLimits(self.scope)
        await self.accept()
        if drain.add(self):  # connected as the process began to drain
            await self._restarting()
            return
        if logged_in:
            await self._send_quota()
            return
        # An address locked out for guessing keys learns it at once, not after a guess.
        refusal = await self.limits.auth_lockout()
        if refusal is not None and refusal.status == 429:
            await self._error(refusal)
            await self._close(4429)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The HTTP body limit holds here too: a larger message is refused and the socket
        closed (1009, "message too big") before any of it is parsed. Then the message rate
        limits (gateway/chat/limits.py): a message over them is refused unparsed, and a
        socket that keeps sending through refusals is closed (4429)."""
        size = len(text_data.encode()) if text_data is not None else len(bytes_data or b"")
        if size > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            message = f"Messages are limited to {limit} bytes."
            await self._error(ApiError(413, message, "request_too_large"))
            await self._close(1009)
            return
        refusal = await self.limits.admit_message()
        if refusal is not None:
            await self._error(refusal)
            if self.limits.should_close:
                await self._close(4429)
            return
        try:
            content = json.loads(text_data or "", parse_constant=_not_json)
        except (ValueError, UnicodeDecodeError, RecursionError):
            await self._error(ApiError(400, "Messages are JSON text frames.", "invalid_request"))
            return
        await self.receive_json(content)

    async def _close(self, code: int) -> None:
        """Close from our side: a reply still streaming is stopped first, or its next send
        would follow the close (an ASGI error)."""
        self.socket_closed = True
        if self.generation is not None:
            self.generation.cancel()
        await self.close(code=code)

    async def send_json(self, content: Any, close: bool = False) -> None:
        if self.socket_closed:
            return  # a stopped reply's last events have no reader left
        await super().send_json(content, close)

    async def disconnect(self, code: int) -> None:
        self.socket_closed = True
        drain.discard(self)
        if self.generation is not None:
            self.generation.cancel()  # a closed socket stops the upstream generation

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "auth":
            api_key = content.get("api_key")
            await self._authenticate(api_key if isinstance(api_key, str) else "")
        elif kind == "chat":
            await self._start(content)
        elif kind == "stop":
            if self.generation is not None:
                self.generation.cancel()
        else:
            message = "Messages are {type: auth | chat | stop}."
            await self._error(ApiError(400, message, "invalid_request"))

    async def _authenticate(self, api_key: str) -> None:
        # A locked-out address is refused before its key is looked at: even a right key
        # would tell a guesser they had found one.
        lockout = await self.limits.auth_lockout()
        if lockout is not None:
            await self._error(lockout)
            if lockout.status == 429:
                await self._close(4429)
            return
        credential = ApiKeyCredential(api_key)
        try:
            await credential.authorize()
        except DOMAIN_ERRORS as exc:
            error = api_error(exc)
            await self._error(error)
            if error.status not in (401, 403):
                return  # Redis unreachable, say: not the client's guess
            self.failed_auths += 1
            refusal = await self.limits.count_failed_auth()  # per address, across sockets
            if refusal is None and self.failed_auths >= MAX_FAILED_AUTHS:
                message = f"{MAX_FAILED_AUTHS} failed authentications: connect again to retry."
                refusal = ApiError(429, message, "too_many_failed_authentications")
            if refusal is not None:
                await self._error(refusal)
                await self._close(4429)
            return
        self.credential = credential
        await self.send_json({"type": "ready"})
        await self._send_quota()

    async def _start(self, content: dict[str, Any]) -> None:
        if self.streaming:
            await self._error(
                api_error(Busy("A reply is still streaming; send {type: stop} first."))
            )
            return
        if drain.draining:
            return  # the restart event answers it: the socket closes without a new reply
        # A logged-in user's message may name a conversation to keep the reply in
        # (gateway/chat/history.py): checked to be theirs before any token is spent.
        thread = await ChatThread.from_message(self.credential, content)
        if drain.draining or self.socket_closed:
            return  # the drain began meanwhile (or the client left): no reply starts
        if isinstance(thread, ApiError):
            await self._error(thread)
            return
        body = completion_body(content)
        # no_cache asks for a fresh reply (the web chat's Regenerate of a semantic hit): the
        # caches are not read, the reply is kept as any other, and the hit it replaces is
        # compared with it (docs/caching.md, "Re-asks").
        no_cache = body.pop(NO_CACHE_FIELD, False)
        if not isinstance(no_cache, bool):
            message = f"'{NO_CACHE_FIELD}' must be true or false."
            await self._error(ApiError(400, message, "invalid_request", NO_CACHE_FIELD))
            return
        # The socket's context policy (docs/websocket.md): trim unless the message names one,
        # so a long conversation loses its oldest turns (and says so) instead of failing.
        policy = body.pop(POLICY_FIELD, None)
        policy = Policy.TRIM.value if policy is None else policy
        self.streaming = True
        directives = CacheDirectives(lookup=not no_cache)
        self.generation = asyncio.create_task(
            self._generate({**body, "stream": True}, thread, policy, directives)
        )
        self.generation.add_done_callback(_generation_ended)

    async def _generate(
        self, body: dict[str, Any], thread: ChatThread, policy: object, directives: CacheDirectives
    ) -> None:
        try:
            await self._reply(body, thread, policy, directives)
        except Exception as exc:
            gone = isinstance(exc, OSError) and not isinstance(exc, TimeoutError)
            if gone or self.socket_closed:
                raise  # the client is gone: _generation_ended says so
            # A fault of the server's own: HTTP answers it with a 500; the socket says the
            # same rather than leave the page waiting for a reply that has ended.
            logger.error("chat generation failed", exc_info=exc)
            self.streaming = False
            await self._error(INTERNAL_ERROR)
        finally:
            self.streaming = False

    async def _reply(
        self, body: dict[str, Any], thread: ChatThread, policy: object, directives: CacheDirectives
    ) -> None:
        request_id = new_request_id()
        reply = ReplyAssembler()  # what is kept in the thread, and how the reply ended

        def read() -> ChatRequest:  # validated after authentication, the policy with it
            return with_requested_policy(socket_request(body), policy, POLICY_FIELD)

        try:
            # The same caches as the HTTP API (a sampled chat bypasses them unless the
            # team's cache policy says to cache sampled requests too).
            run = await open_completion(self.credential, read, directives, request_id)
        except DOMAIN_ERRORS as exc:
            await self._error(api_error(exc), request_id)
            return
        event = "done"
        async with run:  # its exit settles: reconciles the reservation, bills what was made
            try:
                async for chunk in run.stream():
                    reply.add(chunk)
                    for relayed in chunk_events(request_id, chunk):
                        await self.send_json(relayed)
            except DOMAIN_ERRORS as exc:
                self.streaming = False  # settles on the way out; the client may go on
                await self._error(api_error(exc), request_id)
                return
            except asyncio.CancelledError:
                event = "stopped"
        prompt, completion = run.used_tokens()
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        model, cache = run.deployment.name, str(run.cache_result)
        # Messages left out to fit the context window: the web chat tells the user.
        trimmed = run.target.context_trimmed
        saved = await thread.record(body, run, reply, stopped=event == "stopped")
        self.streaming = False  # the client may send its next message once it reads this
        await self.send_json(
            {
                "type": event,
                "id": request_id,
                "model": model,  # for model "auto", the deployment it routed to
                "cache": cache,
                "usage": usage,
                **ending(reply),
                **reply_figures(run),
                **({"context_trimmed": trimmed} if trimmed else {}),
                **saved,
            }
        )
        await self._send_quota()

    async def drain(self) -> None:
        """The process drains (gateway/drain.py): the reply in progress ends first (done,
        error, or stopped by stop_reply), then the client is told and the socket closed.
        New chat messages start nothing meanwhile (_start)."""
        if self.generation is not None and not self.generation.done():
            await asyncio.wait([self.generation])
        await self._restarting()

    def stop_reply(self) -> None:
        if self.generation is not None:
            self.generation.cancel()  # the reply ends with `stopped`, as on a client's stop

    async def _restarting(self) -> None:
        """Close with 1012 (service restart) after an event the web chat shows."""
        if self.socket_closed or self.restart_told:
            return
        self.restart_told = True
        await self._error(restarting())
        await self._close(1012)

    async def _send_quota(self) -> None:
        """What the team has left of each limit, so the page can show it before and after."""
        try:
            team_id = (await self.credential.authorize()).team_id
            limits = await limits_for_team(team_id)
            usage = await sync_to_async(read_team_usage, thread_sensitive=False)(team_id, limits)
        except (AdmissionUnavailable, RedisUnavailable):
            logger.warning("quota usage unreadable: Redis is down")
            return  # the chat itself reports Redis trouble on the next request
        except DOMAIN_ERRORS:
            return  # no longer authorized: the next chat message says why
        await self.send_json({"type": "quota", "limits": [item.as_dict() for item in usage]})

    async def _error(self, error: ApiError, request_id: str | None = None) -> None:
        event: dict[str, Any] = {"type": "error", **error.body()}
        if request_id is not None:
            event["id"] = request_id
        retry_after = error.headers.get("Retry-After", "")
        if retry_after.isdigit():  # a quota or a busy queue: when to try again, in seconds
            event["retry_after"] = int(retry_after)
        await self.send_json(event)


def socket_request(body: dict[str, Any]) -> ChatRequest:
    """A `chat` message's completion, validated as the HTTP API validates one (tools
    included: inference/chat_tools.py), less what the socket cannot relay: several choices
    (one reply streams into one thread) and the legacy functions fields (their calls would
    come back as tool calls, which a client of that era does not read)."""
    chat = chat_request_from(body)
    if chat.n != 1:
        raise InvalidRequest(
            "The web chat streams one reply: n must be 1. Use POST "
            "/v1/chat/completions for several choices.",
            "n",
        )
    if chat.legacy_functions:
        field = "functions" if body.get("functions") is not None else "function_call"
        raise InvalidRequest(
            "The socket takes tools and tool_choice; the legacy functions and "
            "function_call are served by POST /v1/chat/completions.",
            field,
        )
    return chat


def _generation_ended(task: "asyncio.Task[None]") -> None:
    """A generation's end, its exception retrieved: a socket the client closed while its
    reply was being sent (the server's send fails with an OSError, uvicorn's
    ClientDisconnected) is how sockets end, not a fault; anything else is logged as one."""
    if task.cancelled() or task.exception() is None:
        return
    exc = task.exception()
    if isinstance(exc, OSError):
        logger.debug("chat socket closed while its reply was sent: %r", exc)
    else:
        logger.error("chat generation failed", exc_info=exc)
