"""A resumed batch runner reads what the dead one billed from the ledger: usage events the
Celery ledger task has read but not yet written are seen too."""

import json
import time
from dataclasses import asdict

import pytest

from foundation.redis_clients import sync_redis
from gateway.accounts import actions
from gateway.batches import progress
from gateway.batches.lines import attempt_ids, line_request_id
from gateway.usage import ledger
from gateway.usage.models import UsageRecord

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


def test_events_another_consumer_holds_unwritten_are_seen_and_recorded_once():
    team = actions.create_team("Acme")
    batch_id = "batch_" + "ab" * 12
    failed_try, answered = line_request_id(batch_id, 1), line_request_id(batch_id, 2)
    events = [
        ledger.UsageEvent(
            failed_try,
            team.pk,
            "k1",
            "m",
            0,
            0,
            "failed",
            1,
            None,
            "",
            0,
            time.time(),
            "miss",
            batch_id,
        ),
        ledger.UsageEvent(
            answered,
            team.pk,
            "k1",
            "m",
            10,
            8,
            "ok",
            1,
            None,
            "",
            26,
            time.time(),
            "miss",
            batch_id,
        ),
    ]
    client = sync_redis()
    ledger.ensure_group(client)
    for event in events:
        client.xadd(ledger.STREAM, {"event": json.dumps(asdict(event))})
    # The Celery ledger task has read them (XREADGROUP) and is still writing them.
    held = ledger.read_batch(client, "host-celery")
    assert [e["request_id"] for _, e in held] == [failed_try, answered]

    assert progress.billed_lines(batch_id) == {2: answered}
    recorded = progress.recorded_attempts(batch_id)
    assert recorded == {1: {failed_try}, 2: {answered}}
    assert attempt_ids(failed_try, recorded[1])[0] != failed_try  # a rerun takes a new id

    ledger.write_batch([e for _, e in held])  # the Celery task commits them after all
    ledger.acknowledge(client, [entry_id for entry_id, _ in held])
    assert UsageRecord.objects.filter(batch_id=batch_id).count() == 2  # once each
