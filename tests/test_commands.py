from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command

from gateway.accounts.authentication import AuthenticationFailed, authenticate_key
from gateway.accounts.models import ApiKey, QuotaPolicy, Team
from gateway.accounts.records import key_records

pytestmark = pytest.mark.django_db
authenticate = async_to_sync(authenticate_key)


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.unit
def test_create_team_stores_its_limits():
    run("create_team", "Acme", "--rpm", "60", "--tpm", "90000", "--monthly-tokens", "5000000")
    policy = QuotaPolicy.objects.get(team__name="Acme")
    assert (policy.requests_per_minute, policy.tokens_per_minute, policy.tokens_per_month) == (
        60,
        90000,
        5000000,
    )


@pytest.mark.unit
@pytest.mark.parametrize("flag", ["--rpm", "--tpm", "--monthly-tokens"])
def test_create_team_refuses_negative_limits_and_creates_nothing(flag):
    with pytest.raises(CommandError, match="zero or more"):
        run("create_team", "Acme", flag, "-5")
    assert not Team.objects.exists()


@pytest.mark.unit
def test_create_team_refuses_a_duplicate_name():
    run("create_team", "Acme")
    with pytest.raises(CommandError, match="already exists"):
        run("create_team", "Acme")
    assert Team.objects.count() == 1


@pytest.mark.live
def test_create_api_key_prints_a_working_key_as_its_last_line():
    run("create_team", "Acme")
    output = run("create_api_key", "Acme", "--name", "ci", "--expires-in-days", "30")
    key = output.strip().splitlines()[-1]
    assert key.startswith("sk-sluice-")
    assert authenticate(key, "inference").team_id == Team.objects.get(name="Acme").pk
    assert ApiKey.objects.get().name == "ci"


@pytest.mark.unit
def test_create_api_key_for_an_unknown_team_is_a_clear_error():
    with pytest.raises(CommandError, match="No team named 'Nobody'"):
        run("create_api_key", "Nobody")
    assert not ApiKey.objects.exists()


@pytest.mark.unit
def test_create_api_key_refuses_zero_days():
    run("create_team", "Acme")
    with pytest.raises(CommandError, match="expires_in_days"):
        run("create_api_key", "Acme", "--expires-in-days", "0")
    assert not ApiKey.objects.exists()


@pytest.mark.live
def test_revoke_api_key_stops_the_key():
    run("create_team", "Acme")
    key = run("create_api_key", "Acme").strip().splitlines()[-1]
    lookup_id = key.split("-")[2]
    assert "is revoked" in run("revoke_api_key", lookup_id)
    key_records.clear_local()
    with pytest.raises(AuthenticationFailed, match="revoked"):
        authenticate(key, "inference")
    assert "already revoked" in run("revoke_api_key", lookup_id)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("key_id", "message"),
    [
        ("sk-sluice-abcdefgh-x", "not a key id"),
        ("ABCDEFGH", "not a key id"),
        ("zzzz9999", "No API"),
    ],
)
def test_revoke_api_key_explains_bad_ids(key_id, message):
    with pytest.raises(CommandError, match=message):
        run("revoke_api_key", key_id)
