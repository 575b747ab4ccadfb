"""From a validated caller and a request body to an admitted completion, for every entry
point (the HTTP API and the WebSocket chat): model lookup, allowed models, reservation."""

import math
from dataclasses import dataclass, replace

from gateway.accounts.authentication import ScopeDenied, check_model_allowed
from gateway.accounts.quotas import (
    AdmissionRequest,
    AdmissionUnavailable,
    MaxTokensOverCap,
    QuotaExceeded,
    RateLimitState,
    Reservation,
    admit,
)
from gateway.accounts.records import KeyRecord, limits_for_team
from gateway.accounts.rejections import count_rejection
from gateway.api import instruments
from gateway.api.chat_request import ChatRequest, parse_chat_request
from gateway.api.deployments import DeploymentInfo, catalog
from gateway.api.errors import ApiError
from gateway.redis_clients import RedisUnavailable
from scaling.tiers import AUTO_MODEL, ROUTED_TIERS, choose_deployment, classify


@dataclass(frozen=True)
class Caller:
    """Who is asking: a team, and the key if one was used (web users have none)."""

    team_id: int
    key_id: str | None = None
    key_rpm: int | None = None
    allowed_models: tuple[str, ...] = ()

    @classmethod
    def from_key(cls, key: KeyRecord) -> "Caller":
        return cls(key.team_id, key.lookup_id, key.requests_per_minute, key.allowed_models)


def rate_limit_headers(state: RateLimitState) -> dict[str, str]:
    headers = {}
    for kind, limit, remaining, reset in (
        ("requests", state.limit_requests, state.remaining_requests, state.reset_requests_s),
        ("tokens", state.limit_tokens, state.remaining_tokens, state.reset_tokens_s),
    ):
        if limit is not None:
            headers[f"x-ratelimit-limit-{kind}"] = str(limit)
            headers[f"x-ratelimit-remaining-{kind}"] = str(remaining)
            headers[f"x-ratelimit-reset-{kind}"] = f"{reset:.3f}s"
    return headers


async def _reserve(caller: Caller, chat: ChatRequest, deployment: DeploymentInfo) -> Reservation:
    prompt = chat.estimated_prompt_tokens()
    request = AdmissionRequest(
        caller.team_id,
        caller.key_id,
        prompt,
        chat.max_tokens,
        deployment.cost_micros(prompt, chat.max_tokens),
    )
    try:
        return await admit(await limits_for_team(caller.team_id), request, caller.key_rpm)
    except MaxTokensOverCap as exc:
        raise ApiError(400, str(exc), "max_tokens_over_cap", "max_tokens") from None
    except QuotaExceeded as exc:
        instruments.quota_rejections.labels(exc.limit).inc()
        await count_rejection(caller.team_id, exc.limit)
        headers = rate_limit_headers(exc.state)
        if exc.retry_after_s is not None:
            headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
        raise ApiError(429, str(exc), exc.limit, headers=headers) from None
    except (AdmissionUnavailable, RedisUnavailable) as exc:
        raise ApiError(503, f"{exc} Try again shortly.", "service_unavailable") from None


async def _route_auto(caller: Caller, chat: ChatRequest) -> DeploymentInfo | None:
    """Model "auto": classify the request, then take a deployment of that tier the caller may
    use (docs/routing.md, "Tiered routing"). A key with allowed models reaches only those: "auto"
    is a chooser, not a permission. None when no small or large deployment exists."""
    routed = [d for d in (await catalog.all()).values() if d.tier in ROUTED_TIERS]
    if not routed:
        return None
    usable = [d for d in routed if not caller.allowed_models or d.name in caller.allowed_models]
    decision = classify(chat.messages, chat.max_tokens, chat.options.get("response_format"))
    route = choose_deployment(decision, [(d.name, d.tier) for d in usable])
    if route is None:
        raise ApiError(
            403,
            "This API key may not use any small or large deployment, which the "
            "model 'auto' routes to: list them in the key's allowed models.",
            "model_not_allowed",
            "model",
        )
    deployment = next(d for d in usable if d.name == route.deployment)
    return replace(deployment, route=route)


async def _deployment_for(caller: Caller, chat: ChatRequest) -> DeploymentInfo:
    """The named deployment; "auto" (unless a deployment has that name) picks one by tier."""
    deployment = await catalog.get(chat.model)
    if deployment is None and chat.model == AUTO_MODEL:
        deployment = await _route_auto(caller, chat)
    if deployment is None:
        raise ApiError(404, f"The model '{chat.model}' does not exist.", "model_not_found", "model")
    return deployment


async def prepare_completion(
    caller: Caller, raw_body: bytes
) -> tuple[ChatRequest, DeploymentInfo, Reservation]:
    chat = parse_chat_request(raw_body)
    deployment = await _deployment_for(caller, chat)
    try:
        check_model_allowed(caller.allowed_models, deployment.name)
        return chat, deployment, await _reserve(caller, chat, deployment)
    except ScopeDenied as exc:
        error = ApiError(403, str(exc), "model_not_allowed", "model")
        error.model = deployment.name
        raise error from None
    except ApiError as error:
        error.model = deployment.name
        raise
