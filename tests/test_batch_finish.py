"""Ending a batch: its output file is uploaded before the batch's row is locked, and a
runner that lost its hold during the upload keeps nothing."""

import secrets
import threading
from datetime import UTC, datetime, timedelta
from typing import IO

import pytest
from django.db import connection, connections, transaction
from django.db.utils import OperationalError
from django.utils import timezone

from gateway.accounts import actions as account_actions
from gateway.batches import progress
from gateway.batches.models import Batch, BatchFile, BatchLine
from gateway.batches.storage import LocalFileStorage, file_storage

pytestmark = [pytest.mark.unit, pytest.mark.django_db(transaction=True)]
RUNNER = "runner-1"


class ProbingStorage(LocalFileStorage):
    """Local files; on each save, asks from another database connection whether the
    batches being saved for can be locked at once, and can hand the batch to another
    runner meanwhile (what a runner's lost heartbeat looks like)."""

    locked_during_save: list[bool] = []
    held_until: list[datetime] = []
    take_over = False

    def save(self, file_id: str, content: IO[bytes]) -> None:
        batch_id = Batch.objects.values_list("id", flat=True).get()
        found: list[bool] = []
        thread = threading.Thread(target=self._probe, args=(batch_id, found))
        thread.start()
        thread.join()
        self.locked_during_save.extend(found)
        super().save(file_id, content)

    def _probe(self, batch_id: str, found: list[bool]) -> None:
        try:
            with transaction.atomic():
                try:
                    Batch.objects.select_for_update(nowait=True).get(id=batch_id)
                    found.append(False)
                except OperationalError:  # Postgres: could not obtain lock
                    found.append(True)
                    raise
                held = Batch.objects.values_list("heartbeat_at", flat=True).get(id=batch_id)
                assert held is not None
                self.held_until.append(held)
                if self.take_over:
                    Batch.objects.filter(id=batch_id).update(runner="runner-2")
        except OperationalError:
            pass
        finally:
            connections.close_all()


@pytest.fixture
def probing_storage(settings, tmp_path):
    settings.BATCH_FILE_STORAGE = f"{__name__}.ProbingStorage"
    settings.BATCH_FILE_DIR = str(tmp_path)
    file_storage.cache_clear()
    ProbingStorage.locked_during_save = []
    ProbingStorage.held_until = []
    ProbingStorage.take_over = False
    yield ProbingStorage
    file_storage.cache_clear()


def _running_batch_with_one_answer() -> Batch:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's (SQLite has none): DATABASE_URL runs this")
    team = account_actions.create_team("Acme")
    now = datetime(2026, 3, 14, 12, tzinfo=UTC)
    batch = Batch.objects.create(
        id=f"batch_{secrets.token_hex(12)}",
        team=team,
        api_key_id="k1",
        endpoint="/v1/chat/completions",
        input_file_id=f"file-{secrets.token_hex(12)}",
        status=Batch.Status.IN_PROGRESS,
        runner=RUNNER,
        total=1,
        created_at=now,
        expires_at=now + timedelta(hours=24),
    )
    BatchLine.objects.create(
        batch=batch,
        line_number=1,
        custom_id="one",
        request_id="batch_req_1",
        status_code=200,
        body={"id": "chatcmpl-1", "object": "chat.completion", "choices": []},
        finished_at=now,
    )
    return batch


def test_the_output_file_is_uploaded_while_the_batch_row_is_not_locked(probing_storage):
    batch = _running_batch_with_one_answer()
    finished = progress.finish(batch.id, RUNNER, {}, Batch.Status.COMPLETED)
    assert finished is not None and finished.status == Batch.Status.COMPLETED
    assert probing_storage.locked_during_save == [False]
    # The heartbeat has stopped; the hold is renewed for the upload, minutes ahead.
    [held_until] = probing_storage.held_until
    assert held_until > timezone.now() + timedelta(minutes=5)
    output = BatchFile.objects.get(id=finished.output_file_id)
    with file_storage().open(output.id) as content:
        assert b'"custom_id":"one"' in content.read()


def test_a_runner_that_lost_its_hold_during_the_upload_keeps_no_file(probing_storage, tmp_path):
    batch = _running_batch_with_one_answer()
    probing_storage.take_over = True
    assert progress.finish(batch.id, RUNNER, {}, Batch.Status.COMPLETED) is None
    batch.refresh_from_db()
    assert (batch.status, batch.runner, batch.output_file_id) == (
        Batch.Status.FINALIZING,
        "runner-2",
        "",
    )
    assert not BatchFile.objects.exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []
