"""A team's storage limit holds for uploads at the same moment: each upload is checked
again, with the team's row locked, in the transaction that keeps it. Checked only before
reading the file, uploads on several threads (or gateway processes) each missed the others'
bytes and together passed the limit."""

import io
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections

from gateway.accounts import actions as account_actions
from gateway.accounts.models import Team
from gateway.batches import actions
from gateway.batches.models import BatchFile
from gateway.batches.storage import file_storage
from tests.batch_stack import chat_line, jsonl

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.unit]
UPLOADS = 10


class HeldUntilAllChecked(io.BytesIO):
    """An upload whose first read (after the first check) waits for every other upload to
    reach the same point: the widest race, every time."""

    def __init__(self, content: bytes, everyone: threading.Barrier) -> None:
        super().__init__(content)
        self.everyone = everyone
        self.waited = False

    def read(self, size: int | None = -1, /) -> bytes:
        if not self.waited:
            self.waited = True
            self.everyone.wait(timeout=30)
        return super().read(size)


def test_uploads_at_once_cannot_pass_the_teams_storage_limit_together(
    settings: Any, tmp_path: Path
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's (SQLite has none): DATABASE_URL runs this")
    content = jsonl([chat_line(f"c{n}", "y" * 700) for n in range(40)])
    settings.BATCH_FILE_DIR = str(tmp_path)
    settings.BATCH_FILE_MAX_BYTES = len(content)
    settings.BATCH_TEAM_STORAGE_BYTES = 6 * len(content)
    file_storage.cache_clear()
    team = account_actions.create_team("Acme")
    everyone = threading.Barrier(UPLOADS)

    def upload(n: int) -> str:
        try:
            file = HeldUntilAllChecked(content, everyone)
            mine = Team.objects.get(pk=team.pk)
            return actions.create_file(mine, f"{n}.jsonl", "batch", file, len(content)).id
        except actions.BatchRefused as refused:
            return f"{refused.status} {refused.code}"
        finally:
            connections.close_all()  # this thread's

    try:
        with ThreadPoolExecutor(max_workers=UPLOADS) as pool:
            answers = list(pool.map(upload, range(UPLOADS)))
    finally:
        file_storage.cache_clear()
    kept = [a for a in answers if a.startswith("file-")]
    assert len(kept) == 6, answers
    assert answers.count("413 storage_limit_exceeded") == UPLOADS - 6
    assert sorted(BatchFile.objects.filter(team=team).values_list("id", flat=True)) == sorted(kept)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)  # refused: no bytes left
