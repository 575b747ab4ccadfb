"""A usage event Redis refused at settle time (a restart under way) is queued again in the
background once Redis is back, not lost."""

import asyncio
import json
import logging
import time

import pytest
from asgiref.testing import ApplicationCommunicator

from foundation import held_tasks
from foundation.redis_clients import reset_clients, sync_redis
from gateway.accounts.quotas import RateLimitState, Reservation
from gateway.drain_asgi import DrainGuard
from gateway.serving import settlement
from gateway.usage.ledger import STREAM, UsageEvent

pytestmark = pytest.mark.live


def reservation_and_event(request_id: str) -> tuple[Reservation, UsageEvent]:
    """A settled request's bill: 10 tokens reserved for team 1, 5 used."""
    state = RateLimitState(None, None, 0.0, None, None, 0.0)
    reservation = Reservation(1, None, 10, 0, 0, "2026-12", state)
    event = UsageEvent(request_id, 1, "", "m", 3, 2, "ok", 5, 1, "", 0, time.time())
    return reservation, event


def test_a_usage_event_refused_by_redis_is_queued_once_it_is_back(
    redis_server, unreachable_redis_url, settings, monkeypatch
):
    monkeypatch.setattr(settlement, "REQUEUE_PAUSES_S", (0.3, 0.3, 0.3, 0.3))
    reservation, event = reservation_and_event("chatcmpl-requeued")

    async def settle_while_redis_is_away() -> None:
        settings.REDIS_URL = unreachable_redis_url
        reset_clients()
        await settlement.bill(reservation, 5, 0, event)  # returns: the client is not held
        assert held_tasks.pending(), "the event is being retried in the background"
        settings.REDIS_URL = redis_server  # Redis is back
        reset_clients()
        await asyncio.gather(*held_tasks.pending())

    asyncio.run(settle_while_redis_is_away())
    entries: list[tuple[str, dict[str, str]]] = sync_redis().xrange(STREAM)  # type: ignore[assignment]
    queued = [json.loads(fields["event"]) for _, fields in entries]
    assert [e["request_id"] for e in queued] == ["chatcmpl-requeued"]


def test_a_usage_event_still_waiting_for_redis_when_the_loop_ends_is_logged_whole(
    unreachable_redis_url, settings, monkeypatch, caplog
):
    """A server shutting down (or a batch run ending) mid-retry: the event is not dropped
    silently; the error log carries it whole, for replay by hand."""
    monkeypatch.setattr(settlement, "REQUEUE_PAUSES_S", (5.0, 5.0))
    reservation, event = reservation_and_event("chatcmpl-cut-off")

    async def shut_down_while_redis_is_away() -> None:
        settings.REDIS_URL = unreachable_redis_url
        reset_clients()
        await settlement.bill(reservation, 5, 0, event)
        await settlement.finish_background(0.2)
        assert not held_tasks.pending()

    with caplog.at_level(logging.ERROR, logger="gateway.serving.settlement"):
        asyncio.run(shut_down_while_redis_is_away())
    lost = [r.getMessage() for r in caplog.records if "usage event not queued" in r.getMessage()]
    assert len(lost) == 1 and "the process stopped before Redis was back" in lost[0]
    assert json.loads(lost[0].split(": ", 2)[2])["request_id"] == "chatcmpl-cut-off"


def test_server_shutdown_waits_for_settlement_work_still_running():
    """The ASGI lifespan's shutdown is the last moment on the server's event loop: a bill
    still running beside a reply already sent finishes before shutdown completes."""
    finished: list[str] = []

    async def bill_in_flight() -> None:
        await asyncio.sleep(0.3)
        finished.append("billed")

    async def shut_down() -> list[str]:
        settlement.in_background(bill_in_flight())
        lifespan = ApplicationCommunicator(DrainGuard(None), {"type": "lifespan"})
        await lifespan.send_input({"type": "lifespan.shutdown"})
        answer = await lifespan.receive_output(timeout=5)
        assert answer["type"] == "lifespan.shutdown.complete"
        return list(finished)

    assert asyncio.run(shut_down()) == ["billed"]
