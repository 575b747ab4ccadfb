"""Refuse request bodies over MAX_REQUEST_BODY_BYTES while they arrive, chunked or not.

Django's ASGI handler spools a whole body before any view runs, so a limit checked in the
view comes too late for a chunked upload with no Content-Length. This wrapper counts the
bytes as they are received and answers 413 (in OpenAI's error shape) once they exceed it.
"""

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[..., Awaitable[None]]  # any ASGI app; Django's handler has narrower types


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
    def __init__(self, app: App, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if declared.isdigit() and int(declared) > self.limit:
            return await self._refuse(send)
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge()
            return message

        try:
            await self.app(scope, counting_receive, send)
        except BodyTooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = _too_large_body(self.limit)
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
        await send({"type": "http.response.body", "body": body})
