"""Reads of the Batch API's tables for the dashboard (the Batches page, the Fleet page's
batch throughput) and the `batches` command. Each read is bounded: the newest batches up
to a limit, and the lines of only the batches that can have finished one lately.

Kept apart from selectors.py, whose figures all come from the rollup tables: these read
the batches' own rows, which the runners keep current (counts, tokens, cost)."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from gateway.batches.models import Batch, BatchLine

MAX_BATCH_ROWS = 200
THROUGHPUT_WINDOW = timedelta(minutes=15)
# A batch's final state and the timestamp field that records when it was reached.
FINISHED_AT = {
    Batch.Status.COMPLETED: "completed_at",
    Batch.Status.FAILED: "failed_at",
    Batch.Status.EXPIRED: "expired_at",
    Batch.Status.CANCELLED: "cancelled_at",
}


@dataclass(frozen=True)
class BatchJob:
    id: str
    team_id: int
    team: str
    status: str
    endpoint: str
    total: int
    completed: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost_micros: int  # billed, with the deployment's batch discount already taken off
    created_at: datetime
    finished: bool  # in a final state (completed, failed, expired, cancelled)
    finished_at: datetime | None  # when it reached it
    now: datetime

    @property
    def done(self) -> int:
        return self.completed + self.failed

    @property
    def progress(self) -> float | None:
        """Share of lines done (completed or failed); None before the total is known."""
        return self.done / self.total if self.total else None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def duration(self) -> timedelta | None:
        """Time to completion when finished, else the time elapsed so far (None: a final
        batch without the timestamp of its final state, which the runner always writes)."""
        if self.finished and self.finished_at is None:
            return None
        return max((self.finished_at or self.now) - self.created_at, timedelta(0))

    @property
    def duration_text(self) -> str:
        return "-" if self.duration is None else format_duration(self.duration)


def format_duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"


def batch_jobs(
    team_id: int | None = None,
    status: str | None = None,
    limit: int = MAX_BATCH_ROWS,
    now: datetime | None = None,
) -> list[BatchJob]:
    """The newest batches first, at most `limit`, optionally of one team or in one state."""
    now = now or timezone.now()
    query = Batch.objects.all()
    if team_id is not None:
        query = query.filter(team_id=team_id)
    if status:
        query = query.filter(status=status)
    rows = query.order_by("-created_at", "-id").values(
        "id",
        "team_id",
        "team__name",
        "status",
        "endpoint",
        "total",
        "completed",
        "failed",
        "prompt_tokens",
        "completion_tokens",
        "cost_micros",
        "created_at",
        *FINISHED_AT.values(),
    )[:limit]
    return [
        BatchJob(
            id=row["id"],
            team_id=row["team_id"],
            team=row["team__name"],
            status=row["status"],
            endpoint=row["endpoint"],
            total=row["total"],
            completed=row["completed"],
            failed=row["failed"],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            cost_micros=row["cost_micros"],
            created_at=row["created_at"],
            finished=row["status"] in FINISHED_AT,
            finished_at=_finished_at(row),
            now=now,
        )
        for row in rows
    ]


def _finished_at(row: dict[str, Any]) -> datetime | None:
    field = FINISHED_AT.get(row["status"])
    return None if field is None else row[field]


@dataclass(frozen=True)
class BatchThroughput:
    lines_per_minute: float  # lines finished (answered or failed) per minute, over the window
    lines: int
    window_minutes: int
    active: dict[str, int]  # batches per unfinished state, every active state present

    @property
    def in_progress(self) -> int:
        return self.active[Batch.Status.IN_PROGRESS]


def batch_throughput(now: datetime | None = None) -> BatchThroughput:
    """Lines finished per minute over the last 15 minutes, and the batches still running.

    Only the lines of batches that can have finished one since the window began are read
    (those still active, and those that reached a final state within it), through the
    (batch, line_number) index, rather than a scan of every batch's lines."""
    now = now or timezone.now()
    since = now - THROUGHPUT_WINDOW
    recent = Q(status__in=Batch.ACTIVE) | Q(
        **{f"{field}__gte": since for field in FINISHED_AT.values()}, _connector=Q.OR
    )
    lines = BatchLine.objects.filter(
        batch_id__in=Batch.objects.filter(recent).values("id"),
        finished_at__gte=since,
        finished_at__lte=now,
    ).count()
    counts = dict(
        Batch.objects.filter(status__in=Batch.ACTIVE)
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by()
    )
    minutes = int(THROUGHPUT_WINDOW.total_seconds() // 60)
    return BatchThroughput(
        lines_per_minute=lines / minutes,
        lines=lines,
        window_minutes=minutes,
        active={str(status): counts.get(status, 0) for status in Batch.ACTIVE},
    )
