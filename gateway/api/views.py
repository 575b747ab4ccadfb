"""The OpenAI-compatible endpoints: plain async views on the hot path (no DRF)."""

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from gateway.accounts.authentication import (
    AuthenticationFailed,
    ScopeDenied,
    authenticate_key,
    bearer_token,
)
from gateway.accounts.records import KeyRecord
from gateway.api import instruments
from gateway.api.admission import Caller, prepare_completion, rate_limit_headers
from gateway.api.completions import END_OF_STREAM, CompletionRun, upstream_api_error
from gateway.api.deployments import catalog, model_list
from gateway.api.errors import ApiError
from gateway.cache import exact, planner
from gateway.redis_clients import RedisUnavailable
from inference.client import UpstreamError


async def _authenticate(request: HttpRequest) -> KeyRecord:
    try:
        return await authenticate_key(
            bearer_token(request.headers.get("Authorization")), "inference"
        )
    except AuthenticationFailed as exc:
        raise ApiError(401, str(exc), "invalid_api_key") from None
    except ScopeDenied as exc:
        raise ApiError(403, str(exc), "insufficient_scope") from None
    except RedisUnavailable as exc:
        raise ApiError(503, f"{exc}; try again shortly.", "service_unavailable") from None


def _read_body(request: HttpRequest) -> bytes:
    declared = int(request.headers.get("Content-Length") or 0)
    if declared > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        raise ApiError(
            413,
            f"Request body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
            "request_too_large",
        )
    return request.body


def _cache_directives(request: HttpRequest) -> exact.CacheDirectives:
    try:
        return exact.CacheDirectives.from_request(request)
    except ValueError as exc:
        raise ApiError(400, str(exc), "invalid_request", "x-sluice-cache-ttl") from None


def _with_headers(
    response: HttpResponseBase, request_id: str, extra: dict[str, str], model: str = "-"
) -> HttpResponseBase:
    instruments.requests.labels(model, str(response.status_code)).inc()
    response["x-request-id"] = request_id
    for name, value in extra.items():
        response[name] = value
    return response


@csrf_exempt
@require_POST
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    request_id = f"chatcmpl-{uuid.uuid4().hex}"
    try:
        caller = Caller.from_key(await _authenticate(request))
        directives = _cache_directives(request)
        chat, deployment, reservation = await prepare_completion(caller, _read_body(request))
    except ApiError as error:
        return _with_headers(error.response(), request_id, {}, error.model)
    model = deployment.name
    cache = await planner.plan(directives, caller.team_id, deployment, chat)
    run = CompletionRun(request_id, chat, deployment, reservation, cache)
    headers = {
        **rate_limit_headers(reservation.state),
        **deployment.route_headers(),
        "x-sluice-cache": cache.result,
    }
    chunks = run.chunks()
    try:
        first = await run.first_chunk(chunks)
    except ApiError as error:
        await chunks.aclose()
        return _with_headers(error.response(), request_id, headers, model)
    except BaseException:  # cancelled (client gone) or a bug: still settle, then re-raise
        await asyncio.shield(run.settle())
        raise
    if run.coalesced:
        headers["x-sluice-coalesced"] = "true"
    if chat.stream:
        stream = StreamingHttpResponse(_sse(run, first, chunks), content_type="text/event-stream")
        stream["Cache-Control"] = "no-cache"
        return _with_headers(stream, request_id, headers, model)
    try:
        body = await _collect(run, first, chunks)
    except ApiError as error:
        return _with_headers(error.response(), request_id, headers, model)
    return _with_headers(JsonResponse(body), request_id, headers, model)


async def _sse(
    run: CompletionRun, first: dict[str, Any], chunks: AsyncGenerator[dict[str, Any], None]
) -> AsyncGenerator[bytes, None]:
    """Relay chunks; a client that leaves cancels this generator, which closes upstream."""
    try:
        chunk: dict[str, Any] | None = first
        while chunk is not None and chunk is not END_OF_STREAM:
            if not chunk.get("usage") or run.chat.include_usage:
                yield f"data: {json.dumps(_visible(chunk, run.chat.include_usage))}\n\n".encode()
            chunk = await anext(chunks, None)
        yield b"data: [DONE]\n\n"  # then settle, in finally
    except UpstreamError as exc:  # a mid-stream failure ends the stream with an error chunk
        yield upstream_api_error(exc).sse_chunk()
    finally:
        await chunks.aclose()


def _visible(chunk: dict[str, Any], include_usage: bool) -> dict[str, Any]:
    if include_usage or "usage" not in chunk:
        return chunk
    return {k: v for k, v in chunk.items() if k != "usage"}


async def _collect(
    run: CompletionRun, first: dict[str, Any], chunks: AsyncGenerator[dict[str, Any], None]
) -> dict[str, Any]:
    text, finish = [], None
    try:
        chunk: dict[str, Any] | None = first
        while chunk is not None and chunk is not END_OF_STREAM:
            for choice in chunk.get("choices", []):
                text.append((choice.get("delta") or {}).get("content") or "")
                finish = choice.get("finish_reason") or finish
            chunk = await anext(chunks, None)
    except UpstreamError as exc:
        raise upstream_api_error(exc) from exc
    finally:
        await chunks.aclose()
    prompt, completion = run.used_tokens()
    return {
        "id": run.request_id,
        "object": "chat.completion",
        "created": run.created,
        "model": run.deployment.name,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(text)},
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


@csrf_exempt
@require_POST
async def report_false_hit(request: HttpRequest) -> HttpResponse:
    """POST {"request_id": "chatcmpl-..."}: the cached reply to that request was wrong;
    remove it so the next identical request goes to the model."""
    try:
        caller_key = await _authenticate(request)
        body = json.loads(_read_body(request) or b"null")
        request_id = body.get("request_id") if isinstance(body, dict) else None
        if not (
            isinstance(request_id, str)
            and request_id.startswith("chatcmpl-")
            and len(request_id) <= 64
        ):
            raise ApiError(
                400, 'Send {"request_id": "chatcmpl-..."}.', "invalid_request", "request_id"
            )
        removed = await planner.report_false_hit(request_id, caller_key.team_id)
    except ApiError as error:
        return error.response()
    except (ValueError, UnicodeDecodeError):
        return ApiError(400, "The body is not valid JSON.", "invalid_request").response()
    except exact.CacheUnavailable:
        return ApiError(
            503, "The cache is unreachable; try again shortly.", "service_unavailable"
        ).response()
    if not removed:
        return ApiError(
            404, f"No cached reply of yours answered '{request_id}'.", "not_found", "request_id"
        ).response()
    instruments.cache_false_hits.inc()
    return JsonResponse({"request_id": request_id, "removed": True})


@require_GET
async def models(request: HttpRequest) -> HttpResponse:
    try:
        await _authenticate(request)
    except ApiError as error:
        return error.response()
    return JsonResponse({"object": "list", "data": model_list(await catalog.all())})
