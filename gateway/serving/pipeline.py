"""THE request pipeline: every chat completion, whatever its transport, takes these steps
(a text completion too: inference/text_completion.py).

    1 authenticate   the transport's credential -> Caller (re-checked for every request)
    2 admit          deployment (or model "auto" by tier), the team's prompt compression if
                     it opted in, the request fitted to the context window and cap (refused,
                     max_tokens clamped, or the oldest turns trimmed), then one atomic quota
                     reservation
    3 exact cache    team-scoped key over deployment revision and the whole request
    4 semantic cache embed, nearest neighbours in the context's vector set, verify
    5 coalesce       an identical request already generating is shared
    6 route          the deployment's policy picks a worker (filter, score, pick)
    7 generate       stream from the worker
    8 settle         reconcile the reservation to real usage, queue the usage event,
                     count and keep the reply in the caches; a semantic hit drawn for
                     an audit is asked again in the background (gateway/serving/audit.py)

Adapters (gateway/api/views.py for HTTP, gateway/chat/consumers.py for the WebSocket)
parse their transport, call `open_completion`, stream the result inside `async with`
(which settles), and turn domain exceptions into OpenAI errors with
gateway/serving/errors.py. Nothing here knows about HTTP or sockets.
"""

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from caching import cache_plan
from caching.exact import CacheDirectives
from gateway.accounts.authentication import check_model_allowed
from gateway.serving import settlement
from gateway.serving.admission import (
    Credential,
    check_content_accepted,
    choose_target,
    compress_prompt,
    count_prompt,
    fit_max_tokens,
    reserve,
)
from gateway.serving.completion import Completion
from gateway.serving.errors import rate_limit_headers
from inference.chat_request import ChatRequest

MODEL_ATTRIBUTE = "sluice_model"
RATE_LIMIT_ATTRIBUTE = "sluice_rate_limit"


@contextmanager
def naming_the_model(name: str) -> Iterator[None]:
    """Refusals after the deployment is known carry its name, for the adapters' metrics
    (never the raw model field: metric labels must not grow with client input)."""
    try:
        yield
    except Exception as exc:
        setattr(exc, MODEL_ATTRIBUTE, name)
        raise


def model_of(exc: BaseException) -> str:
    return str(getattr(exc, MODEL_ATTRIBUTE, "-"))


def rate_limit_headers_of(exc: BaseException) -> dict[str, str]:
    """x-ratelimit-* for a request refused after admission (none before it)."""
    state = getattr(exc, RATE_LIMIT_ATTRIBUTE, None)
    return rate_limit_headers(state) if state is not None else {}


def new_request_id(prefix: str = "chatcmpl") -> str:
    """chatcmpl-... for a chat completion, cmpl-... for a text completion, as OpenAI's."""
    return f"{prefix}-{uuid.uuid4().hex}"


async def open_completion(
    credential: Credential,
    read_request: Callable[[], ChatRequest],
    directives: CacheDirectives,
    request_id: str,
    on_hold: Callable[[str], None] | None = None,
) -> Completion:
    """Steps 1 to 7 up to the first chunk. The caller streams `completion.stream()` inside
    `async with completion:`, whose exit is step 8. Raises domain exceptions; a request
    that fails after admission is settled before the exception leaves. on_hold: told
    (with the deployment's name) if step 6 holds the request for a replica of a deployment
    scaled to zero, which can take minutes."""
    received_at = time.perf_counter()
    caller = await credential.authorize()  # 1 authenticate
    chat = read_request()  # the transport's request, validated (after auth, as OpenAI does)
    target = await choose_target(caller, chat)  # 2 admit: which deployment
    with naming_the_model(target.deployment.name):
        check_model_allowed(caller.allowed_models, target.deployment.name)  # 2 admit: key
        check_content_accepted(chat, target.deployment)  # 2 admit: what this model takes
        chat, target = await compress_prompt(caller, chat, target)  # 2: the team's opt-in
        prompt = await count_prompt(caller.team_id, chat, target.deployment)  # 2: in tokens
        chat, target, prompt = await fit_max_tokens(caller, chat, target, prompt)  # 2: window
        # 3, 4 begun: the caches' first lookups travel with the quota reservation.
        looking = await cache_plan.start_plan(directives, caller.team_id, target.deployment, chat)
        try:
            reservation = await reserve(caller, chat, target.deployment, prompt)  # 2: quotas
        except BaseException:
            looking.drop()
            raise
    completion = Completion(request_id, chat, target, reservation, received_at=received_at)
    settlement.admitted()  # settled exactly once from here on
    completion.on_hold = on_hold
    try:  # from here on, whatever happens (a client gone mid-embedding too) is settled
        completion.cache = await looking.result()  # 3 exact cache, 4 semantic cache
        await completion.start()  # 5 coalesce, 6 route, 7 generate: up to the first chunk
    except BaseException as exc:
        if isinstance(exc, Exception):
            completion.status = "failed"
            # Admitted, so the refusal still tells the client where its quota stands.
            setattr(exc, RATE_LIMIT_ATTRIBUTE, reservation.state)
        # 8 settle what little happened; held, so a shutdown that cancelled the request
        # (a whole reply cut at the drain's deadline) still waits for its bill.
        await asyncio.shield(settlement.in_background(completion.settle()))
        raise
    return completion
