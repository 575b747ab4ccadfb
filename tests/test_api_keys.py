import hashlib
from datetime import timedelta

import pytest
import redis
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.utils import timezone

from gateway.accounts import actions
from gateway.accounts.authentication import (
    LAST_USED_HASH,
    AuthenticationFailed,
    ScopeDenied,
    authenticate_key,
    check_model_allowed,
)
from gateway.accounts.keys import MalformedKey, new_key, parse_key
from gateway.accounts.models import ApiKey
from gateway.accounts.records import key_records
from gateway.accounts.tasks import flush_api_key_last_used

authenticate = async_to_sync(authenticate_key)


@pytest.fixture
def team(db):
    return actions.create_team("Acme Research", requests_per_minute=100)


@pytest.mark.unit
def test_new_keys_have_the_documented_shape_and_parse_back():
    key = new_key()
    assert key.plaintext.startswith(f"sk-sluice-{key.lookup_id}-")
    parsed = parse_key(key.plaintext)
    assert parsed.lookup_id == key.lookup_id
    assert hashlib.sha256(parsed.secret.encode()).hexdigest() == key.secret_hash
    assert new_key().plaintext != key.plaintext


@pytest.mark.live
def test_only_the_sha256_of_the_secret_is_stored(team):
    issued = actions.issue_api_key(team, name="ci")
    secret = parse_key(issued.plaintext).secret
    row = ApiKey.objects.values().get(pk=issued.key.pk)
    assert row["secret_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert not any(secret in str(value) for value in row.values())


@pytest.mark.unit
@pytest.mark.parametrize(
    "raw",
    [
        "",
        "sk-sluice-",
        "sk-proj-abcdefgh-" + "a" * 40,
        "sk-sluice-ABCDEFGH-" + "a" * 40,
        "sk-sluice-abcdefg-" + "a" * 40,
        "sk-sluice-abcdefgh-" + "a" * 39,
        "sk-sluice-abcdefgh-" + "a" * 41,
        "sk-sluice-abcdefgh-" + "a" * 39 + "!",
        " sk-sluice-abcdefgh-" + "a" * 40,
        "sk-sluice-abcdefgh-" + "é" * 40,
    ],
)
def test_malformed_keys_are_rejected_with_a_clear_message(raw):
    with pytest.raises(MalformedKey, match="API keys look like"):
        parse_key(raw)
    with pytest.raises(AuthenticationFailed, match="Malformed API key"):
        authenticate(raw, "inference")


@pytest.mark.live
def test_a_valid_key_authenticates_to_its_team(team):
    issued = actions.issue_api_key(team)
    record = authenticate(issued.plaintext, "inference")
    assert record.team_id == team.pk
    assert record.lookup_id == issued.key.lookup_id


@pytest.mark.live
def test_a_valid_key_authenticates_from_the_database_when_redis_has_no_record(team, redis_url):
    issued = actions.issue_api_key(team)
    redis.Redis.from_url(redis_url).flushall()
    key_records.clear_local()
    assert authenticate(issued.plaintext, "inference").team_id == team.pk


@pytest.mark.live
def test_the_right_id_with_a_wrong_secret_is_rejected(team):
    issued = actions.issue_api_key(team)
    forged = issued.plaintext[:-1] + ("A" if issued.plaintext[-1] != "A" else "B")
    with pytest.raises(AuthenticationFailed, match="Incorrect API key"):
        authenticate(forged, "inference")


@pytest.mark.live
def test_an_unknown_key_is_rejected(team):
    with pytest.raises(AuthenticationFailed, match="Incorrect API key"):
        authenticate(new_key().plaintext, "inference")


@pytest.mark.live
def test_an_expired_key_is_rejected(team):
    issued = actions.issue_api_key(team, expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(AuthenticationFailed, match="expired"):
        authenticate(issued.plaintext, "inference")


@pytest.mark.live
def test_a_key_with_days_left_is_accepted_and_records_its_expiry(team):
    issued = actions.issue_api_key(team, expires_in_days=30)
    assert issued.key.expires_at is not None
    assert issued.key.expires_at - timezone.now() > timedelta(days=29)
    authenticate(issued.plaintext, "inference")


@pytest.mark.live
def test_a_revoked_key_is_rejected(team):
    issued = actions.issue_api_key(team)
    authenticate(issued.plaintext, "inference")
    actions.revoke_api_key(issued.key)
    key_records.clear_local()
    with pytest.raises(AuthenticationFailed, match="revoked"):
        authenticate(issued.plaintext, "inference")


@pytest.mark.live
def test_a_key_without_the_needed_scope_is_denied(team):
    issued = actions.issue_api_key(team, scopes=("inference",))
    with pytest.raises(ScopeDenied, match="manage"):
        authenticate(issued.plaintext, "manage")
    both = actions.issue_api_key(team, scopes=("inference", "manage"))
    assert authenticate(both.plaintext, "manage").team_id == team.pk


@pytest.mark.live
def test_allowed_models_restrict_a_key_and_empty_means_any(team):
    limited = authenticate(
        actions.issue_api_key(team, allowed_models=("smollm2-135m",)).plaintext, "inference"
    )
    check_model_allowed(limited.allowed_models, "smollm2-135m")
    with pytest.raises(ScopeDenied, match="llama-70b"):
        check_model_allowed(limited.allowed_models, "llama-70b")
    unlimited = authenticate(actions.issue_api_key(team).plaintext, "inference")
    check_model_allowed(unlimited.allowed_models, "any")


@pytest.mark.unit
@pytest.mark.parametrize(
    "kwargs",
    [{"expires_in_days": 0}, {"requests_per_minute": -1}, {"scopes": ()}, {"scopes": ("root",)}],
)
def test_bad_key_options_are_refused_and_create_nothing(team, kwargs):
    with pytest.raises(ValidationError):
        actions.issue_api_key(team, **kwargs)
    assert ApiKey.objects.count() == 0


@pytest.mark.live
def test_last_use_is_noted_once_per_interval_and_written_by_the_task(team, redis_url, settings):
    settings.API_KEY_LAST_USED_INTERVAL_S = 3600
    issued = actions.issue_api_key(team)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    authenticate(issued.plaintext, "inference")
    first = client.hget(LAST_USED_HASH, issued.key.lookup_id)
    assert first is not None
    client.hset(LAST_USED_HASH, issued.key.lookup_id, "1")  # a second use must not overwrite
    authenticate(issued.plaintext, "inference")
    assert client.hget(LAST_USED_HASH, issued.key.lookup_id) == "1"
    client.hset(LAST_USED_HASH, issued.key.lookup_id, first)

    assert flush_api_key_last_used() == 1
    issued.key.refresh_from_db()
    assert issued.key.last_used_at is not None
    assert int(issued.key.last_used_at.timestamp()) == int(first)
    assert flush_api_key_last_used() == 0


@pytest.mark.live
@pytest.mark.django_db
def test_a_deleted_key_stops_working(team, django_capture_on_commit_callbacks):
    issued = actions.issue_api_key(team)
    authenticate(issued.plaintext, "inference")
    with django_capture_on_commit_callbacks(execute=True):
        issued.key.delete()
    key_records.clear_local()
    with pytest.raises(AuthenticationFailed, match="Incorrect API key"):
        authenticate(issued.plaintext, "inference")


@pytest.mark.live
def test_unknown_ids_do_not_grow_the_process_cache_without_bound(team, monkeypatch):
    from foundation import record_cache

    monkeypatch.setattr(record_cache, "LOCAL_CACHE_MAX_ENTRIES", 5)
    for _ in range(20):
        with pytest.raises(AuthenticationFailed):
            authenticate(new_key().plaintext, "inference")
    assert len(key_records._local) <= 5
