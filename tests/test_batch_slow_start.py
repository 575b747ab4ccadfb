"""A runner renews its hold from the moment it takes a batch: while its input file is
opened (object storage downloads it whole) and while what earlier runners billed is read.
Renewed only once lines began, a slow start let the sweep hand the batch to a second
runner, and both ran the same lines."""

import asyncio
import io
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest

from gateway.accounts import actions as account_actions
from gateway.batches import progress
from gateway.batches.models import Batch
from gateway.batches.runner import run_batch
from gateway.batches.storage import LocalFileStorage, file_storage

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
OPEN_S = 3.0
STALE_S = 1


class SlowToOpen(LocalFileStorage):
    """Local files that take OPEN_S to open, as a large download from object storage."""

    @contextmanager
    def open(self, file_id: str) -> Iterator[IO[bytes]]:
        time.sleep(OPEN_S)
        with super().open(file_id) as content:
            yield content


def _batch_of_one_malformed_line() -> Batch:
    team = account_actions.create_team("Acme")
    now = datetime.now(UTC)
    batch = Batch.objects.create(
        id=f"batch_{secrets.token_hex(12)}",
        team=team,
        api_key_id="k1",
        endpoint="/v1/chat/completions",
        input_file_id=f"file-{secrets.token_hex(12)}",
        status=Batch.Status.IN_PROGRESS,
        total=1,
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )
    file_storage().save(batch.input_file_id, io.BytesIO(b"not a json line\n"))
    return batch


def claimed_while_it_runs(batch: Batch) -> Batch | None:
    """Run the batch as runner-1 and, OPEN_S - 0.5 s in (long past BATCH_RUNNER_STALE_S,
    still in its slow start), try to claim it as runner-2, as the sweep would."""
    running = threading.Thread(target=asyncio.run, args=(run_batch(batch.id, "runner-1"),))
    try:
        running.start()
        time.sleep(OPEN_S - 0.5)
        taken_over = progress.claim(batch.id, "runner-2")
        running.join(timeout=30)
    finally:
        file_storage.cache_clear()
    return taken_over


def test_a_runner_slow_to_open_its_input_keeps_its_hold(settings: Any, tmp_path: Path) -> None:
    settings.BATCH_FILE_STORAGE = f"{__name__}.SlowToOpen"
    settings.BATCH_FILE_DIR = str(tmp_path)
    settings.BATCH_RUNNER_STALE_S = STALE_S
    file_storage.cache_clear()
    batch = _batch_of_one_malformed_line()
    taken_over = claimed_while_it_runs(batch)
    assert taken_over is None, "the sweep could hand the batch to a second runner"
    ended = Batch.objects.get(id=batch.id)
    assert ended.status == Batch.Status.COMPLETED and ended.failed == 1  # the malformed line


def test_a_runner_slow_to_read_what_was_billed_keeps_its_hold(
    settings: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Reading what earlier runners billed moves the usage stream into the ledger first,
    which takes seconds after an outage; the hold's renewals do not wait behind it."""
    settings.BATCH_FILE_DIR = str(tmp_path)
    settings.BATCH_RUNNER_STALE_S = STALE_S
    file_storage.cache_clear()
    billed_lines = progress.billed_lines

    def slow_billed_lines(batch_id: str) -> dict[int, str]:
        time.sleep(OPEN_S)
        return billed_lines(batch_id)

    monkeypatch.setattr(progress, "billed_lines", slow_billed_lines)
    batch = _batch_of_one_malformed_line()
    taken_over = claimed_while_it_runs(batch)
    assert taken_over is None, "the sweep could hand the batch to a second runner"
    assert Batch.objects.get(id=batch.id).status == Batch.Status.COMPLETED
