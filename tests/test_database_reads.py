"""foundation.db.database_read: the connection upkeep the lean API handler relies on."""

import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from foundation.db import database_read
from gateway.accounts.models import Team

pytestmark = pytest.mark.unit


def count_teams() -> int:
    return Team.objects.count()


@pytest.mark.django_db(transaction=True)
def test_a_read_replaces_a_connection_past_its_age():
    Team.objects.create(name="Acme", slug="acme")
    stale = connection.connection
    connection.close_at = time.monotonic() - 1  # as if CONN_MAX_AGE had run out
    assert async_to_sync(database_read(count_teams))() == 1
    assert connection.connection is not stale


@pytest.mark.django_db
def test_a_read_inside_a_transaction_keeps_the_transaction():
    Team.objects.create(name="Acme", slug="acme")  # not committed yet
    connection.close_at = time.monotonic() - 1
    assert async_to_sync(database_read(count_teams))() == 1
    assert connection.in_atomic_block
