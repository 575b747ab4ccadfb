"""Steps 1 and 2 of the pipeline: who is asking (re-checked for every request, on every
transport), which deployment answers, and the quota reservation that admits it.

Everything here raises domain exceptions; gateway/serving/errors.py says what a client is
told.
"""

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import Protocol

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from foundation import metrics
from gateway.accounts.authentication import (
    AuthenticationFailed,
    authenticate_key,
    check_key_usable,
)
from gateway.accounts.models import Membership
from gateway.accounts.quotas import AdmissionRequest, QuotaExceeded, Reservation, admit
from gateway.accounts.records import KeyRecord, key_records, limits_for_team
from gateway.accounts.rejections import count_rejection
from gateway.accounts.web_sessions import session_is_current
from gateway.serving.compression import compress
from gateway.serving.context_trim import (
    TRIMMED_HEADER,
    KeptMessagesTooLong,
    Policy,
    team_policy,
    trim_to_fit,
)
from gateway.serving.errors import (
    ContextLengthExceeded,
    ModelNotFound,
    NotAuthenticated,
    NoUsableTier,
)
from inference.chat_options import VLLM_OPTIONS
from inference.chat_request import ChatRequest, InvalidRequest
from inference.deployments import DeploymentInfo, catalog, context_length
from inference.prompt_tokens import PromptCounter, prompt_counters
from inference.worker_prompt_counts import asks_workers, worker_prompt_counts
from scaling.routing.tiers import (
    AUTO_MODEL,
    BATCH_TIER,
    ROUTED_TIERS,
    TierRoute,
    choose_deployment,
    classify,
)

logger = logging.getLogger(__name__)
INFERENCE_SCOPE = "inference"
CLAMPED_HEADER = "x-sluice-max-tokens-clamped"
COMPRESSED_HEADER = "x-sluice-prompt-compressed"  # characters left out
COUNT_IN_THREAD_ABOVE = 2_000  # estimated prompt tokens


@dataclass(frozen=True)
class Caller:
    """Who is asking: a team, and the key if one was used (web users have none)."""

    team_id: int
    key_id: str | None = None
    key_rpm: int | None = None
    allowed_models: tuple[str, ...] = ()
    batch_id: str = ""  # a line of this batch: batch priority, batch prices, no minute limits

    @classmethod
    def from_key(cls, key: KeyRecord) -> "Caller":
        return cls(key.team_id, key.lookup_id, key.requests_per_minute, key.allowed_models)


class Credential(Protocol):
    """What a transport holds for its client; asked again before every request, so a revoked
    key or a user removed from their team stops at their next message."""

    async def authorize(self) -> Caller: ...


@dataclass(frozen=True)
class ApiKeyCredential:
    """A bearer API key (HTTP) or the key a socket sent in its auth message."""

    api_key: str

    async def authorize(self) -> Caller:
        # The key record comes from the process cache (<= 1 s old), then Redis, then the
        # database: a revocation reaches every process within about a second.
        return Caller.from_key(await authenticate_key(self.api_key, INFERENCE_SCOPE))


@dataclass(frozen=True)
class BatchKeyCredential:
    """The key that created a batch, for each of its lines: the key is re-checked (revoked,
    expired, scope, allowed models) before every line, as a socket's is before every
    message, without the plaintext, which the platform never keeps."""

    lookup_id: str
    team_id: int
    batch_id: str

    async def authorize(self) -> Caller:
        key = await key_records.get(self.lookup_id)
        if key is None or key.team_id != self.team_id:
            raise AuthenticationFailed("The API key that created this batch no longer exists.")
        check_key_usable(key, INFERENCE_SCOPE)
        return Caller(key.team_id, key.lookup_id, None, key.allowed_models, self.batch_id)


@dataclass(frozen=True)
class SessionUserCredential:
    """A logged-in web user, billed to their first team (admins' teams first).

    session_key: the login session the socket opened with. It is checked again for every
    message, as Django checks a page's: signed out, expired, or its password changed (the
    session's auth hash no longer matches), the socket is served no more, so a stolen
    cookie's socket ends when its owner signs out."""

    user_id: int
    session_key: str | None = None

    async def authorize(self) -> Caller:
        return Caller(team_id=await sync_to_async(_session_team_id)(self.user_id, self.session_key))


@dataclass(frozen=True)
class NoCredential:
    """A socket that has neither logged in nor sent a key."""

    async def authorize(self) -> Caller:
        raise NotAuthenticated("Log in, or send {type: auth, api_key} first.")


def _session_team_id(user_id: int, session_key: str | None) -> int:
    if session_key is not None and not session_is_current(user_id, session_key):
        raise NotAuthenticated(
            "Your session has ended (signed out, expired or the password changed); sign in again."
        )
    team_id = _first_active_team_id(user_id)
    if team_id is None:
        raise NotAuthenticated("Your account is not in a team; ask a team admin to add you.")
    return team_id


def _first_active_team_id(user_id: int) -> int | None:
    if not get_user_model().objects.filter(pk=user_id, is_active=True).exists():
        return None
    membership = Membership.objects.filter(user_id=user_id).order_by("role", "team__name").first()
    return None if membership is None else membership.team_id


@dataclass(frozen=True)
class Target:
    """The deployment that answers, and for model "auto", how it was chosen."""

    deployment: DeploymentInfo
    tier_route: TierRoute | None = None
    max_tokens_clamped_from: int | None = None  # the client's max_tokens, when lowered
    context_trimmed: int = 0  # messages left out to fit the context window
    prompt_compressed: int = 0  # characters the team's prompt compression left out

    def headers(self) -> dict[str, str]:
        """x-sluice-tier and x-sluice-routed-model for a request routed by model "auto";
        x-sluice-max-tokens-clamped (the client's max_tokens) for one clamped to fit;
        x-sluice-context-trimmed (messages left out) for one trimmed to fit."""
        headers = self.tier_route.headers() if self.tier_route is not None else {}
        if self.max_tokens_clamped_from is not None:
            headers[CLAMPED_HEADER] = str(self.max_tokens_clamped_from)
        if self.context_trimmed:
            headers[TRIMMED_HEADER] = str(self.context_trimmed)
        if self.prompt_compressed:
            headers[COMPRESSED_HEADER] = str(self.prompt_compressed)
        return headers


async def choose_target(caller: Caller, chat: ChatRequest) -> Target:
    """The named deployment; "auto" (unless a deployment has that name) picks one by tier."""
    deployment = await catalog.get(chat.model)
    target = Target(deployment) if deployment is not None else None
    if target is None and chat.model == AUTO_MODEL:
        target = await _route_auto(caller, chat)
    if target is None:
        raise ModelNotFound(chat.model)
    return target


async def _route_auto(caller: Caller, chat: ChatRequest) -> Target | None:
    """Model "auto": classify the request, then take a deployment of that tier the caller may
    use (docs/routing.md, "Tiered routing"). A key with allowed models reaches only those:
    "auto" is a chooser, not a permission. A batch line goes to a batch-tier deployment
    first (spot capacity, priced for batches), the first by name, and is classified only
    when there is none. None when no deployment of a tier "auto" may take exists."""
    chat_deployments = [d for d in (await catalog.all()).values() if d.is_chat]
    if caller.batch_id:
        batch_tier = sorted(
            (d for d in chat_deployments if d.tier == BATCH_TIER and _may_take(caller, chat, d)),
            key=lambda d: d.name,
        )
        if batch_tier:
            return Target(batch_tier[0])
    routed = [d for d in chat_deployments if d.tier in ROUTED_TIERS]
    if not routed:
        return None
    usable = [d for d in routed if not caller.allowed_models or d.name in caller.allowed_models]
    if chat.first_image_part() is not None and any(d.accepts_images for d in usable):
        usable = [d for d in usable if d.accepts_images]  # an image needs a model that sees
    decision = classify(chat.messages, chat.max_tokens, chat.options.get("response_format"))
    route = choose_deployment(decision, [(d.name, d.tier) for d in usable])
    if route is None:
        raise NoUsableTier(
            "This API key may not use any small or large deployment, which the model 'auto' "
            "routes to: list them in the key's allowed models."
        )
    return Target(next(d for d in usable if d.name == route.deployment), route)


def _may_take(caller: Caller, chat: ChatRequest, deployment: DeploymentInfo) -> bool:
    allowed = not caller.allowed_models or deployment.name in caller.allowed_models
    return allowed and (deployment.accepts_images or chat.first_image_part() is None)


def check_content_accepted(chat: ChatRequest, deployment: DeploymentInfo) -> None:
    """What only some deployments take (chat itself, vLLM's own sampling fields, image
    parts), refused before any quota is spent."""
    if not deployment.is_chat:
        raise InvalidRequest(
            f"The model '{deployment.name}' is an embedding model: call /v1/embeddings with "
            "it, or use a chat model here.",
            "model",
        )
    refused = sorted((chat.options.keys() & VLLM_OPTIONS) - deployment.extra_fields)
    if refused:
        allowed = ", ".join(sorted(deployment.extra_fields)) or "none"
        raise InvalidRequest(
            f"The model '{deployment.name}' does not take '{refused[0]}' (a vLLM sampling "
            f"field; its deployment allows: {allowed}). Leave it out, or use a model that "
            "takes it.",
            refused[0],
        )
    image = chat.first_image_part() if not deployment.accepts_images else None
    if image is not None:
        raise InvalidRequest(
            f"The model '{deployment.name}' takes text only; {image.removesuffix('.type')} is "
            "an image_url part. Send text, or use a model that accepts images.",
            image,
        )


@dataclass(frozen=True)
class PromptSize:
    tokens: int
    exact: bool  # the model's own count; else the upper-leaning estimate


async def count_prompt(team_id: int, chat: ChatRequest, deployment: DeploymentInfo) -> PromptSize:
    """The prompt in the deployment's own tokens: with its tokenizer where its folder is on
    this host (inference/prompt_tokens.py), else as one of its workers counts it (vLLM's
    /tokenize, remembered per team: inference/worker_prompt_counts.py), else the
    upper-leaning estimate. Counted once per request, for the context window and the
    reservation; sluice_prompt_counted says how (once per request: trim's candidates are
    not counted in it)."""
    counter = await prompt_counters.for_model(deployment.served_model_name)
    size, how = await _size(counter, team_id, deployment, chat)
    metrics.labelled(metrics.prompt_counted, deployment.name, how).inc()
    return size


async def _size(
    counter: PromptCounter, team_id: int, deployment: DeploymentInfo, chat: ChatRequest
) -> tuple[PromptSize, str]:
    """The prompt's size, and how it was counted (the metric's `how`)."""
    if counter.exact_for(chat):
        return PromptSize(await _count(counter, chat), True), "tokenizer"
    if asks_workers(deployment, chat):
        counted = await worker_prompt_counts.count(team_id, deployment, chat)
        if counted is not None:
            return PromptSize(counted[0], True), counted[1]
    return PromptSize(await _count(counter, chat), False), "estimated"


async def _count(counter: PromptCounter, chat: ChatRequest) -> int:
    if chat.estimated_prompt_tokens() > COUNT_IN_THREAD_ABOVE:
        # About 1 us a token: a long prompt is counted off the event loop (the tokenizer
        # releases the GIL), so other requests are not held up behind it.
        return await asyncio.to_thread(counter.count, chat)
    return counter.count(chat)


async def compress_prompt(
    caller: Caller, chat: ChatRequest, target: Target
) -> tuple[ChatRequest, Target]:
    """The team's prompt compression, when its policy asks for it (before the prompt is
    counted, so the reservation, the caches and the worker all see the compressed one)."""
    if not (await limits_for_team(caller.team_id)).compress_prompts:
        return chat, target
    done = compress(chat)
    if not done.chars_saved:
        return chat, target
    return done.chat, replace(target, prompt_compressed=done.chars_saved)


async def fit_max_tokens(
    caller: Caller, chat: ChatRequest, target: Target, size: PromptSize
) -> tuple[ChatRequest, Target, PromptSize]:
    """Make the request fit, before any quota is spent or any queue joined: the deployment's
    context window (the prompt plus max_tokens) and the team's max_tokens_cap. The policy
    is the request's own (chat.context_policy: x-sluice-context-policy, or the socket's
    field) or else the team's (docs/accounts.md, "Context windows and max_tokens").

    Under "refuse" (the default) a request over the window is refused here with
    context_length_exceeded; one over the cap goes on to admit(), which refuses it as
    before. Under "clamp" max_tokens is lowered to what fits both, and the target
    remembers the client's figure for the x-sluice-max-tokens-clamped header. Under "trim"
    the oldest turns are left out until the prompt plus max_tokens fits the window
    (gateway/serving/context_trim.py: the target counts them for x-sluice-context-trimmed,
    and the size returned is the trimmed prompt's, for the reservation); if the kept
    messages alone do not fit it is refused, and over the cap it refuses as "refuse" does:
    trim never lowers max_tokens. A prompt that alone fills the window (no room for one
    token) is refused under refuse and clamp. A max_tokens the client did not set (the
    default) is lowered to what fits under every policy, without a header. `size` is
    count_prompt()'s: exact for a model whose tokenizer is on this host, else an estimate
    that leans high (bytes / 3), so a clamp or a trim leaves some room unused rather than
    letting the worker refuse."""
    window = await context_length(target.deployment)
    limits = await limits_for_team(caller.team_id)
    policy = chat.context_policy or team_policy(limits)
    if policy == Policy.TRIM and window is not None and size.tokens + chat.max_tokens > window:
        try:
            chat, target, size = await _trimmed(caller, chat, target, window)
        except KeptMessagesTooLong:
            if not chat.max_tokens_defaulted:
                raise
            # The default gives way here too: trimmed as far as trim goes, for one token
            # at least, and the reply gets what fits (below).
            one_token = replace(chat, max_tokens=1)
            trimmed, target, size = await _trimmed(caller, one_token, target, window)
            chat = replace(trimmed, max_tokens=chat.max_tokens)
    prompt, name, estimated = size.tokens, target.deployment.name, not size.exact
    if window is not None and prompt >= window:
        raise ContextLengthExceeded(name, window, prompt, chat.max_tokens, estimated)
    fits = chat.max_tokens if window is None else min(chat.max_tokens, window - prompt)
    if limits.max_tokens_cap is not None:
        fits = min(fits, limits.max_tokens_cap)
    if fits >= chat.max_tokens:
        return chat, target, size
    if chat.max_tokens_defaulted:
        # The client set no length, which OpenAI reads as "what fits": the default gives
        # way to the window and the cap under every policy, with no header (the client
        # named no figure to be told about).
        return replace(chat, max_tokens=fits), target, size
    if policy != Policy.CLAMP:
        if window is not None and prompt + chat.max_tokens > window:
            raise ContextLengthExceeded(name, window, prompt, chat.max_tokens, estimated)
        return chat, target, size  # over the cap only: admit() refuses it (max_tokens_over_cap)
    clamped = replace(target, max_tokens_clamped_from=chat.max_tokens)
    return replace(chat, max_tokens=fits), clamped, size


async def _trimmed(
    caller: Caller, chat: ChatRequest, target: Target, window: int
) -> tuple[ChatRequest, Target, PromptSize]:
    """The chat with its oldest turns left out to fit the window, each candidate counted as
    count_prompt counts; KeptMessagesTooLong when the turns it must keep are too long
    already."""
    deployment = target.deployment
    counter = await prompt_counters.for_model(deployment.served_model_name)
    sizes: dict[int, PromptSize] = {}

    async def count(candidate: ChatRequest) -> int:
        size, _ = await _size(counter, caller.team_id, deployment, candidate)
        sizes[len(candidate.messages)] = size
        return size.tokens

    trim = await trim_to_fit(chat, window - chat.max_tokens, count)
    exact = sizes[len(trim.chat.messages)].exact
    if not trim.fits:
        raise KeptMessagesTooLong(deployment.name, window, trim.tokens, chat.max_tokens, not exact)
    logger.debug("%s: %d messages left out to fit %d tokens", deployment.name, trim.dropped, window)
    return trim.chat, replace(target, context_trimmed=trim.dropped), PromptSize(trim.tokens, exact)


async def reserve(
    caller: Caller, chat: ChatRequest, deployment: DeploymentInfo, size: PromptSize
) -> Reservation:
    """Reserve the request's RPM, tokens and money atomically (one Lua script): the prompt
    once and max_tokens for each of its n choices."""
    return await reserve_tokens(caller, deployment, size.tokens, chat.max_tokens, chat.n)


async def reserve_tokens(
    caller: Caller, deployment: DeploymentInfo, prompt: int, max_tokens: int, choices: int = 1
) -> Reservation:
    """reserve() for any endpoint: `prompt` input tokens plus `max_tokens` to generate (0
    for embeddings) for each of `choices`, and their cost at the deployment's prices."""
    batch = bool(caller.batch_id)
    request = AdmissionRequest(
        caller.team_id,
        caller.key_id,
        prompt,
        max_tokens,
        deployment.cost_micros(prompt, max_tokens * choices, batch),
        caller.batch_id,
        choices,
    )
    try:
        return await admit(await limits_for_team(caller.team_id), request, caller.key_rpm)
    except QuotaExceeded as exc:
        metrics.labelled(metrics.quota_rejections, exc.limit).inc()
        await count_rejection(caller.team_id, exc.limit)
        raise
