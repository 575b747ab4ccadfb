"""The ASGI side of the drain (gateway/drain.py): the outermost wrapper of the gateway app.

- `lifespan.startup` installs the drain's signal hook with GATEWAY_DRAIN_TIMEOUT_S: the
  first moment the app runs in the server's main thread and event loop, after uvicorn has
  installed its own handlers (Channels' ProtocolTypeRouter has no lifespan of its own).
- While draining, an HTTP request that still reaches the process (one sent on a keep-alive
  connection just as the drain began, or every request under a server that keeps
  listening) is refused: 503 `service_unavailable` in OpenAI's shape, `Retry-After: 1` and
  `Connection: close`, so the client's next try opens a connection that reaches another
  process. The probes (/healthz, /readyz, /metrics) still answer: /readyz says 503 itself.
- `lifespan.shutdown` waits up to SHUTDOWN_SETTLE_S for settlement work still running
  in the background (gateway/serving/settlement.py) before the event loop ends.
- WebSockets pass through: the chat consumer tells a socket that connects while draining
  that the server is restarting, in the event shape the web chat already shows.
"""

import json
from typing import Any

from django.conf import settings

from gateway.drain import drain
from gateway.serving import settlement
from gateway.serving.errors import ApiError

PROBES = frozenset({"/healthz", "/readyz", "/metrics"})
RETRY_AFTER_S = 1
# A bill is one round trip; what takes longer is a usage event waiting for Redis to come
# back, which is logged whole (for replay) when cut off here.
SHUTDOWN_SETTLE_S = 5.0


def restarting() -> ApiError:
    """What a client is told when the process it reached is draining."""
    return ApiError(
        503,
        "The server is restarting; send the request again (it will reach another process).",
        "service_unavailable",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


class DrainGuard:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "http" and drain.draining and scope["path"] not in PROBES:
            await _refuse(send)
        else:
            await self.app(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                drain.install(settings.GATEWAY_DRAIN_TIMEOUT_S)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                # Bills running beside replies already sent, usage events queued again:
                # the loop ends after this, and would cancel them unlogged.
                await settlement.finish_background(SHUTDOWN_SETTLE_S)
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _refuse(send: Any) -> None:
    error = restarting()
    body = json.dumps(error.body()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *((name.lower().encode(), value.encode()) for name, value in error.headers.items()),
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
