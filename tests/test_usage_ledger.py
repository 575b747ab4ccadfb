import time
import uuid

import pytest
import redis
from asgiref.sync import async_to_sync

from foundation.redis_clients import sync_redis
from gateway.accounts import actions
from gateway.usage.ledger import (
    GROUP,
    STREAM,
    UsageEvent,
    ensure_group,
    ingest,
    read_batch,
    record_usage,
    write_batch,
)
from gateway.usage.models import UsageRecord

pytestmark = [pytest.mark.django_db, pytest.mark.live]


def push(team_id: int, count: int) -> list[str]:
    ids = [f"chatcmpl-{uuid.uuid4().hex}" for _ in range(count)]
    for request_id in ids:
        async_to_sync(record_usage)(
            UsageEvent(
                request_id=request_id,
                team_id=team_id,
                api_key_id="abcd1234",
                model="m",
                prompt_tokens=10,
                completion_tokens=5,
                status="ok",
                latency_ms=100,
                ttft_ms=20,
                worker="http://w",
                cost_micros=7,
                created_at=time.time(),
            )
        )
    return ids


def test_consumers_that_die_before_or_after_committing_lose_nothing_and_count_nothing_twice():
    team = actions.create_team("Acme")
    client = sync_redis()
    ensure_group(client)
    sent = push(team.pk, 250)
    died_before_commit = read_batch(client, "worker-1")  # read, then the process died
    assert len(died_before_commit) == 250
    sent += push(team.pk, 100)
    died_after_commit = read_batch(client, "worker-2")
    assert write_batch([event for _, event in died_after_commit]) == 100  # committed, no ack

    assert ingest("worker-3", reclaim_idle_ms=0) == 250  # reclaims both; skips the 100
    assert sorted(UsageRecord.objects.values_list("request_id", flat=True)) == sorted(sent)
    assert client.xlen(STREAM) == 0
    assert client.xpending(STREAM, GROUP)["pending"] == 0


def test_a_pending_event_of_a_live_consumer_is_not_stolen_early():
    team = actions.create_team("Acme")
    client = sync_redis()
    ensure_group(client)
    push(team.pk, 3)
    read_batch(client, "busy-worker")
    assert ingest("other-worker") == 0  # the default 30 s idle time has not passed
    assert UsageRecord.objects.count() == 0


def test_events_of_a_deleted_team_are_dropped_not_stuck(caplog):
    team = actions.create_team("Gone")
    push(team.pk, 2)
    team.delete()
    kept = actions.create_team("Kept")
    push(kept.pk, 1)
    assert ingest("worker") == 1
    assert "team" in caplog.text and "was deleted" in caplog.text
    assert isinstance(sync_redis(), redis.Redis)


def test_a_recorded_event_keeps_every_field_as_sent():
    team = actions.create_team("Acme")
    sent = UsageEvent(
        request_id="chatcmpl-fields",
        team_id=team.pk,
        api_key_id="abcd1234",
        model="qwen",
        prompt_tokens=11,
        completion_tokens=7,
        status="failed",
        latency_ms=345,
        ttft_ms=None,
        worker="http://w:8000",
        cost_micros=2**40,  # a BIGINT column
        created_at=1_790_000_000.123456,
        cache_result="semantic",
        batch_id="batch_abc",
    )
    async_to_sync(record_usage)(sent)
    assert ingest("worker-1") == 1
    row = UsageRecord.objects.get(request_id="chatcmpl-fields")
    expected = {name: value for name, value in vars(sent).items() if name != "created_at"}
    assert {name: getattr(row, name) for name in expected} == expected
    assert row.created_at.timestamp() == pytest.approx(sent.created_at, abs=1e-6)
