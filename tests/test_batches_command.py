"""`manage.py batches list` and `manage.py batches cancel`."""

import secrets
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from gateway.accounts import actions as account_actions
from gateway.accounts.models import Team
from gateway.batches.models import Batch

pytestmark = [pytest.mark.unit, pytest.mark.django_db]
CREATED = datetime(2026, 3, 14, 12, tzinfo=UTC)


def run(*args: str) -> str:
    out = StringIO()
    call_command("batches", *args, stdout=out)
    return out.getvalue()


def make_batch(team: Team, minutes: int = 0, **fields: object) -> Batch:
    created_at = CREATED + timedelta(minutes=minutes)
    values: dict[str, object] = {
        "api_key_id": "k1",
        "endpoint": "/v1/chat/completions",
        "input_file_id": f"file-{secrets.token_hex(12)}",
        "status": Batch.Status.IN_PROGRESS,
        **fields,
    }
    return Batch.objects.create(
        id=f"batch_{secrets.token_hex(12)}",
        team=team,
        created_at=created_at,
        expires_at=created_at + timedelta(hours=24),
        **values,
    )


def test_list_prints_a_table_of_batches_newest_first() -> None:
    acme, globex = account_actions.create_team("Acme"), account_actions.create_team("Globex")
    first = make_batch(
        acme, total=10, completed=6, failed=1, prompt_tokens=300, completion_tokens=45
    )
    second = make_batch(globex, minutes=5, status=Batch.Status.COMPLETED, total=2, completed=2)
    lines = run("list").splitlines()
    assert lines[0].split() == ["id", "team", "status", "progress", "tokens", "created"]
    assert lines[1].startswith(second.id) and lines[2].startswith(first.id)
    assert lines[2].split() == [
        first.id,
        "Acme",
        "in_progress",
        "7/10",
        "(1",
        "failed)",
        "345",
        "2026-03-14",
        "12:00:00",
    ]


def test_list_filters_by_team_name_or_id_and_status_and_limits() -> None:
    acme, globex = account_actions.create_team("Acme"), account_actions.create_team("Globex")
    ours = make_batch(acme)
    done = make_batch(acme, minutes=1, status=Batch.Status.COMPLETED)
    theirs = make_batch(globex, minutes=2)
    by_name = run("list", "--team", "Acme")
    assert ours.id in by_name and done.id in by_name and theirs.id not in by_name
    by_id = run("list", "--team", str(globex.pk))
    assert theirs.id in by_id and ours.id not in by_id
    completed = run("list", "--status", "completed")
    assert done.id in completed and ours.id not in completed and theirs.id not in completed
    newest = run("list", "--limit", "1")
    assert theirs.id in newest and ours.id not in newest and "--limit N" in newest
    assert run("list", "--status", "cancelled").strip() == "No batches."
    with pytest.raises(CommandError, match="No team named 'Nobody'"):
        run("list", "--team", "Nobody")


def test_cancel_moves_an_unfinished_batch_to_cancelling() -> None:
    batch = make_batch(account_actions.create_team("Acme"))
    assert f"Batch {batch.id} of team Acme is now cancelling." in run("cancel", batch.id)
    batch.refresh_from_db()
    assert batch.status == Batch.Status.CANCELLING and batch.cancelling_at is not None
    assert "was already cancelling" in run("cancel", batch.id)


def test_cancel_refuses_a_finished_or_unknown_batch() -> None:
    done = make_batch(account_actions.create_team("Acme"), status=Batch.Status.COMPLETED)
    with pytest.raises(CommandError, match="completed; it cannot be cancelled"):
        run("cancel", done.id)
    done.refresh_from_db()
    assert done.status == Batch.Status.COMPLETED
    with pytest.raises(CommandError, match="No batch with id 'batch_nope'"):
        run("cancel", "batch_nope")
