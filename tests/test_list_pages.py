"""OpenAI's list pages: a cursor, a limit, newest first or (files) oldest first."""

from datetime import UTC, datetime, timedelta

import pytest

from gateway.accounts import actions
from gateway.batches.models import BatchFile
from gateway.list_pages import BadPage, page

pytestmark = [pytest.mark.unit, pytest.mark.django_db]


@pytest.fixture
def files() -> list[str]:
    team = actions.create_team("Acme")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [f"file-{n}" for n in range(5)]
    for n, file_id in enumerate(ids):
        created = start + timedelta(seconds=n // 2)  # two pairs share a second: ids break ties
        BatchFile.objects.create(
            id=file_id, team=team, purpose="batch", filename="x.jsonl", bytes=1, created_at=created
        )
    return ids


def walk(order: str | None) -> list[str]:
    seen, after, more = [], None, True
    while more:
        found, more = page(BatchFile.objects.all(), after, "2", 100, order=order)
        seen += [f.id for f in found]
        after = found[-1].id
    return seen


def test_pages_walk_every_file_once_newest_first_or_oldest_first_when_asked(files):
    assert walk(None) == walk("desc") == files[::-1]
    assert walk("asc") == files


def test_an_order_other_than_asc_or_desc_is_refused_naming_it(files):
    with pytest.raises(BadPage) as refused:
        page(BatchFile.objects.all(), None, None, 100, order="newest")
    assert refused.value.param == "order"
