"""The usage ledger: the request path appends an event to a Redis stream; a Celery task
bulk-inserts events into the database and acknowledges them only after the commit.

A worker that dies before committing leaves its events pending; the next run reclaims
them (XAUTOCLAIM). A worker that dies after committing but before acknowledging gets them
redelivered, and the insert skips request ids already recorded. So a crash loses nothing
and counts nothing twice.
"""

import json
import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

from foundation.json_bytes import json_bytes
from foundation.redis_clients import async_redis, sync_redis
from gateway.accounts.models import Team
from gateway.usage.models import UsageRecord

logger = logging.getLogger(__name__)
STREAM = "sluice:usage:events"
GROUP = "ledger"
BATCH_SIZE = 1000


@dataclass(frozen=True)
class UsageEvent:
    request_id: str
    team_id: int
    api_key_id: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    status: str
    latency_ms: int
    ttft_ms: int | None
    worker: str
    cost_micros: int
    created_at: float
    cache_result: str = "miss"
    batch_id: str = ""  # a line of this batch (priced at its deployment's batch discount)


async def record_usage(event: UsageEvent) -> None:
    """One XADD on the request path; no SQL."""
    await async_redis().xadd(STREAM, {"event": json.dumps(asdict(event))})


def usage_command(event: UsageEvent) -> tuple[str | bytes, ...]:
    """record_usage() as one raw command, for the caller's pipeline or batch. The event's
    fields are flat, so its __dict__ is what asdict() would build with a deep copy (which
    cost 1.6% of a cache hit's CPU in a profile), encoded by orjson (json.dumps: 1%)."""
    return ("XADD", STREAM, "*", "event", json_bytes(vars(event)))


def ensure_group(client: redis.Redis) -> None:
    try:
        client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    except redis.exceptions.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def _reclaim_idle_ms() -> int:
    return int(settings.USAGE_RECLAIM_IDLE_S * 1000)


def read_batch(
    client: redis.Redis, consumer: str, reclaim_idle_ms: int | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """Events abandoned by dead consumers first, then new ones."""
    if reclaim_idle_ms is None:
        reclaim_idle_ms = _reclaim_idle_ms()
    reclaimed = client.xautoclaim(
        STREAM, GROUP, consumer, min_idle_time=reclaim_idle_ms, start_id="0-0", count=BATCH_SIZE
    )
    entries = list(reclaimed[1])
    if not entries:
        fresh = client.xreadgroup(GROUP, consumer, {STREAM: ">"}, count=BATCH_SIZE)
        entries = list(fresh[0][1]) if fresh else []  # type: ignore[index]
    return [(entry_id, json.loads(fields["event"])) for entry_id, fields in entries if fields]


def write_batch(events: list[dict[str, Any]]) -> int:
    """Insert, skipping request ids already recorded (redelivery after a crash)."""
    teams = set(
        Team.objects.filter(pk__in={e["team_id"] for e in events}).values_list("pk", flat=True)
    )
    for event in events:
        if event["team_id"] not in teams:
            logger.warning(
                "ledger: dropping %s: team %s was deleted", event["request_id"], event["team_id"]
            )
    rows = [
        UsageRecord(**{**event, "created_at": datetime.fromtimestamp(event["created_at"], UTC)})
        for event in events
        if event["team_id"] in teams
    ]
    with transaction.atomic():
        known = set(
            UsageRecord.objects.filter(request_id__in=[r.request_id for r in rows]).values_list(
                "request_id", flat=True
            )
        )
        fresh = [row for row in rows if row.request_id not in known]
        UsageRecord.objects.bulk_create(fresh, ignore_conflicts=True)
    return len(fresh)


def acknowledge(client: redis.Redis, entry_ids: list[str]) -> None:
    pipe = client.pipeline()
    pipe.xack(STREAM, GROUP, *entry_ids)
    pipe.xdel(STREAM, *entry_ids)
    pipe.execute()


def ingest(consumer: str, reclaim_idle_ms: int | None = None) -> int:
    """Move every pending event into the database; returns how many rows were new."""
    client = sync_redis()
    ensure_group(client)
    written = 0
    while batch := read_batch(client, consumer, reclaim_idle_ms):
        written += write_batch([event for _, event in batch])
        acknowledge(client, [entry_id for entry_id, _ in batch])
    if written:
        logger.info("ledger: recorded %d usage record(s)", written)
    return written
