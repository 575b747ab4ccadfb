"""Every write to files and batches, named for what it does; views, tasks and commands
call these and stay thin. Refusals raise BatchRefused, which carries the HTTP status and
OpenAI error code the API answers with."""

import logging
import secrets
from collections.abc import Mapping
from datetime import timedelta
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from gateway.accounts.authentication import ModelNotAllowed, check_model_allowed
from gateway.accounts.models import Team
from gateway.accounts.records import KeyRecord, effective_limits
from gateway.batches.input_file import (
    ENDPOINTS,
    GENERATION_ENDPOINTS,
    NotABatchFile,
    summarize,
)
from gateway.batches.models import Batch, BatchFile
from gateway.batches.storage import StorageUnavailable, file_storage
from inference.deployments import DeploymentInfo
from scaling.routing.tiers import AUTO_MODEL, BATCH_TIER, ROUTED_TIERS

logger = logging.getLogger(__name__)
COMPLETION_WINDOWS = {"24h": timedelta(hours=24)}
METADATA_MAX_PAIRS = 16


class BatchRefused(Exception):
    def __init__(self, status: int, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


def new_file_id() -> str:
    return f"file-{secrets.token_hex(12)}"


def new_batch_id() -> str:
    return f"batch_{secrets.token_hex(12)}"


def create_file(
    team: Team, filename: str, purpose: str, content: IO[bytes], size: int
) -> BatchFile:
    """An uploaded input file, checked (JSONL, line count) before it is kept."""
    if purpose != BatchFile.Purpose.BATCH:
        raise BatchRefused(
            400,
            f"Only purpose 'batch' files can be uploaded here, not {purpose!r}.",
            "invalid_value",
            "purpose",
        )
    if size > settings.BATCH_FILE_MAX_BYTES:
        raise BatchRefused(
            413,
            f"The file is {size} bytes; at most {settings.BATCH_FILE_MAX_BYTES}.",
            "file_too_large",
            "file",
        )
    _check_team_storage(team, size)  # before reading it: a full team is told at once
    try:
        summary = summarize(content)
    except NotABatchFile as exc:
        raise BatchRefused(400, str(exc), "invalid_file_format", "file") from None
    content.seek(0)
    now = timezone.now()
    row = BatchFile(
        id=new_file_id(),
        team=team,
        purpose=purpose,
        filename=filename[:255],
        bytes=size,
        created_at=now,
        expires_at=now + timedelta(seconds=settings.BATCH_FILE_TTL_S),
        line_count=summary.lines,
        estimated_tokens=summary.estimated_tokens,
        model_names={url: sorted(names) for url, names in summary.model_names.items()},
    )
    file_storage().save(row.id, content)
    try:
        # Checked again with the team's row locked, and the file kept in that transaction:
        # uploads of one team at once (on several threads or processes) each saw the
        # others' bytes missing above, and together passed the limit.
        with transaction.atomic():
            Team.objects.select_for_update().get(pk=team.pk)
            _check_team_storage(team, size)
            row.save()
    except BaseException:
        _drop_bytes(row.id)
        raise
    logger.info("team %s uploaded %s (%d bytes, %d lines)", team.pk, row.id, size, summary.lines)
    return row


def _check_team_storage(team: Team, size: int) -> None:
    stored = BatchFile.objects.filter(team=team).aggregate(total=Sum("bytes"))["total"] or 0
    if stored + size > settings.BATCH_TEAM_STORAGE_BYTES:
        raise BatchRefused(
            413,
            f"The team's files take {stored} bytes; this one would pass its limit of "
            f"{settings.BATCH_TEAM_STORAGE_BYTES}. Delete files it no longer needs.",
            "storage_limit_exceeded",
            "file",
        )


def _drop_bytes(file_id: str) -> None:
    """Bytes stored for a file that was then refused: no row will name them."""
    try:
        file_storage().delete(file_id)
    except (StorageUnavailable, OSError) as exc:
        logger.error("upload %s left in storage, no row names it: %s", file_id, exc)


def store_output_file(team_id: int, filename: str, content: IO[bytes], size: int) -> BatchFile:
    """A batch's output or error file, written by its runner: the bytes stored, the row
    returned unsaved, for the caller to save in the transaction that hands the file to its
    batch (the upload, seconds to object storage for a large batch, is then never made
    while a row lock is held)."""
    now = timezone.now()
    row = BatchFile(
        id=new_file_id(),
        team_id=team_id,
        purpose=BatchFile.Purpose.BATCH_OUTPUT,
        filename=filename,
        bytes=size,
        created_at=now,
        expires_at=now + timedelta(seconds=settings.BATCH_FILE_TTL_S),
    )
    file_storage().save(row.id, content)
    return row


def delete_file(file: BatchFile) -> None:
    """The bytes first: storage that fails (object storage out of reach) leaves the row,
    so the delete can be asked again, rather than bytes no row remembers."""
    file_storage().delete(file.id)
    forget_file(file)


def forget_file(file: BatchFile) -> None:
    """The row of a file whose bytes are gone (delete_file's second half: the API view
    deletes the bytes on a thread of its own, never the one database calls share)."""
    file_id = file.id  # delete() forgets it
    file.delete()
    logger.info("team %s deleted %s", file.team_id, file_id)


def delete_expired_files() -> int:
    """Expired files, each on its own: storage out of reach for one leaves it for the next
    sweep and goes on with the rest."""
    deleted = 0
    for file in BatchFile.objects.filter(expires_at__lte=timezone.now()):
        try:
            delete_file(file)
        except StorageUnavailable as exc:
            logger.error("expired file %s kept for the next sweep: %s", file.id, exc)
            continue
        deleted += 1
    return deleted


def create_batch(
    key: KeyRecord,
    input_file_id: str,
    endpoint: str,
    completion_window: str,
    deployments: Mapping[str, DeploymentInfo],
    metadata: dict[str, Any] | None = None,
) -> Batch:
    """A batch over a file of the key's team, refused here (not later) when its endpoint,
    window, models (`deployments`: the catalog, by public name) or the team's batch queue
    limit rule it out."""
    if endpoint not in ENDPOINTS:
        raise BatchRefused(
            400,
            f"endpoint must be one of {', '.join(ENDPOINTS)}, not {endpoint!r}.",
            "invalid_value",
            "endpoint",
        )
    window = COMPLETION_WINDOWS.get(completion_window)
    if window is None:
        raise BatchRefused(
            400, "completion_window must be '24h'.", "invalid_value", "completion_window"
        )
    _check_metadata(metadata)
    file = BatchFile.objects.filter(id=input_file_id, team_id=key.team_id).first()
    if file is None or file.purpose != BatchFile.Purpose.BATCH:
        raise BatchRefused(
            404, f"No batch input file with id {input_file_id!r}.", "not_found", "input_file_id"
        )
    names = file.model_names.get(endpoint)
    if not names:
        raise BatchRefused(
            400,
            f"The input file holds no well-formed line for {endpoint}: each line's url must be "
            "the batch's endpoint.",
            "invalid_value",
            "input_file_id",
        )
    _check_models(key, names, endpoint, deployments)
    with transaction.atomic():
        team = Team.objects.select_for_update().get(pk=key.team_id)  # one creation at a time
        _check_queue_limit(team, file.estimated_tokens)
        now = timezone.now()
        batch = Batch.objects.create(
            id=new_batch_id(),
            team=team,
            api_key_id=key.lookup_id,
            endpoint=endpoint,
            input_file_id=file.id,
            completion_window=completion_window,
            metadata=metadata,
            total=file.line_count,
            enqueued_tokens=file.estimated_tokens,
            created_at=now,
            expires_at=now + window,
        )
    logger.info("team %s created %s over %s (%d lines)", team.pk, batch.id, file.id, batch.total)
    return batch


def _check_metadata(metadata: dict[str, Any] | None) -> None:
    if metadata is None:
        return
    if (
        not isinstance(metadata, dict)
        or len(metadata) > METADATA_MAX_PAIRS
        or any(not isinstance(k, str) or len(k) > 64 for k in metadata)
        or any(not isinstance(v, str) or len(v) > 512 for v in metadata.values())
    ):
        raise BatchRefused(
            400,
            "metadata holds at most 16 string pairs (keys up to 64 characters, values up to 512).",
            "invalid_value",
            "metadata",
        )


AUTO_TIERS = (BATCH_TIER, *ROUTED_TIERS)  # where "auto" sends a batch's lines


def _check_models(
    key: KeyRecord, names: list[str], endpoint: str, deployments: Mapping[str, DeploymentInfo]
) -> None:
    for name in names:
        deployment = deployments.get(name)
        if deployment is None and name == AUTO_MODEL and endpoint in GENERATION_ENDPOINTS:
            if not any(
                d.is_chat
                and d.tier in AUTO_TIERS
                and (not key.allowed_models or d.name in key.allowed_models)
                for d in deployments.values()
            ):
                raise BatchRefused(
                    404,
                    "The model 'auto' has no deployment to route to that this key may use: "
                    "it needs a chat deployment of the batch, small or large tier.",
                    "model_not_found",
                    "input_file_id",
                )
            continue  # chosen per line by admission (gateway/serving/admission.py)
        if deployment is None:
            raise BatchRefused(
                404,
                f"The model '{name}' does not exist (named in the input file).",
                "model_not_found",
                "input_file_id",
            )
        try:
            check_model_allowed(key.allowed_models, name)
        except ModelNotAllowed as exc:
            raise BatchRefused(403, str(exc), "model_not_allowed", "input_file_id") from None
        if deployment.is_chat != (endpoint in GENERATION_ENDPOINTS):
            raise BatchRefused(
                400,
                f"The model '{name}' does not serve {endpoint}.",
                "invalid_value",
                "input_file_id",
            )


def _check_queue_limit(team: Team, tokens: int) -> None:
    limit = effective_limits(team.pk).batch_queue_tokens
    if limit is None:
        return
    queued = (
        Batch.objects.filter(team=team, status__in=Batch.ACTIVE).aggregate(
            total=Sum("enqueued_tokens")
        )["total"]
        or 0
    )
    if queued + tokens > limit:
        raise BatchRefused(
            429,
            f"The team's unfinished batches hold {queued} tokens; this one would add {tokens}, "
            f"over its limit of {limit} enqueued batch tokens. Wait for a batch to finish, "
            "or split the file.",
            "batch_queue_limit_exceeded",
        )


def cancel_batch(batch_id: str, team_id: int | None = None) -> Batch:
    """An unfinished batch becomes cancelling: its runner (or, when none holds it, the next
    runner the sweep starts) stops starting lines, writes what finished to the output and
    error files, and marks it cancelled."""
    with transaction.atomic():
        query = Batch.objects.select_for_update().filter(id=batch_id)
        if team_id is not None:
            query = query.filter(team_id=team_id)
        batch = query.first()
        if batch is None:
            raise BatchRefused(404, f"No batch with id {batch_id!r}.", "not_found")
        if batch.status not in Batch.ACTIVE:
            raise BatchRefused(
                409, f"The batch is {batch.status}; it cannot be cancelled.", "invalid_state"
            )
        if batch.status != Batch.Status.CANCELLING:
            batch.status = Batch.Status.CANCELLING
            batch.cancelling_at = timezone.now()
            batch.save(update_fields=["status", "cancelling_at"])
    logger.info("batch %s of team %s is cancelling", batch.id, batch.team_id)
    return batch
