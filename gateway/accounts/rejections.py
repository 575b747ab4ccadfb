"""Requests refused by a quota (429), counted per team and hour.

The usage ledger records admitted requests only, and /metrics counts refusals per limit
across teams; an admin asking "which team is hitting its limits" needs them per team.
One hash per team in Redis, a field per (hour, limit), kept for RETENTION_S: one HINCRBY
on a path that has just talked to Redis anyway.
"""

import logging
import time
from datetime import UTC, datetime

from foundation.redis_clients import REDIS_FAILURES, async_redis, sync_redis

logger = logging.getLogger(__name__)
PREFIX = "sluice:rejected:"
RETENTION_S = 35 * 24 * 3600  # a month view, and a little more


def _hour(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y%m%d%H")


async def count_rejection(team_id: int, limit: str, at: float | None = None) -> None:
    key = PREFIX + str(team_id)
    pipe = async_redis().pipeline(transaction=False)
    pipe.hincrby(key, f"{_hour(at or time.time())}:{limit}", 1)
    pipe.expire(key, RETENTION_S)
    try:
        await pipe.execute()
    except REDIS_FAILURES as exc:
        logger.warning("rejection of team %s (%s) not counted: %s", team_id, limit, exc)


def rejected_between(team_id: int, start: datetime, end: datetime) -> dict[str, int]:
    """Refusals by limit in the whole hours that overlap [start, end)."""
    first, last = _hour(start.timestamp()), _hour(end.timestamp())
    counts: dict[str, int] = {}
    for field, value in sync_redis().hgetall(PREFIX + str(team_id)).items():
        hour, _, limit = str(field).partition(":")
        if first <= hour <= last:
            counts[limit] = counts.get(limit, 0) + int(value)
    return counts
