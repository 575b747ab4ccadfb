"""The OpenAI-compatible HTTP endpoints: a thin adapter around the serving pipeline.

Parse the transport (bearer key, cache headers, JSON body), call the pipeline, shape the
answer (JSON or server-sent events). Plain async views on the hot path (no DRF). Request
bodies over MAX_REQUEST_BODY_BYTES never get here (gateway/body_limit.py).
"""

import asyncio
import json
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from caching import responses
from caching.exact import CacheDirectives
from foundation import metrics
from foundation.json_bytes import json_bytes
from gateway.accounts.authentication import check_model_allowed
from gateway.api.common import (
    EventStream,
    LastEvent,
    awaiting_after_sent,
    credential,
    finish,
    json_response,
)
from gateway.api.held_stream import STREAM_MARK, Held, held_response_events, open_or_hold
from gateway.api.http_caching import MODEL_LIST_MAX_AGE_S, http_cacheable
from gateway.drain import StoppedForShutdown, drain
from gateway.drain_asgi import restarting
from gateway.serving.chat_body import collect_reply, collect_text_reply
from gateway.serving.completion import Chunk, Completion
from gateway.serving.context_trim import POLICY_HEADER, with_requested_policy
from gateway.serving.errors import DOMAIN_ERRORS, ApiError, ModelNotFound, api_error
from gateway.serving.pipeline import (
    model_of,
    new_request_id,
    open_completion,
    rate_limit_headers_of,
)
from inference.chat_request import ChatRequest, InvalidRequest, parse_chat_request
from inference.chat_tools import legacy_chunk
from inference.deployments import DeploymentInfo, catalog, known_context_length
from inference.reply import openai_logprobs
from inference.text_completion import echo_chunk, parse_text_completion, text_chunk
from scaling.routing.cold_start import cold_start
from scaling.routing.tiers import AUTO_MODEL, ROUTED_TIERS


@dataclass(frozen=True)
class ReplyShape:
    """How one endpoint shows a completion: its request parser, each stream chunk as the
    client sees it (None: not shown), what a stream starts with, the whole reply."""

    parse: Callable[[bytes], ChatRequest]
    chunk: Callable[[Completion, Chunk], Chunk | None]
    whole: Callable[[Completion], Coroutine[Any, Any, dict[str, Any]]]
    opening: Callable[[Completion], list[Chunk]] = lambda run: []
    id_prefix: str = "chatcmpl"


def _chat_chunk(run: Completion, chunk: Chunk) -> Chunk | None:
    # A usage chunk the client did not ask for is not shown; usage riding on a chunk that
    # also carries a choice (as some OpenAI-compatible servers send the last one) is
    # stripped by _visible, the choice and its finish_reason kept.
    if chunk.get("usage") and not run.chat.include_usage and not chunk.get("choices"):
        return None
    visible = openai_logprobs(_visible(chunk, run.chat.include_usage))
    return legacy_chunk(visible) if run.chat.legacy_functions else visible


def _echo(run: Completion) -> list[Chunk]:
    if not run.chat.echo:
        return []
    return [echo_chunk(run.chat, run.request_id, run.created, run.deployment.name)]


CHAT = ReplyShape(parse_chat_request, _chat_chunk, collect_reply)
TEXT = ReplyShape(
    parse_text_completion,
    lambda run, chunk: text_chunk(chunk, run.chat.include_usage),
    collect_text_reply,
    opening=_echo,
    id_prefix="cmpl",
)


@csrf_exempt
@require_POST
async def chat_completions(request: HttpRequest) -> HttpResponseBase:
    return await _complete(request, CHAT)


@csrf_exempt
@require_POST
async def completions(request: HttpRequest) -> HttpResponseBase:
    """POST /v1/completions: text completions, through the same pipeline as chat."""
    return await _complete(request, TEXT)


async def _complete(request: HttpRequest, shape: ReplyShape) -> HttpResponseBase:
    request_id = new_request_id(shape.id_prefix)
    try:
        caller_key = credential(request)
        directives = CacheDirectives.from_headers(request.headers)
        policy = request.headers.get(POLICY_HEADER)  # the request's own context policy

        def read() -> ChatRequest:  # validated after authentication, the header with it
            return with_requested_policy(shape.parse(request.body), policy, POLICY_HEADER)

        if STREAM_MARK in request.body and await cold_start.any_deployment():
            # it may stream, and be held for a replica: the hold keeps it alive
            opened = await drain.unless_stopped(
                open_or_hold(caller_key, read, directives, request_id)
            )
        else:
            # Up to the first chunk, which for a reply asked whole is all of it.
            opening = open_completion(caller_key, read, directives, request_id)
            opened = await drain.unless_stopped(opening)
    except DOMAIN_ERRORS as exc:
        error = api_error(exc)
        return finish(error.response(), request_id, rate_limit_headers_of(exc), model_of(exc))
    except StoppedForShutdown:  # answered, not cut with no answer at the drain's deadline
        return finish(restarting().response(), request_id, {})
    if isinstance(opened, Held):
        events = held_response_events(opened, lambda run: _sse(run, shape))
        return finish(EventStream(events), request_id, {}, opened.deployment)
    run = opened
    model = run.deployment.name
    if run.chat.stream:
        return finish(EventStream(_sse(run, shape)), request_id, run.response_headers(), model)
    failure: ApiError | None = None
    run.settle_after_reply = True  # billing and the caches' replies are awaited after it
    try:
        async with run:
            try:
                # A reply asked whole is in hand already (its first chunk): not stopped.
                assembling = shape.whole(run)
                body = await (
                    assembling if run.asks_whole_reply else drain.unless_stopped(assembling)
                )
            except DOMAIN_ERRORS as exc:
                failure = api_error(exc)
            except StoppedForShutdown:
                failure = restarting()
    except BaseException:
        if run.after_reply is not None:  # no reply will carry it to the handler: settle here
            run.after_reply.reply_sent()
            await asyncio.shield(run.after_reply.task)
        raise
    reply = json_response(body) if failure is None else failure.response()
    finished = finish(reply, request_id, run.response_headers(), model)
    return awaiting_after_sent(finished, run.after_reply)


async def _sse(run: Completion, shape: ReplyShape) -> AsyncGenerator[bytes, None]:
    """Relay chunks; a client that leaves cancels this generator, which stops the worker.
    A stream still running shortly before a draining process's deadline (gateway/drain.py)
    ends with a service_unavailable error chunk, billed for what was made, instead of being
    cut by the server's shutdown."""
    async with run:  # its exit settles: after the last event has ended the response
        try:
            for opening in shape.opening(run):
                yield b"data: " + json_bytes(opening) + b"\n\n"
            async for chunk in run.stream():
                if drain.stopping_streams:
                    yield LastEvent(restarting().sse_chunk())
                    return
                visible = shape.chunk(run, chunk)
                if visible is not None:
                    yield b"data: " + json_bytes(visible) + b"\n\n"
            yield LastEvent(b"data: [DONE]\n\n")
        except DOMAIN_ERRORS as exc:  # a mid-stream failure ends the stream with an error chunk
            yield LastEvent(api_error(exc).sse_chunk())


def _visible(chunk: dict[str, Any], include_usage: bool) -> dict[str, Any]:
    if include_usage or "usage" not in chunk:
        return chunk
    return {k: v for k, v in chunk.items() if k != "usage"}


@csrf_exempt
@require_POST
async def report_false_hit(request: HttpRequest) -> HttpResponse:
    """POST {"request_id": "chatcmpl-..."} (or a text completion's "cmpl-..."): the cached
    reply to that request was wrong; remove it so the next identical request goes to the
    model."""
    try:
        caller = await credential(request).authorize()
        request_id = _false_hit_request_id(request.body)
        removed = await responses.report_false_hit(request_id, caller.team_id)
    except DOMAIN_ERRORS as exc:
        return api_error(exc).response()
    if not removed:
        message = f"No cached reply of yours answered '{request_id}'."
        return ApiError(404, message, "not_found", "request_id").response()
    metrics.cache_false_hits.inc()
    return JsonResponse({"request_id": request_id, "removed": True})


def _false_hit_request_id(raw: bytes) -> str:
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: deep nesting
        raise InvalidRequest("The body is not valid JSON.") from None
    request_id = body.get("request_id") if isinstance(body, dict) else None
    if not (
        isinstance(request_id, str)
        and request_id.startswith(("chatcmpl-", "cmpl-"))
        and len(request_id) <= 64
        and request_id.isascii()  # it becomes a Redis key: a lone surrogate cannot be encoded
    ):
        raise InvalidRequest('Send {"request_id": "chatcmpl-..."}.', "request_id")
    return request_id


@require_GET
@http_cacheable(MODEL_LIST_MAX_AGE_S)
async def models(request: HttpRequest) -> HttpResponse:
    """GET /v1/models: what this key may use (all of them for a key without allowed models)."""
    try:
        caller = await credential(request).authorize()
    except DOMAIN_ERRORS as exc:
        return api_error(exc).response()
    usable = model_list(await catalog.all(), caller.allowed_models)
    return JsonResponse({"object": "list", "data": usable})


@require_GET
@http_cacheable(MODEL_LIST_MAX_AGE_S)
async def model(request: HttpRequest, model_id: str) -> HttpResponse:
    """GET /v1/models/{id}: the entry /v1/models lists under that id; 403 model_not_allowed
    for a model the key may not use (as a chat completion with it), 404 model_not_found for
    an unknown one."""
    try:
        caller = await credential(request).authorize()
        deployments = await catalog.all()
        found = [m for m in model_list(deployments, caller.allowed_models) if m["id"] == model_id]
        if not found:
            if any(m["id"] == model_id for m in model_list(deployments)):
                check_model_allowed(caller.allowed_models, model_id)
            raise ModelNotFound(model_id)
    except DOMAIN_ERRORS as exc:
        return api_error(exc).response()
    return JsonResponse(found[0])


def model_list(
    deployments: dict[str, DeploymentInfo], allowed_models: tuple[str, ...] = ()
) -> list[dict[str, object]]:
    """/v1/models: every deployment the key may use (an empty allowed list allows all), and
    "auto" while a small or large chat deployment among them exists to route it to (a
    deployment actually named "auto" is listed once, as itself)."""
    usable = [d for d in deployments.values() if not allowed_models or d.name in allowed_models]
    # context_length (not in OpenAI's list; other gateways add it): the deployment's window,
    # its override or what its workers report; null while unknown.
    data: list[dict[str, object]] = [
        {
            "id": d.name,
            "object": "model",
            "created": d.created,
            "owned_by": "sluice",
            "context_length": known_context_length(d),
        }
        for d in usable
    ]
    routed = [d.created for d in usable if d.tier in ROUTED_TIERS and d.is_chat]
    if routed and AUTO_MODEL not in deployments:
        data.append(
            {"id": AUTO_MODEL, "object": "model", "created": min(routed), "owned_by": "sluice"}
        )
    return data
