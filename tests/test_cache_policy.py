"""Cache policies: per team over a global default over settings, editable by staff only
(admin and management API), shared through Redis so every process sees a change."""

import json
from dataclasses import asdict

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from caching.actions import update_cache_policy
from caching.models import CachePolicy
from caching.policy import cache_policies, default_settings, policy_for_team
from foundation.redis_clients import sync_redis
from gateway.accounts import actions
from gateway.accounts.models import Membership
from tests.staff import EVERY_TEAM_ACTION, staff_user

pytestmark = pytest.mark.django_db(transaction=True)  # publishing happens on commit
effective = async_to_sync(policy_for_team)


@pytest.fixture
def team():
    return actions.create_team("Acme")


def fresh(team_id: int) -> float:
    """The threshold another process would read once its one-second copy has aged out."""
    cache_policies.clear_local()
    return effective(team_id).similarity_threshold


@pytest.mark.live
def test_a_team_policy_overrides_the_global_default_which_overrides_settings(team, settings):
    settings.CACHE_SEMANTIC_THRESHOLD = 0.93
    assert fresh(team.pk) == 0.93
    update_cache_policy(None, similarity_threshold=0.95)
    assert fresh(team.pk) == 0.95
    update_cache_policy(team.pk, similarity_threshold=0.97)
    assert fresh(team.pk) == 0.97
    CachePolicy.objects.filter(team=team).delete()  # e.g. an admin bulk delete
    assert fresh(team.pk) == 0.95


@pytest.mark.live
def test_there_is_only_one_global_default(team):
    update_cache_policy(None, exact_ttl_s=60)
    update_cache_policy(None, exact_ttl_s=120)
    assert CachePolicy.objects.filter(team__isnull=True).count() == 1
    assert effective(team.pk).exact_ttl_s == 120


@pytest.mark.live
def test_only_staff_change_a_policy_and_bad_values_change_nothing(team):
    admin = get_user_model().objects.create_user("alice", password="pw-not-used-1234")
    actions.add_member(team, admin, Membership.Role.ADMIN)
    as_admin = APIClient()
    as_admin.force_authenticate(admin)
    assert as_admin.get("/api/v1/teams/acme/cache/").json()["policy"]["semantic_enabled"]
    body = {"semantic_enabled": False}
    assert as_admin.patch("/api/v1/teams/acme/cache/", body, format="json").status_code == 403

    staff = APIClient()
    staff.force_authenticate(staff_user("ops", *EVERY_TEAM_ACTION))
    for bad in ({"similarity_threshold": 1.5}, {"memory_budget_bytes": 10}, {"exact_ttl_s": 0}):
        assert staff.patch("/api/v1/teams/acme/cache/", bad, format="json").status_code == 400
    assert not CachePolicy.objects.exists()
    changed = staff.patch("/api/v1/teams/acme/cache/", {"similarity_threshold": 0.9}, format="json")
    assert changed.status_code == 200 and changed.json()["policy"]["similarity_threshold"] == 0.9
    assert fresh(team.pk) == 0.9


@pytest.mark.unit
def test_another_teams_admin_cannot_read_a_teams_cache(team):
    other = actions.create_team("Globex")
    admin = get_user_model().objects.create_user("bob", password="pw-not-used-1234")
    actions.add_member(other, admin, Membership.Role.ADMIN)
    client = APIClient()
    client.force_authenticate(admin)
    assert client.get("/api/v1/teams/acme/cache/").status_code == 404


@pytest.mark.live
def test_the_admin_page_is_for_staff_and_a_save_applies(team):
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("root", password="pw-1234-x"))
    assert staff.get("/admin/caching/cachepolicy/").status_code == 200
    anonymous = Client().get("/admin/caching/cachepolicy/")
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    form = {
        "team": team.pk,
        "exact_enabled": "on",
        "semantic_enabled": "on",
        "exact_ttl_s": 60,
        "semantic_ttl_s": 60,
        "sampled_ttl_s": 30,
        "max_age_s": 600,
        "similarity_threshold": 0.96,
        "audit_rate": 0.0,
        "verify_enabled": "on",
        "max_entry_bytes": 1000,
        "memory_budget_bytes": 100_000,
    }
    response = staff.post("/admin/caching/cachepolicy/add/", form)
    assert response.status_code == 302, response.content
    assert fresh(team.pk) == 0.96

    # The row moved to another team: the team it left falls back to the default at once,
    # not when its published record expires.
    other = actions.create_team("Other")
    row = CachePolicy.objects.get(team=team)
    moved = staff.post(f"/admin/caching/cachepolicy/{row.pk}/change/", {**form, "team": other.pk})
    assert moved.status_code == 302, moved.content
    assert fresh(other.pk) == 0.96
    assert fresh(team.pk) == default_settings().similarity_threshold


@pytest.mark.unit
def test_sampled_replies_are_kept_five_minutes_and_deterministic_ones_an_hour(settings):
    """The seed's 5-minute default, for sampled replies where a team turns cache_sampled
    on; deterministic replies keep the caches' longer TTLs (docs/caching.md says why)."""
    settings.CACHE_EXACT_TTL_S = settings.CACHE_SEMANTIC_TTL_S = 3600
    default = default_settings()
    assert default.sampled_ttl_s == CachePolicy().sampled_ttl_s == 300
    sampled = default.for_request(deterministic=False)
    assert (sampled.exact_ttl_s, sampled.semantic_ttl_s) == (300, 300)
    assert sampled.ttl_for(sampled.exact_ttl_s, None) == 300
    assert sampled.ttl_for(sampled.exact_ttl_s, 30) == 30  # x-sluice-cache-ttl still wins
    assert default.for_request(deterministic=True) == default


@pytest.mark.live
def test_a_teams_sampled_ttl_applies_and_records_from_before_it_still_decode(team):
    update_cache_policy(team.pk, cache_sampled=True, sampled_ttl_s=120)
    cache_policies.clear_local()
    sampled = effective(team.pk).for_request(deterministic=False)
    assert (sampled.exact_ttl_s, sampled.semantic_ttl_s) == (120, 120)
    # A record as a gateway of the previous release published it, without the field.
    old = asdict(effective(team.pk))
    del old["sampled_ttl_s"]
    sync_redis().set(cache_policies.redis_key(str(team.pk)), json.dumps(old))
    cache_policies.clear_local()
    assert effective(team.pk).sampled_ttl_s == 300
