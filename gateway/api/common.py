"""What every /v1/ adapter does around its pipeline: read the bearer key, and finish the
response (the request counter, x-request-id and the pipeline's headers)."""

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

from foundation import metrics
from foundation.json_bytes import json_bytes
from gateway.accounts.authentication import authenticate_key, bearer_token
from gateway.accounts.records import KeyRecord
from gateway.serving.admission import INFERENCE_SCOPE, ApiKeyCredential


def credential(request: HttpRequest) -> ApiKeyCredential:
    return ApiKeyCredential(bearer_token(request.headers.get("Authorization")))


class EventStream(StreamingHttpResponse):
    """Server-sent events from an async generator of ready-made byte strings. The API
    handler (gateway/api_handler.py) sends `events` to the socket as they come, skipping
    Django's per-part wrapping of streaming content (a generator and a copy per chunk);
    anywhere else it is an ordinary streaming response of the same bytes."""

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        super().__init__(events, content_type="text/event-stream")
        self.events = events
        self["Cache-Control"] = "no-cache"
        self["X-Accel-Buffering"] = "no"  # nginx relays each event at once, whatever its config


AFTER_SENT = "sluice_after_sent"


def awaiting_after_sent(
    response: HttpResponseBase, work: "asyncio.Future[None] | None"
) -> HttpResponseBase:
    """Work already running that the API handler awaits once the response is sent (a
    non-streamed reply's billing): the client is not kept waiting for it, and the
    connection's ASGI call lasts until it is done, so a draining server waits for it."""
    if work is not None:
        setattr(response, AFTER_SENT, work)
    return response


def json_response(body: Any, status: int = 200) -> HttpResponse:
    """A JSON answer encoded by orjson (JsonResponse's encoder is several times slower on
    a chat reply, and every non-streamed completion pays it)."""
    return HttpResponse(json_bytes(body), content_type="application/json", status=status)


def finish(
    response: HttpResponseBase, request_id: str, headers: dict[str, str], model: str = "-"
) -> HttpResponseBase:
    metrics.labelled(metrics.requests, model, str(response.status_code)).inc()
    response["x-request-id"] = request_id
    for name, value in headers.items():
        response[name] = value
    return response


async def authorized_key(request: HttpRequest) -> KeyRecord:
    """The bearer key of a request to the files and batches endpoints (inference scope)."""
    return await authenticate_key(
        bearer_token(request.headers.get("Authorization")), INFERENCE_SCOPE
    )
