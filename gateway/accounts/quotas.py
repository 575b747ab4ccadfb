"""Admission control: reserve a request against every quota at once, then settle it.

A request reserves prompt_tokens + max_tokens (and the matching cost) before any GPU work,
so concurrent requests can never jointly exceed a limit; after the response, reconcile()
gives back what was not used. Both steps are single Lua scripts (lua/), atomic across all
gateway processes. Redis errors fail closed: AdmissionUnavailable, never a hang.
"""

import calendar
import contextlib
import functools
import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from foundation import held_tasks
from foundation.lua import LuaScript
from foundation.redis_clients import REDIS_FAILURES, async_redis, async_redis_batch
from gateway.accounts.records import QuotaLimits

logger = logging.getLogger(__name__)
_LUA_DIR = Path(__file__).with_name("lua")
MONTH_COUNTER_TTL_S = 40 * 24 * 3600
_UNLIMITED = -1


class AdmissionUnavailable(Exception):
    """Quota state could not be reached; the request must be refused (503)."""


class MaxTokensOverCap(ValueError):
    def __init__(self, requested: int, cap: int) -> None:
        super().__init__(f"max_tokens={requested} exceeds this team's cap of {cap}.")
        self.requested = requested
        self.cap = cap


@dataclass(frozen=True)
class RateLimitState:
    """What x-ratelimit-* headers report; None where the team has no such limit."""

    limit_requests: int | None
    remaining_requests: int | None
    reset_requests_s: float
    limit_tokens: int | None
    remaining_tokens: int | None
    reset_tokens_s: float


class QuotaExceeded(Exception):
    def __init__(self, limit: str, retry_after_s: float | None, state: RateLimitState) -> None:
        when = (
            "never (the request alone exceeds it)"
            if retry_after_s is None
            else (f"in {retry_after_s:.1f} s")
        )
        super().__init__(f"Quota {limit} exceeded; the request could pass {when}.")
        self.limit = limit
        self.retry_after_s = retry_after_s
        self.state = state


@dataclass(frozen=True)
class AdmissionRequest:
    team_id: int
    key_id: str | None
    prompt_tokens: int
    max_tokens: int
    cost_micros: int = 0
    # A batch line (gateway/batches): counted in the team's month and budget like any
    # request, in minute windows of its own (batch throughput) that no RPM or TPM limits.
    batch_id: str = ""
    # Choices generated (OpenAI's n), each up to max_tokens from the one prompt: the prompt
    # is reserved once and max_tokens per choice, as the worker bills it (vLLM's usage
    # counts prompt_tokens once and sums completion_tokens over the choices). The team's
    # max_tokens_cap stays a limit per choice.
    choices: int = 1

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.max_tokens * self.choices


@dataclass(frozen=True)
class Reservation:
    team_id: int
    key_id: str | None
    tokens: int
    cost_micros: int
    bucket_second: int
    month: str
    state: RateLimitState
    # The limits it was admitted under; the dispatcher reads the team's queue weight and
    # concurrency cap from them, with no second lookup.
    limits: QuotaLimits = field(default_factory=QuotaLimits)
    batch_id: str = ""  # a batch line's: dispatched at batch priority, priced at its discount
    # Names the reservation's settled marker, so a reconcile that runs twice (retried after
    # a timeout, when Redis had run it anyway) gives the unused tokens back once.
    reservation_id: str = field(default_factory=lambda: secrets.token_hex(8))


_ADMIT = LuaScript(_LUA_DIR / "admit.lua")
_RECONCILE = LuaScript(_LUA_DIR / "reconcile.lua")


def team_counter_keys(team_id: int, month: str, batch: bool = False) -> dict[str, str]:
    """batch: the minute windows batch lines count in, apart from interactive requests'
    (the month and budget counters are the same)."""
    # One hash tag per team keeps every counter of a script in one Redis Cluster slot.
    base = f"sluice:quota:{{t{team_id}}}"
    window = f"{base}:batch" if batch else base
    return {
        "requests_per_minute": f"{window}:rpm",
        "tokens_per_minute": f"{window}:tpm",
        "tokens_per_month": f"{base}:tokens:{month}",
        "budget_per_month": f"{base}:cost:{month}",
    }


def key_counter_key(team_id: int, key_id: str | None) -> str:
    return f"sluice:quota:{{t{team_id}}}:key:{key_id or '-'}:rpm"


def month_of(epoch: float) -> tuple[str, int]:
    """The UTC calendar month as YYYY-MM, and the epoch second the next one starts."""
    return _month_of_second(int(epoch))


@lru_cache(maxsize=4)  # every admission asks, within the same few seconds
def _month_of_second(epoch: int) -> tuple[str, int]:
    moment = datetime.fromtimestamp(epoch, tz=UTC)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return f"{moment:%Y-%m}", calendar.timegm((year, month, 1, 0, 0, 0))


def _limit(value: int | None) -> int:
    return _UNLIMITED if value is None else value


def _state(limits: QuotaLimits, reply: list[Any]) -> RateLimitState:
    return RateLimitState(
        limit_requests=limits.requests_per_minute,
        remaining_requests=None if reply[0] < 0 else int(reply[0]),
        reset_requests_s=int(reply[2]) / 1000,
        limit_tokens=limits.tokens_per_minute,
        remaining_tokens=None if reply[1] < 0 else int(reply[1]),
        reset_tokens_s=int(reply[3]) / 1000,
    )


async def admit(
    limits: QuotaLimits, request: AdmissionRequest, key_rpm: int | None = None
) -> Reservation:
    if limits.max_tokens_cap is not None and request.max_tokens > limits.max_tokens_cap:
        raise MaxTokensOverCap(request.max_tokens, limits.max_tokens_cap)
    month, next_month = month_of(time.time())
    batch = bool(request.batch_id)
    counters = team_counter_keys(request.team_id, month, batch)
    keys = [*counters.values(), key_counter_key(request.team_id, request.key_id)]
    args: list[int | str] = [
        request.tokens,
        request.cost_micros,
        _UNLIMITED if batch else _limit(limits.requests_per_minute),
        _UNLIMITED if batch else _limit(limits.tokens_per_minute),
        _limit(limits.tokens_per_month),
        _limit(limits.budget_per_month_micros),
        _UNLIMITED if batch else _limit(key_rpm),
        MONTH_COUNTER_TTL_S,
        next_month,
    ]
    give_back = functools.partial(_give_back_if_admitted, request, limits, month)
    try:
        reply = await _ADMIT.run_batched(async_redis_batch(), keys, args, abandoned=give_back)
    except REDIS_FAILURES as exc:
        logger.error(
            "admission refused for team %s: Redis failed: %s: %s",
            request.team_id,
            type(exc).__name__,
            exc,
        )
        raise AdmissionUnavailable("Redis is unreachable; admission fails closed.") from exc
    if int(reply[0]) == 0:
        wait_ms = int(reply[2])
        raise QuotaExceeded(
            limit=str(reply[1]),
            retry_after_s=None if wait_ms < 0 else wait_ms / 1000,
            state=_state(limits, reply[3:]),
        )
    return _reservation(request, limits, month, reply)


def _reservation(
    request: AdmissionRequest, limits: QuotaLimits, month: str, reply: list[Any]
) -> Reservation:
    return Reservation(
        team_id=request.team_id,
        key_id=request.key_id,
        tokens=request.tokens,
        cost_micros=request.cost_micros,
        bucket_second=int(reply[1]),
        month=month,
        state=_state(limits, reply[2:]),
        limits=limits,
        batch_id=request.batch_id,
    )


def _give_back_if_admitted(
    request: AdmissionRequest, limits: QuotaLimits, month: str, reply: list[Any]
) -> None:
    """The caller left while its admission was on its way to Redis (the client hung up):
    nothing will settle what the script reserved, so its tokens and cost are given back
    now; the request itself still counts toward requests per minute."""
    if int(reply[0]) == 0:
        return  # refused: nothing was reserved
    held_tasks.hold(_settle_unused(_reservation(request, limits, month, reply)))


async def _settle_unused(reservation: Reservation) -> None:
    # A failure is logged by reconcile: the reservation stays charged, the safe side.
    with contextlib.suppress(AdmissionUnavailable):
        await reconcile(reservation, 0, 0)


def _reconcile_call(
    reservation: Reservation, used_tokens: int, used_cost_micros: int
) -> tuple[list[str], list[int | str]]:
    counters = team_counter_keys(reservation.team_id, reservation.month, bool(reservation.batch_id))
    keys = [
        counters["tokens_per_minute"],
        counters["tokens_per_month"],
        counters["budget_per_month"],
        settled_marker_key(reservation),
    ]
    args: list[int | str] = [
        reservation.bucket_second,
        used_tokens - reservation.tokens,
        used_cost_micros - reservation.cost_micros,
        SETTLED_MARKER_TTL_S,
    ]
    return keys, args


# Far longer than the life of one reconcile's retries: settlement retries at once, and a
# command that timed out on the client, queued behind a slow one, runs seconds later at most.
SETTLED_MARKER_TTL_S = 60


def settled_marker_key(reservation: Reservation) -> str:
    return f"sluice:quota:{{t{reservation.team_id}}}:settled:{reservation.reservation_id}"


def reconcile_command(
    reservation: Reservation, used_tokens: int, used_cost_micros: int
) -> tuple[Any, ...]:
    """reconcile() as one raw command, for the caller's pipeline or batch, so settling a
    request costs one round trip (by SHA: the script was loaded by admit(); a NOSCRIPT
    reply, after a Redis restart, is the caller's to retry with reconcile())."""
    keys, args = _reconcile_call(reservation, used_tokens, used_cost_micros)
    return ("EVALSHA", _RECONCILE.sha, len(keys), *keys, *args)


async def reconcile(reservation: Reservation, used_tokens: int, used_cost_micros: int) -> None:
    """Settle a reservation to real usage; an aborted stream passes what it produced."""
    keys, args = _reconcile_call(reservation, used_tokens, used_cost_micros)
    try:
        await _RECONCILE.run(async_redis(), keys, args)
    except REDIS_FAILURES as exc:
        # The reservation stays fully charged: over-counting is the safe side of a quota.
        logger.error(
            "reservation of team %s not settled: %s: %s",
            reservation.team_id,
            type(exc).__name__,
            exc,
        )
        raise AdmissionUnavailable("Redis is unreachable; reservation not settled.") from exc
