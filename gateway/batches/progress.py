"""The runner's writes: hold a batch, record finished lines, and end it with its output and
error files. Synchronous (the runner calls them through database_read's thread)."""

import json
import logging
import tempfile
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from gateway.batches.actions import store_output_file
from gateway.batches.lines import line_request_id
from gateway.batches.models import Batch, BatchFile, BatchLine
from gateway.batches.storage import StorageUnavailable, file_storage
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord

logger = logging.getLogger(__name__)
Status = Batch.Status
QUEUED = "queued"  # the holder of a batch whose run is queued and not yet started
# How long a runner writing a batch's files holds it without a heartbeat: a runner that dies
# while writing them is replaced after this, rather than after BATCH_RUNNER_STALE_S.
FINALIZE_HOLD = timedelta(minutes=10)
OUTPUT_IN_MEMORY_BYTES = 8 * 1024 * 1024  # per file, then it is spooled to disk
# What a line that never ran says in the error file, by how its batch ended.
NOT_RUN = {
    Status.EXPIRED: (
        "batch_expired",
        "This request could not be executed before the completion window expired.",
    ),
    Status.CANCELLED: ("batch_cancelled", "The batch was cancelled before this request ran."),
}


def claim(batch_id: str, runner: str) -> Batch | None:
    """Hold the batch for `runner` if it is unfinished and nobody else holds it (no holder,
    or one silent for BATCH_RUNNER_STALE_S); the batch, or None."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.BATCH_RUNNER_STALE_S)
    taken = (
        Batch.objects.filter(id=batch_id, status__in=Batch.ACTIVE)
        .filter(
            Q(heartbeat_at__isnull=True)
            | Q(heartbeat_at__lt=stale)
            | Q(runner__in=(runner, QUEUED))
        )
        .update(runner=runner, heartbeat_at=now)
    )
    if not taken:
        return None
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(id=batch_id)
        if batch.status == Status.VALIDATING:
            batch.status, batch.in_progress_at = Status.IN_PROGRESS, now
            batch.save(update_fields=["status", "in_progress_at"])
    logger.info("runner %s holds batch %s (%s)", runner, batch_id, batch.status)
    return batch


def _unheld(stale: datetime) -> Q:
    return Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale)


def orphans(stale: datetime) -> list[str]:
    """Unfinished batches no runner holds: no holder, or one silent since `stale`."""
    active = Batch.objects.filter(status__in=Batch.ACTIVE).filter(_unheld(stale))
    return list(active.values_list("id", flat=True))


def queue_orphans(batch_ids: list[str], stale: datetime) -> list[str]:
    """Mark each batch queued if it is still unheld, and say which were: a runner that
    renewed or claimed one since orphans() read it keeps it. (Marked by id alone, a batch
    was taken from a live runner, whose next renewal found its hold lost: it dropped what
    it had finished, and the new run did it again.)"""
    now = timezone.now()
    return [
        batch_id
        for batch_id in batch_ids
        if Batch.objects.filter(id=batch_id, status__in=Batch.ACTIVE)
        .filter(_unheld(stale))
        .update(runner=QUEUED, heartbeat_at=now)
    ]


def mark_queued(batch_ids: list[str]) -> None:
    """A run was queued for these: the sweep leaves them alone until the hold goes stale
    (it would otherwise queue another run every time it passed)."""
    Batch.objects.filter(id__in=batch_ids).update(runner=QUEUED, heartbeat_at=timezone.now())


def renew(batch_id: str, runner: str) -> str | None:
    """Renew the hold; the batch's status now (cancelling, say), or None if it was lost."""
    held = Batch.objects.filter(id=batch_id, runner=runner).update(heartbeat_at=timezone.now())
    if not held:
        return None
    status: str = Batch.objects.values_list("status", flat=True).get(id=batch_id)
    return status


def finished_line_numbers(batch_id: str) -> set[int]:
    return set(BatchLine.objects.filter(batch_id=batch_id).values_list("line_number", flat=True))


def billed_lines(batch_id: str) -> dict[int, str]:
    """Line number -> the request id it was billed under, for every line of the batch with
    a usage record that billed tokens (usage events still in the stream are moved into the
    ledger first; a failed attempt that reached no worker bills nothing): with
    finished_line_numbers, which lines a runner that died billed but never kept.

    Events another ledger consumer has read and not yet written (the Celery task holds up
    to a batch of them) are claimed too, however recently read: left to it, they were
    invisible here, and a rerun reused a failed attempt's id (its bill then dropped as a
    duplicate) or billed a line twice. Both writing one is harmless: the ledger keeps the
    first record of an id."""
    ingest("batch-runner", reclaim_idle_ms=0)
    prefix = line_request_id(batch_id, 0).removesuffix("0")
    billed: dict[int, str] = {}
    records = (
        UsageRecord.objects.filter(batch_id=batch_id)
        .filter(Q(prompt_tokens__gt=0) | Q(completion_tokens__gt=0))
        .order_by("-completion_tokens")  # the attempt that answered, if several billed
        .values_list("request_id", flat=True)
    )
    for request_id in records:
        number = _line_number(prefix, request_id)
        if number is not None:
            billed.setdefault(number, request_id)
    return billed


def recorded_attempts(batch_id: str) -> dict[int, set[str]]:
    """Line number -> every request id the ledger holds for the line (billed or not, a
    failed attempt included): ids a new attempt must not reuse (lines.attempt_ids). Read
    after billed_lines, which moved the usage stream into the ledger."""
    prefix = line_request_id(batch_id, 0).removesuffix("0")
    recorded: dict[int, set[str]] = {}
    ids = UsageRecord.objects.filter(batch_id=batch_id).values_list("request_id", flat=True)
    for request_id in ids:
        number = _line_number(prefix, request_id)
        if number is not None:
            recorded.setdefault(number, set()).add(request_id)
    return recorded


def _line_number(prefix: str, request_id: str) -> int | None:
    number = request_id.removeprefix(prefix).split("_r")[0]
    if request_id.startswith(prefix) and number.isascii() and number.isdigit():
        return int(number)
    return None


def record_lines(batch_id: str, runner: str, lines: list[BatchLine]) -> bool:
    """Keep finished lines (a line already kept stays as it was) and the batch's counts;
    False, keeping nothing, when `runner` no longer holds the batch. The holder runs those
    lines itself (the ledger bills each request id once); kept after it began writing the
    files, they were in neither file though billed, and their recount undid its counts."""
    with transaction.atomic():
        if not Batch.objects.select_for_update().filter(id=batch_id, runner=runner).exists():
            return False
        BatchLine.objects.bulk_create(lines, ignore_conflicts=True)
        _recount(batch_id)
    return True


def _recount(batch_id: str) -> None:
    totals = BatchLine.objects.filter(batch_id=batch_id).aggregate(
        completed=Count("id", filter=Q(status_code=200)),
        failed=Count("id", filter=~Q(status_code=200)),
        prompt=Sum("prompt_tokens", default=0),
        completion=Sum("completion_tokens", default=0),
        cost=Sum("cost_micros", default=0),
    )
    Batch.objects.filter(id=batch_id).update(
        completed=totals["completed"],
        failed=totals["failed"],
        prompt_tokens=totals["prompt"],
        completion_tokens=totals["completion"],
        cost_micros=totals["cost"],
    )


def finish(
    batch_id: str,
    runner: str,
    unrun: dict[int, str],
    status: Status,
    errors: dict[str, Any] | None = None,
) -> Batch | None:
    """Write the output and error files and end the batch as `status` (completed, expired,
    cancelled, or failed when its input is gone). `unrun`: line number -> custom_id of
    lines that never ran, written to the error file with why. None if the hold was lost
    meanwhile (another runner finishes it). `errors`: why a failed batch failed, saved
    with its status."""
    # A cancelled batch stays "cancelling" while its files are written (as OpenAI's do), so
    # a runner that dies now leaves it to be cancelled, not run on, by the next.
    held = Batch.objects.filter(id=batch_id, runner=runner)
    # The runner's heartbeat has stopped: the hold is renewed for the upload instead, or a
    # large output slow to reach object storage would be taken over by the sweep, written
    # again by the next runner, and taken over again.
    hold: dict[str, Any] = {"heartbeat_at": timezone.now() + FINALIZE_HOLD}
    if status != Status.CANCELLED:
        hold.update(status=Status.FINALIZING, finalizing_at=timezone.now())
    if not held.update(**hold):
        return None
    batch = Batch.objects.get(id=batch_id)
    # On disk past OUTPUT_IN_MEMORY_BYTES: a batch's answers can be gigabytes.
    with _spooled() as output, _spooled() as error_file:
        return _write_and_end(batch, runner, unrun, status, output, error_file, errors)


def _spooled() -> "tempfile.SpooledTemporaryFile[bytes]":
    return tempfile.SpooledTemporaryFile(max_size=OUTPUT_IN_MEMORY_BYTES)


def _write_and_end(
    batch: Batch,
    runner: str,
    unrun: dict[int, str],
    status: Status,
    output: IO[bytes],
    errors: IO[bytes],
    why: dict[str, Any] | None,
) -> Batch | None:
    batch_id = batch.id
    kept = set()
    for line in BatchLine.objects.filter(batch_id=batch_id).order_by("line_number").iterator():
        kept.add(line.line_number)
        (output if line.succeeded else errors).write(_jsonl(_output_line(line)))
    # A line this runner did not start may have been answered by one that lost the hold
    # (kept before it knew): its answer is the line's, listed once, not "not run" too.
    unrun = {number: custom_id for number, custom_id in unrun.items() if number not in kept}
    code, message = NOT_RUN.get(status, ("batch_failed", "The batch failed before this ran."))
    for number, custom_id in sorted(unrun.items()):
        errors.write(_jsonl(_unrun_line(batch_id, number, custom_id, code, message)))
    stored: dict[str, BatchFile] = {}  # uploaded before the row is locked, not while
    try:
        for kind, content in (("output", output), ("error", errors)):
            size = content.tell()
            if size:
                content.seek(0)
                name = f"{batch_id}_{kind}.jsonl"
                stored[kind] = store_output_file(batch.team_id, name, content, size)
        with transaction.atomic():
            batch = Batch.objects.select_for_update().get(id=batch_id)
            if batch.runner != runner:  # lost during the upload: the next one writes them
                raise HoldLost
            for kind, file in stored.items():
                file.save()
                setattr(batch, f"{kind}_file_id", file.id)
            batch.status = status
            setattr(batch, f"{status}_at", timezone.now())
            batch.failed += len(unrun)
            if why is not None:
                batch.errors = why
            batch.runner, batch.heartbeat_at = "", None
            batch.save()
    except BaseException as exc:
        _drop(stored.values())  # no row names them: nothing else would ever remove them
        if isinstance(exc, HoldLost):
            return None
        raise
    logger.info(
        "batch %s %s: %d completed, %d failed", batch_id, status, batch.completed, batch.failed
    )
    return batch


class HoldLost(Exception):
    """Another runner took the batch over while this one was writing its files."""


def _drop(files: Iterable[BatchFile]) -> None:
    for file in files:
        try:
            file_storage().delete(file.id)
        except (StorageUnavailable, OSError) as exc:
            logger.error("batch output %s left in storage, no row names it: %s", file.id, exc)


def fail(batch_id: str, runner: str, code: str, message: str) -> None:
    """The batch cannot run on (its input file is gone: deleted, or expired, before a runner
    resumed it). Lines an earlier runner finished were billed: their answers go to the
    output and error files as at any other end, not lost with the input."""
    errors = {"object": "list", "data": [{"code": code, "message": message, "param": None}]}
    if BatchLine.objects.filter(batch_id=batch_id).exists():
        if finish(batch_id, runner, {}, Status.FAILED, errors) is None:
            return  # the hold was lost: whoever holds it now ends it
    else:
        Batch.objects.filter(id=batch_id, status__in=Batch.ACTIVE).update(
            status=Status.FAILED,
            failed_at=timezone.now(),
            errors=errors,
            runner="",
            heartbeat_at=None,
        )
    logger.warning("batch %s failed: %s", batch_id, message)


def _jsonl(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, separators=(",", ":")) + "\n").encode()


def _output_line(line: BatchLine) -> dict[str, Any]:
    """OpenAI's output line: an answer (any status) has `response`; a malformed line has
    only `error`, with its line number. An answer admission changed (max_tokens clamped,
    turns trimmed, the prompt compressed, a tier chosen for "auto") also has
    `response.headers`: the x-sluice-* headers the same request over HTTP would get."""
    record_id = line_request_id(line.batch_id, line.line_number)
    if line.status_code == 0:
        error = {**(line.error or {}), "line": line.line_number}
        return {
            "id": record_id,
            "custom_id": line.custom_id or None,
            "response": None,
            "error": error,
        }
    response = {"status_code": line.status_code, "request_id": line.request_id, "body": line.body}
    if line.headers:
        response["headers"] = line.headers
    return {"id": record_id, "custom_id": line.custom_id, "response": response, "error": None}


def _unrun_line(
    batch_id: str, number: int, custom_id: str, code: str, message: str
) -> dict[str, Any]:
    error = {"code": code, "message": message, "line": number}
    return {
        "id": line_request_id(batch_id, number),
        "custom_id": custom_id or None,
        "response": None,
        "error": error,
    }
