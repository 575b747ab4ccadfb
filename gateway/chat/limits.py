"""The chat socket's abuse limits (docs/websocket.md, "Limits").

- Messages per socket (`WS_MESSAGES_PER_MINUTE`), counted in this process: a socket lives
  in one process, and the count keeps working when Redis does not.
- Messages per client address (`WS_ADDRESS_MESSAGES_PER_MINUTE`), counted in Redis across
  every socket and gateway process, so opening more sockets buys nothing.
- Failed key authentications per client address (`WS_AUTH_FAILURES_PER_ADDRESS` in
  `WS_AUTH_FAILURE_WINDOW_S`), in Redis: a new socket does not reset the guessing. Past the
  limit the address may not authenticate at all (not even with a good key, which would
  tell a guesser they had found one) until the window ends.

Every frame counts, whatever its type: refusing before parsing keeps a flood cheap. When
Redis cannot be reached the per-address limits fail closed: messages and authentications
are refused with 503 instead of going uncounted.
"""

import logging
import math
from typing import Any

from django.conf import settings

from foundation.rate_window import LocalWindow, RedisWindow, WindowCount
from foundation.redis_clients import RedisUnavailable, async_redis
from gateway.client_address import scope_client_address
from gateway.serving.errors import ApiError

logger = logging.getLogger(__name__)

MESSAGE_WINDOW_S = 60.0


def _address_messages() -> RedisWindow:
    return RedisWindow("ws:messages", settings.WS_ADDRESS_MESSAGES_PER_MINUTE, MESSAGE_WINDOW_S)


def _address_auth_failures() -> RedisWindow:
    return RedisWindow(
        "ws:auth-failures",
        settings.WS_AUTH_FAILURES_PER_ADDRESS,
        settings.WS_AUTH_FAILURE_WINDOW_S,
    )


def _seconds(count: WindowCount) -> int:
    return max(1, math.ceil(count.reset_in_s))


def _too_many_messages(count: WindowCount, where: str) -> ApiError:
    wait = _seconds(count)
    message = (
        f"Too many messages: at most {count.limit} a minute {where}. Retry in {wait} s; "
        "a socket that keeps sending is closed."
    )
    return ApiError(429, message, "rate_limited", headers={"Retry-After": str(wait)})


def _address_locked(count: WindowCount) -> ApiError:
    wait = _seconds(count)
    message = (
        f"Too many failed authentications from your address ({count.limit}); try again in {wait} s."
    )
    return ApiError(
        429, message, "too_many_failed_authentications", headers={"Retry-After": str(wait)}
    )


def _unavailable(what: str) -> ApiError:
    message = f"{what} cannot be checked (Redis is unreachable); try again shortly."
    return ApiError(503, message, "service_unavailable")


class SocketLimits:
    """One socket's counts, and the client address it shares counts with in Redis."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.address = scope_client_address(scope)
        self.messages = LocalWindow(settings.WS_MESSAGES_PER_MINUTE, MESSAGE_WINDOW_S)
        self.refusals_in_a_row = 0

    @property
    def should_close(self) -> bool:
        """The client went on sending through refusals: sustained abuse, not a burst."""
        return self.refusals_in_a_row >= settings.WS_REFUSALS_BEFORE_CLOSE

    async def admit_message(self) -> ApiError | None:
        """None if this frame may be handled; else the error to answer it with."""
        own = self.messages.admit()
        if own.over:
            self.refusals_in_a_row += 1
            return _too_many_messages(own, "on one socket")
        try:
            shared = await _address_messages().hit(async_redis(), self.address)
        except RedisUnavailable:
            logger.warning("socket message limit unreadable: Redis is down")
            return _unavailable("The message rate limit")
        if shared.over:
            self.refusals_in_a_row += 1
            return _too_many_messages(shared, "from one address")
        self.refusals_in_a_row = 0
        return None

    async def auth_lockout(self) -> ApiError | None:
        """None if this address may try a key; else why not (429 locked, 503 unknown)."""
        try:
            failures = await _address_auth_failures().peek(async_redis(), self.address)
        except RedisUnavailable:
            logger.warning("failed-authentication count unreadable: Redis is down")
            return _unavailable("The failed-authentication limit")
        return _address_locked(failures) if failures.full else None

    async def count_failed_auth(self) -> ApiError | None:
        """Count a refused key against the address; the error if that locks it out."""
        try:
            failures = await _address_auth_failures().hit(async_redis(), self.address)
        except RedisUnavailable:
            # Uncounted, but not unlimited: the socket's own limit still closes it, and a
            # new socket's next try is refused by auth_lockout while Redis is down.
            logger.warning("failed authentication not counted: Redis is down")
            return None
        return _address_locked(failures) if failures.full else None
