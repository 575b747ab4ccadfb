"""What every /v1/ adapter does around its pipeline: read the bearer key, and finish the
response (the request counter, x-request-id and the pipeline's headers)."""

from collections.abc import AsyncGenerator, MutableMapping
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

from foundation import metrics
from foundation.json_bytes import json_bytes
from foundation.redis_clients import REDIS_FAILURES
from gateway.accounts.authentication import authenticate_key, bearer_token
from gateway.accounts.records import KeyRecord
from gateway.serving.admission import INFERENCE_SCOPE, ApiKeyCredential
from gateway.serving.errors import DOMAIN_ERRORS
from gateway.serving.settlement import AfterReply


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


class LastEvent(bytes):
    """A stream's final event: the API handler ends the response with it, then closes the
    generator, so what the generator does on closing (the request's settlement: a Redis
    round trip or two) runs after the client has its whole stream, not before."""


AFTER_SENT = "sluice_after_sent"


def awaiting_after_sent(response: HttpResponseBase, work: AfterReply | None) -> HttpResponseBase:
    """Work that the API handler releases and awaits once the response is sent (a
    non-streamed reply's settlement): the client is not kept waiting for it, and the
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


# A key that cannot be checked now (Redis or the database away) is not one: the view
# answers the request, with a body no larger than any other request's.
_NOT_A_KEY: tuple[type[BaseException], ...] = (*DOMAIN_ERRORS, *REDIS_FAILURES, DatabaseError)


async def holds_an_inference_key(scope: MutableMapping[str, Any]) -> bool:
    """Whether an ASGI request's bearer key is one the files endpoints accept (the body
    limit lets only such a request send an upload's size)."""
    headers = dict(scope.get("headers") or [])
    try:
        header = headers.get(b"authorization", b"").decode("latin-1")
        await authenticate_key(bearer_token(header), INFERENCE_SCOPE)
    except _NOT_A_KEY:
        return False  # the view answers it, with a body no larger than any request's
    return True


async def authorized_key(request: HttpRequest) -> KeyRecord:
    """The bearer key of a request to the files and batches endpoints (inference scope)."""
    return await authenticate_key(
        bearer_token(request.headers.get("Authorization")), INFERENCE_SCOPE
    )
