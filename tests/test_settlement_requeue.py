"""A usage event Redis refused at settle time (a restart under way) is queued again in the
background once Redis is back, not lost."""

import asyncio
import json
import time

import pytest

from foundation.redis_clients import reset_clients, sync_redis
from gateway.accounts.quotas import RateLimitState, Reservation
from gateway.serving import settlement
from gateway.usage.ledger import STREAM, UsageEvent

pytestmark = pytest.mark.live


def test_a_usage_event_refused_by_redis_is_queued_once_it_is_back(
    redis_server, unreachable_redis_url, settings, monkeypatch
):
    monkeypatch.setattr(settlement, "REQUEUE_PAUSES_S", (0.3, 0.3, 0.3, 0.3))
    state = RateLimitState(None, None, 0.0, None, None, 0.0)
    reservation = Reservation(1, None, 10, 0, 0, "2026-12", state)
    event = UsageEvent("chatcmpl-requeued", 1, "", "m", 3, 2, "ok", 5, 1, "", 0, time.time())

    async def settle_while_redis_is_away() -> None:
        settings.REDIS_URL = unreachable_redis_url
        reset_clients()
        await settlement.bill(reservation, 5, 0, event)  # returns: the client is not held
        assert settlement._background, "the event is being retried in the background"
        settings.REDIS_URL = redis_server  # Redis is back
        reset_clients()
        await asyncio.gather(*settlement._background)

    asyncio.run(settle_while_redis_is_away())
    entries: list[tuple[str, dict[str, str]]] = sync_redis().xrange(STREAM)  # type: ignore[assignment]
    queued = [json.loads(fields["event"]) for _, fields in entries]
    assert [e["request_id"] for e in queued] == ["chatcmpl-requeued"]
