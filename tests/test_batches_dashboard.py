"""The dashboard's view of the Batch API: the Batches page and the Fleet page's batch
throughput, over rows written directly (no runner)."""

import secrets
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from gateway.accounts import actions as account_actions
from gateway.accounts.models import Team
from gateway.batches.models import Batch, BatchLine
from gateway.dashboard import batch_selectors
from tests.staff import tuning_staff

pytestmark = [pytest.mark.unit, pytest.mark.django_db]


@pytest.fixture
def staff_client() -> Client:
    client = Client()
    client.force_login(tuning_staff())
    return client


def make_batch(team: Team, created_at: datetime, **fields: object) -> Batch:
    values: dict[str, object] = {
        "api_key_id": "k1",
        "endpoint": "/v1/chat/completions",
        "input_file_id": f"file-{secrets.token_hex(12)}",
        "status": Batch.Status.IN_PROGRESS,
        "total": 0,
        **fields,
    }
    return Batch.objects.create(
        id=f"batch_{secrets.token_hex(12)}",
        team=team,
        created_at=created_at,
        expires_at=created_at + timedelta(hours=24),
        **values,
    )


def finish_lines(batch: Batch, finished_at: list[datetime], first: int = 1) -> None:
    BatchLine.objects.bulk_create(
        BatchLine(
            batch=batch,
            line_number=first + n,
            custom_id=f"req-{first + n}",
            request_id=f"r-{batch.id}-{first + n}",
            status_code=200,
            finished_at=at,
        )
        for n, at in enumerate(finished_at)
    )


@pytest.mark.parametrize("page", ["batches", "fleet"])
def test_only_staff_see_the_batch_pages(page: str) -> None:
    url = reverse(f"dashboard:{page}")
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    member = Client()
    member.force_login(get_user_model().objects.create_user("ann"))
    refused = member.get(url)
    assert refused.status_code == 302 and refused["Location"].startswith("/admin/login/")


def test_the_batches_page_lists_batches_newest_first_with_progress_and_cost(
    staff_client: Client,
) -> None:
    acme = account_actions.create_team("Acme")
    now = timezone.now()
    running = make_batch(
        acme,
        now - timedelta(minutes=90),
        total=200,
        completed=120,
        failed=30,
        prompt_tokens=10_000,
        completion_tokens=2_345,
        cost_micros=1_234_567,
    )
    done = make_batch(
        acme,
        now - timedelta(hours=5),
        status=Batch.Status.COMPLETED,
        total=10,
        completed=10,
        cost_micros=5_000,
        completed_at=now - timedelta(hours=5) + timedelta(minutes=42, seconds=7),
    )
    response = staff_client.get(reverse("dashboard:batches"))
    assert response.status_code == 200
    page = response.content.decode()
    assert page.index(running.id) < page.index(done.id)  # newest first
    row = page[page.index(f'<tr id="{running.id}">') :].split("</tr>")[0]
    assert "150/200" in row and "30 failed" in row and "75.0%" in row
    assert '<progress value="150" max="200">' in row
    assert "12345" in row  # prompt + completion tokens
    assert "$1.23" in row  # cost_micros in USD, as the Costs page shows money
    assert "running 1h 30m" in row
    done_row = page[page.index(f'<tr id="{done.id}">') :].split("</tr>")[0]
    assert "10/10" in done_row and "100.0%" in done_row and "$0.0050" in done_row
    assert "42m 07s" in done_row and "running" not in done_row
    assert (
        reverse("dashboard:batches")
        in staff_client.get(reverse("dashboard:overview")).content.decode()
    )


def test_the_team_filter_shows_only_that_teams_batches(staff_client: Client) -> None:
    acme, globex = account_actions.create_team("Acme"), account_actions.create_team("Globex")
    now = timezone.now()
    ours = make_batch(acme, now - timedelta(minutes=5))
    theirs = make_batch(globex, now - timedelta(minutes=3))
    page = staff_client.get(reverse("dashboard:batches"), {"team": acme.pk}).content.decode()
    assert ours.id in page and theirs.id not in page
    assert f'<option value="{acme.pk}" selected>Acme</option>' in page
    every = staff_client.get(reverse("dashboard:batches")).content.decode()
    assert ours.id in every and theirs.id in every


def test_the_page_shows_at_most_the_latest_200(staff_client: Client) -> None:
    acme = account_actions.create_team("Acme")
    start = datetime(2026, 3, 14, 12, tzinfo=UTC)
    batches = [make_batch(acme, start + timedelta(seconds=n)) for n in range(201)]
    page = staff_client.get(reverse("dashboard:batches")).content.decode()
    assert page.count('<tr id="batch_') == 200
    assert batches[0].id not in page and batches[-1].id in page
    assert "showing the latest 200" in page


def test_the_fleet_page_shows_batch_lines_per_minute(staff_client: Client) -> None:
    acme = account_actions.create_team("Acme")
    now = timezone.now()
    running = make_batch(acme, now - timedelta(hours=1), total=100)
    make_batch(acme, now - timedelta(minutes=1), status=Batch.Status.VALIDATING)
    # 30 lines in the window, 5 before it.
    finish_lines(running, [now - timedelta(minutes=20)] * 5)
    finish_lines(running, [now - timedelta(minutes=10)] * 20, first=6)
    # A batch that finished within the window counts its recent lines too; one that
    # finished long ago has none in it.
    recent = make_batch(
        acme,
        now - timedelta(hours=2),
        status=Batch.Status.COMPLETED,
        completed_at=now - timedelta(minutes=2),
    )
    finish_lines(recent, [now - timedelta(minutes=3)] * 10)
    old = make_batch(
        acme,
        now - timedelta(days=2),
        status=Batch.Status.COMPLETED,
        completed_at=now - timedelta(days=1),
    )
    finish_lines(old, [now - timedelta(days=1)] * 7)

    throughput = batch_selectors.batch_throughput(now)
    assert throughput.lines == 30 and throughput.lines_per_minute == pytest.approx(2.0)
    assert throughput.in_progress == 1 and throughput.active["validating"] == 1

    page = staff_client.get(reverse("dashboard:fleet")).content.decode()
    assert '<b id="batch-lines-per-minute">2.0</b>30 in the last 15 min' in page
    assert '<b id="batches-in-progress">1</b>1 validating' in page


def test_durations_read_as_hours_minutes_or_seconds() -> None:
    assert batch_selectors.format_duration(timedelta(seconds=9)) == "9s"
    assert batch_selectors.format_duration(timedelta(minutes=3, seconds=4)) == "3m 04s"
    assert batch_selectors.format_duration(timedelta(hours=26, minutes=5)) == "26h 05m"
