"""One table from domain exceptions to OpenAI errors, for every transport.

Domain code raises what went wrong (a revoked key, an exhausted quota, no worker); only
this module knows what a client is told. The HTTP view sends `ApiError.response()`, the
WebSocket consumer sends `ApiError.body()` in an error event, a stream that fails midway
sends `ApiError.sse_chunk()`; the status and code are the same on each.
"""

import json
import logging
import math
import re
from collections.abc import Callable

from django.http import JsonResponse
from redis.exceptions import RedisError

from caching.exact import CacheUnavailable
from foundation.redis_clients import RedisUnavailable
from gateway.accounts.authentication import AuthenticationFailed, ModelNotAllowed, ScopeDenied
from gateway.accounts.quotas import (
    AdmissionUnavailable,
    MaxTokensOverCap,
    QuotaExceeded,
    RateLimitState,
)
from inference.chat_request import InvalidRequest
from inference.client import UpstreamError
from scaling.routing.dispatcher import NoHealthyWorker, NoReplicaInTime, QueueTimeout

logger = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "api_error",
    503: "api_error",
}


class ApiError(Exception):
    """An error in OpenAI's shape, so the official clients raise the right exception types."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, dict[str, str | None]]:
        error = {
            "message": self.message,
            "type": _TYPES.get(self.status, "api_error"),
            "param": self.param,
            "code": self.code,
        }
        return {"error": error}

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body(), status=self.status)
        for name, value in self.headers.items():
            response[name] = value
        return response

    def sse_chunk(self) -> bytes:
        return f"data: {json.dumps(self.body())}\n\n".encode()


class NotAuthenticated(Exception):
    """A socket sent a chat before logging in or sending a key."""


class ModelNotFound(Exception):
    def __init__(self, model: str) -> None:
        super().__init__(f"The model '{model}' does not exist.")


class NoUsableTier(Exception):
    """Model "auto", but the key may use no small or large deployment."""


class ContextLengthExceeded(Exception):
    """The prompt plus max_tokens does not fit the model's context window."""

    def __init__(
        self, model: str, window: int, prompt: int, max_tokens: int, estimated: bool = True
    ) -> None:
        how = ", estimated" if estimated else ""
        super().__init__(
            f"The model '{model}' has a context length of {window} tokens. However, you "
            f"requested {prompt + max_tokens} tokens ({prompt} in the messages{how}, "
            f"{max_tokens} in the completion). Please reduce the length of the messages or "
            "max_tokens."
        )
        self.window = window
        self.prompt = prompt
        self.max_tokens = max_tokens


class Busy(Exception):
    """A socket asked for a second reply while one is streaming."""


def rate_limit_headers(state: RateLimitState) -> dict[str, str]:
    """OpenAI's x-ratelimit-* trio per kind. A kind the team has no limit of (a policy set
    unlimited on purpose; the platform default always has both) sends none of its three:
    a made-up figure would have clients throttle themselves for nothing."""
    headers = {}
    for kind, limit, remaining, reset in (
        ("requests", state.limit_requests, state.remaining_requests, state.reset_requests_s),
        ("tokens", state.limit_tokens, state.remaining_tokens, state.reset_tokens_s),
    ):
        if limit is None:
            continue
        headers[f"x-ratelimit-limit-{kind}"] = str(limit)
        headers[f"x-ratelimit-remaining-{kind}"] = str(limit if remaining is None else remaining)
        headers[f"x-ratelimit-reset-{kind}"] = _duration(reset)
    return headers


def _duration(seconds: float) -> str:
    """A reset time as OpenAI writes it (Go's duration format): 20ms, 1.5s, 1m0s, 1h0m0s."""
    ms = max(0, round(seconds * 1000))
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    minutes, ms = divmod(ms, 60_000)
    hours, minutes = divmod(minutes, 60)
    text = f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    return f"{hours}h{text}" if hours else text


def _quota_exceeded(exc: QuotaExceeded) -> ApiError:
    headers = rate_limit_headers(exc.state)
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
    return ApiError(429, str(exc), exc.limit, headers=headers)


# The one worker refusal whose cause a client can act on, read from vLLM's message.
_CONTEXT_LENGTH = re.compile(r"maximum context length is (\d+)")


def _upstream(exc: UpstreamError) -> ApiError:
    """What the client hears about a worker failure: never the worker's own words (they
    can carry its address, model paths or internals; they are logged), only what the
    client can act on."""
    logger.warning("upstream failure at %s: %s", exc.worker_url, exc)
    if exc.platform_refused:
        if exc.status != 429:
            logger.error(
                "worker %s refused the platform's credentials (HTTP %s): check its "
                "deployment's api_key_env",
                exc.worker_url,
                exc.status,
            )
        return ApiError(502, "The model worker refused the gateway; try again.", "upstream_error")
    if exc.client_error:
        context = _CONTEXT_LENGTH.search(str(exc))
        if context is not None:
            message = (
                f"The prompt plus max_tokens is longer than the model's context of "
                f"{context.group(1)} tokens: shorten the messages or lower max_tokens."
            )
            return ApiError(400, message, "context_length_exceeded")
        message = (
            f"The model refused the request (HTTP {exc.status}): check its parameters "
            "against what this model accepts."
        )
        return ApiError(400, message, "invalid_request")
    return ApiError(502, "The model worker failed; try again.", "upstream_error")


def _unavailable(exc: BaseException) -> ApiError:
    return ApiError(503, f"{str(exc).rstrip('.')}; try again shortly.", "service_unavailable")


def _no_worker(exc: BaseException) -> ApiError:
    return ApiError(503, f"No healthy worker: {exc}. Try again shortly.", "no_healthy_worker")


def _queue_timeout(exc: BaseException) -> ApiError:
    message = f"All workers are busy: {exc}. Retry shortly."
    return ApiError(503, message, "queue_timeout", headers={"Retry-After": "1"})


def _no_replica_in_time(exc: BaseException) -> ApiError:
    message = f"The model is starting: {exc}. Retry in a few seconds."
    return ApiError(503, message, "no_replica_ready", headers={"Retry-After": "5"})


def _invalid(exc: BaseException) -> ApiError:
    assert isinstance(exc, InvalidRequest)
    return ApiError(400, str(exc), "invalid_request", exc.param)


# Most specific first: the first matching row wins (ModelNotAllowed is a ScopeDenied).
TABLE: list[tuple[type[BaseException], Callable[[BaseException], ApiError]]] = [
    (InvalidRequest, _invalid),
    (MaxTokensOverCap, lambda e: ApiError(400, str(e), "max_tokens_over_cap", "max_tokens")),
    (
        ContextLengthExceeded,
        lambda e: ApiError(400, str(e), "context_length_exceeded", "messages"),
    ),
    (NotAuthenticated, lambda e: ApiError(401, str(e), "unauthenticated")),
    (AuthenticationFailed, lambda e: ApiError(401, str(e), "invalid_api_key")),
    (ModelNotAllowed, lambda e: ApiError(403, str(e), "model_not_allowed", "model")),
    (NoUsableTier, lambda e: ApiError(403, str(e), "model_not_allowed", "model")),
    (ScopeDenied, lambda e: ApiError(403, str(e), "insufficient_scope")),
    (ModelNotFound, lambda e: ApiError(404, str(e), "model_not_found", "model")),
    (Busy, lambda e: ApiError(409, str(e), "busy")),
    (QuotaExceeded, lambda e: _quota_exceeded(e)),  # type: ignore[arg-type]
    (UpstreamError, lambda e: _upstream(e)),  # type: ignore[arg-type]
    (NoHealthyWorker, _no_worker),
    (NoReplicaInTime, _no_replica_in_time),
    (QueueTimeout, _queue_timeout),
    (AdmissionUnavailable, _unavailable),
    (RedisUnavailable, _unavailable),
    (CacheUnavailable, lambda e: _unavailable(Exception("The cache is unreachable"))),
    (RedisError, lambda e: _unavailable(Exception("Redis is unreachable"))),
]
DOMAIN_ERRORS = tuple(kind for kind, _ in TABLE)


def api_error(exc: BaseException) -> ApiError:
    """The OpenAI error for a domain exception (an ApiError passes through)."""
    if isinstance(exc, ApiError):
        return exc
    for kind, to_error in TABLE:
        if isinstance(exc, kind):
            return to_error(exc)
    raise TypeError(f"no API error for {type(exc).__name__}") from exc
