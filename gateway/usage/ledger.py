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
from functools import cache
from typing import Any

import redis
from django.conf import settings
from django.db import connection, transaction

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
    """Insert, skipping request ids already recorded (redelivery after a crash).

    One prepared INSERT run for every row (executemany), not bulk_create: Django's compiler
    prepared each of the 14 values of each row through its field, and building the
    statement took over half of the ledger worker's CPU, about 0.1 ms an event (a profile
    in docs/benchmarks.md, tenth round), on the same core as the gateway in a one-machine
    install. ON CONFLICT DO NOTHING (PostgreSQL and SQLite alike) keeps a redelivered id
    that raced the check below from failing the batch."""
    teams = set(
        Team.objects.filter(pk__in={e["team_id"] for e in events}).values_list("pk", flat=True)
    )
    for event in events:
        if event["team_id"] not in teams:
            logger.warning(
                "ledger: dropping %s: team %s was deleted", event["request_id"], event["team_id"]
            )
    statement, columns = _insert_statement()
    adapt_time = connection.ops.adapt_datetimefield_value
    with transaction.atomic():
        ids = [event["request_id"] for event in events if event["team_id"] in teams]
        known = set(
            UsageRecord.objects.filter(request_id__in=ids).values_list("request_id", flat=True)
        )
        rows = [
            tuple(
                adapt_time(datetime.fromtimestamp(event[name], UTC))
                if name == "created_at"
                else event.get(name, default)
                for name, default in columns
            )
            for event in events
            if event["team_id"] in teams and event["request_id"] not in known
        ]
        if rows:
            with connection.cursor() as cursor:
                cursor.executemany(statement, rows)
    return len(rows)


@cache
def _insert_statement() -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The INSERT of a usage record, and its columns: (the event's key, the default)."""
    meta = UsageRecord._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    quote = connection.ops.quote_name
    # Names from the model's own metadata; the values go as parameters.
    statement = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "  # noqa: S608
        f"VALUES ({', '.join(['%s'] * len(fields))}) "
        f"ON CONFLICT ({quote(meta.get_field('request_id').column)}) DO NOTHING"
    )
    return statement, tuple((f.attname, f.get_default()) for f in fields)


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
