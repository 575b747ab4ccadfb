"""Refuse request bodies over MAX_REQUEST_BODY_BYTES while they arrive, chunked or not.

Django's ASGI handler spools a whole body before any view runs, so a limit checked in the
view comes too late for a chunked upload with no Content-Length. This wrapper counts the
bytes as they are received and answers 413 (in OpenAI's error shape) once they exceed it.
"""

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[..., Awaitable[None]]  # any ASGI app; Django's handler has narrower types


# After a 413, what is still arriving is read and dropped, up to these bounds, before the
# response ends: a socket closed with unread input makes the kernel answer with a reset,
# which can reach the client before the 413 does (nginx calls this a lingering close).
LINGER_BYTES = 8 * 1024 * 1024
LINGER_S = 2.0


class BodyTooLarge(Exception):
    pass


def _too_large_body(limit: int) -> bytes:
    error = {
        "message": f"Request body exceeds {limit} bytes.",
        "type": "invalid_request_error",
        "param": None,
        "code": "request_too_large",
    }
    return json.dumps({"error": error}).encode()


class BodySizeLimit:
    """limit: for every request but a POST to a path of `larger` (a file upload's), which
    may send its own limit when `may_send_larger` says so for the request (it holds a
    valid key): a body is received in full before any view checks who sent it, so a
    larger limit for anyone would let anyone fill the disk with uploads nobody keeps."""

    def __init__(
        self,
        app: App,
        limit: int,
        larger: dict[str, int] | None = None,
        may_send_larger: Callable[[Scope], Awaitable[bool]] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.larger = larger or {}
        self.may_send_larger = may_send_larger

    async def _larger_if_allowed(self, scope: Scope, larger: int) -> int:
        if self.may_send_larger is not None and not await self.may_send_larger(scope):
            return self.limit
        return larger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit  # every request but an upload's: no await on the hot path
        larger = self.larger.get(scope.get("path", ""))
        if larger is not None and scope.get("method") == "POST":
            limit = await self._larger_if_allowed(scope, larger)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            return await self._refuse(send, receive, limit)
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge()
            return message

        try:
            await self.app(scope, counting_receive, send)
        except BodyTooLarge:
            await self._refuse(send, receive, limit)

    async def _refuse(self, send: Send, receive: Receive, limit: int) -> None:
        body = _too_large_body(limit)
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        # The whole answer goes out first (its length is declared); the response ends once
        # the rest of the upload is drained, or the bounds are reached.
        await send({"type": "http.response.body", "body": body, "more_body": True})
        await _drain(receive)
        await send({"type": "http.response.body", "body": b""})


async def _drain(receive: Receive) -> None:
    drained = 0
    try:
        async with asyncio.timeout(LINGER_S):
            while drained < LINGER_BYTES:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body"):
                    return
                drained += len(message.get("body", b""))
    except TimeoutError:
        return
