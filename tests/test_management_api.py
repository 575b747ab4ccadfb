from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from gateway.accounts import actions
from gateway.accounts.api.views import ADD_KEY, VIEW_KEYS
from gateway.accounts.authentication import AuthenticationFailed, authenticate_key
from gateway.accounts.models import ApiKey, Membership, QuotaPolicy
from gateway.accounts.quotas import AdmissionRequest, admit
from gateway.accounts.records import key_records, limits_for_team, team_limits
from tests.staff import EVERY_TEAM_ACTION, staff_user

pytestmark = pytest.mark.django_db
authenticate = async_to_sync(authenticate_key)


@pytest.fixture
def team():
    # Its own policy: these two limits and no others (not the platform default's).
    return actions.create_team(
        "Acme", **{**actions.NO_LIMITS, "requests_per_minute": 60, "tokens_per_minute": 10_000}
    )


@pytest.fixture
def other_team():
    return actions.create_team("Globex")


def user_with_role(team, role, name="alice"):
    user = get_user_model().objects.create_user(name, password="pw-not-used-1234")
    if role is not None:
        actions.add_member(team, user, role)
    return user


@pytest.fixture
def admin_client(team):
    client = APIClient()
    client.force_authenticate(user_with_role(team, Membership.Role.ADMIN))
    return client


@pytest.mark.live
def test_a_team_admin_creates_a_key_and_sees_it_once(admin_client, team):
    created = admin_client.post(
        "/api/v1/teams/acme/keys/", {"name": "ci", "scopes": ["inference"]}, format="json"
    )
    assert created.status_code == 201, created.content
    plaintext = created.json()["key"]
    assert authenticate(plaintext, "inference").team_id == team.pk
    listed = admin_client.get("/api/v1/teams/acme/keys/").json()
    assert [item["lookup_id"] for item in listed["data"]] == [created.json()["lookup_id"]]
    assert "key" not in listed["data"][0] and "secret_hash" not in listed["data"][0]
    assert plaintext.split("-")[-1] not in str(listed)


@pytest.mark.live
def test_the_key_list_comes_in_pages_newest_first_revoked_keys_included(admin_client, team):
    made = [actions.issue_api_key(team, name=f"k{n}").key for n in range(3)]
    actions.revoke_api_key(made[0])
    first = admin_client.get("/api/v1/teams/acme/keys/?limit=2").json()
    newest = [made[2].lookup_id, made[1].lookup_id]
    assert [item["lookup_id"] for item in first["data"]] == newest
    assert first["has_more"] is True and first["last_id"] == made[1].lookup_id
    rest = admin_client.get(f"/api/v1/teams/acme/keys/?limit=2&after={first['last_id']}").json()
    assert [item["lookup_id"] for item in rest["data"]] == [made[0].lookup_id]
    assert rest["data"][0]["revoked_at"] is not None and rest["has_more"] is False
    # The default page holds them all; a page is never more than 100 keys.
    assert len(admin_client.get("/api/v1/teams/acme/keys/").json()["data"]) == 3
    too_many = admin_client.get("/api/v1/teams/acme/keys/?limit=101")
    assert too_many.status_code == 400 and "limit" in too_many.json()


@pytest.mark.live
def test_a_page_after_another_teams_key_is_refused(admin_client, team, other_team):
    theirs = actions.issue_api_key(other_team, name="theirs").key
    refused = admin_client.get(f"/api/v1/teams/acme/keys/?after={theirs.lookup_id}")
    assert refused.status_code == 400
    assert "no such id" in refused.json()["after"]


@pytest.mark.unit
def test_bad_key_options_are_400_and_create_nothing(admin_client):
    for body in (
        {"scopes": ["root"]},
        {"expires_in_days": 0},
        {"requests_per_minute": -1},
        {"nmae": "typo"},
    ):
        response = admin_client.post("/api/v1/teams/acme/keys/", body, format="json")
        assert response.status_code == 400, body
    assert not ApiKey.objects.exists()


@pytest.mark.live
def test_revoking_through_the_api_stops_the_key(admin_client, team):
    issued = actions.issue_api_key(team)
    response = admin_client.post(f"/api/v1/teams/acme/keys/{issued.key.lookup_id}/revoke/")
    assert response.status_code == 200
    assert response.json()["revoked_at"] is not None
    key_records.clear_local()
    with pytest.raises(AuthenticationFailed, match="revoked"):
        authenticate(issued.plaintext, "inference")


@pytest.mark.unit
def test_a_plain_member_may_not_manage_the_team(team):
    client = APIClient()
    client.force_authenticate(user_with_role(team, Membership.Role.MEMBER))
    assert client.get("/api/v1/teams/acme/keys/").status_code == 403
    assert client.post("/api/v1/teams/acme/keys/", {}, format="json").status_code == 403
    assert not ApiKey.objects.exists()


@pytest.mark.unit
def test_another_teams_admin_cannot_see_the_team(team, other_team):
    client = APIClient()
    client.force_authenticate(user_with_role(other_team, Membership.Role.ADMIN, "bob"))
    assert client.get("/api/v1/teams/acme/keys/").status_code == 404
    assert client.get("/api/v1/teams/globex/keys/").status_code == 200


@pytest.mark.unit
def test_anonymous_requests_are_refused(team):
    assert APIClient().get("/api/v1/teams/acme/keys/").status_code in (401, 403)


@pytest.mark.live
def test_a_manage_key_works_only_for_its_own_team(team, other_team):
    manage = actions.issue_api_key(team, scopes=("manage",)).plaintext
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {manage}")
    assert client.get("/api/v1/teams/acme/quota/").status_code == 200
    assert client.get("/api/v1/teams/globex/quota/").status_code == 404


@pytest.mark.live
def test_an_inference_only_key_cannot_manage(team):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {actions.issue_api_key(team).plaintext}")
    assert client.get("/api/v1/teams/acme/keys/").status_code == 403


@pytest.mark.unit
def test_a_malformed_bearer_key_is_401(team):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer sk-sluice-nope")
    response = client.get("/api/v1/teams/acme/keys/")
    assert response.status_code == 401
    assert "Malformed API key" in response.json()["detail"]


@pytest.mark.unit
def test_session_writes_need_a_csrf_token(team):
    client = APIClient(enforce_csrf_checks=True)
    user_with_role(team, Membership.Role.ADMIN, "carol")
    client.login(username="carol", password="pw-not-used-1234")
    response = client.post("/api/v1/teams/acme/keys/", {"name": "x"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not ApiKey.objects.exists()


@pytest.mark.unit
def test_team_admins_read_but_cannot_change_their_own_quota(admin_client, team):
    assert admin_client.get("/api/v1/teams/acme/quota/").json()["requests_per_minute"] == 60
    response = admin_client.patch(
        "/api/v1/teams/acme/quota/", {"requests_per_minute": None}, format="json"
    )
    assert response.status_code == 403
    assert QuotaPolicy.objects.get(team=team).requests_per_minute == 60


@pytest.fixture
def staff_client():
    client = APIClient()
    ops = staff_user("ops", *EVERY_TEAM_ACTION)
    client.force_authenticate(ops)
    return client


@pytest.mark.live
def test_quota_changes_apply_to_admission_and_bad_values_change_nothing(staff_client, team):
    admin_client = staff_client
    for body in ({"requests_per_minute": -1}, {"max_tokens_cap": 0}, {"tokens_per_mintue": 5}):
        response = admin_client.patch("/api/v1/teams/acme/quota/", body, format="json")
        assert response.status_code == 400, body
    assert QuotaPolicy.objects.get(team=team).requests_per_minute == 60

    response = admin_client.patch(
        "/api/v1/teams/acme/quota/",
        {"requests_per_minute": 5, "budget_per_month_usd": "12.50"},
        format="json",
    )
    assert response.status_code == 200, response.content
    team_limits.clear_local()
    limits = async_to_sync(limits_for_team)(team.pk)
    assert limits.requests_per_minute == 5
    assert limits.budget_per_month_micros == 12_500_000


@pytest.mark.live
def test_usage_reports_what_admission_counted(admin_client, team):
    limits = async_to_sync(limits_for_team)(team.pk)
    for _ in range(3):
        async_to_sync(admit)(limits, AdmissionRequest(team.pk, None, 100, 50))
    body = admin_client.get("/api/v1/teams/acme/usage/").json()
    by_limit = {item["limit"]: item for item in body["limits"]}
    assert by_limit["requests_per_minute"] == {
        "limit": "requests_per_minute",
        "used": 3,
        "limit_value": 60,
        "remaining": 57,
    }
    assert by_limit["tokens_per_minute"]["used"] == 450
    assert by_limit["tokens_per_month"]["limit_value"] is None


@pytest.mark.live
def test_revoking_a_leaked_manage_key_can_revoke_every_key_made_with_it(admin_client, team):
    """A leaked manage key mints a manage key, which mints another: revoking the first with
    `with_keys_it_made=true` revokes all three; keys made otherwise stay."""
    leaked = actions.issue_api_key(team, scopes=("manage", "inference"))
    bystander = actions.issue_api_key(team)
    minted = []
    minter = leaked.plaintext
    for name in ("child", "grandchild"):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {minter}")
        body = {"name": name, "scopes": ["manage", "inference"]}
        made = client.post(f"/api/v1/teams/{team.slug}/keys/", body, format="json")
        assert made.status_code == 201, made.json()
        minter = made.json()["key"]
        minted.append(made.json())
    url = f"/api/v1/teams/acme/keys/{leaked.key.lookup_id}/revoke/"
    assert admin_client.post(f"{url}?with_keys_it_made=maybe").status_code == 400
    response = admin_client.post(f"{url}?with_keys_it_made=true")
    assert response.status_code == 200
    assert sorted(response.json()["also_revoked"]) == sorted(m["lookup_id"] for m in minted)
    key_records.clear_local()
    for plaintext in (leaked.plaintext, *(m["key"] for m in minted)):
        with pytest.raises(AuthenticationFailed, match="revoked"):
            authenticate(plaintext, "inference")
    assert authenticate(bystander.plaintext, "inference").team_id == team.pk


@pytest.mark.live
def test_a_team_holds_at_most_max_keys_per_team_live_keys(admin_client, team, settings):
    """A leaked manage key must not mint keys without bound; a revoked key frees its place."""
    settings.MAX_KEYS_PER_TEAM = 2
    first = actions.issue_api_key(team)
    actions.issue_api_key(team)
    refused = admin_client.post("/api/v1/teams/acme/keys/", {"name": "third"}, format="json")
    assert refused.status_code == 400 and "revoke unused ones" in str(refused.json()["team"])
    assert ApiKey.objects.filter(team=team).count() == 2
    actions.revoke_api_key(first.key)
    made = admin_client.post("/api/v1/teams/acme/keys/", {"name": "third"}, format="json")
    assert made.status_code == 201, made.json()


@pytest.mark.live
def test_a_manage_key_cannot_mint_a_key_broader_than_itself(team):
    """A narrow, short-lived manage key must not turn into a permanent, broad one."""
    creator = actions.issue_api_key(
        team,
        scopes=("manage", "inference"),
        allowed_models=("small-model",),
        expires_in_days=7,
        requests_per_minute=10,
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {creator.plaintext}")
    url = f"/api/v1/teams/{team.slug}/keys/"
    broader: list[tuple[dict[str, Any], str]] = [
        ({"scopes": ["manage", "inference"], "expires_in_days": 30}, "expires_in_days"),
        ({"scopes": ["inference"], "allowed_models": ["other-model"]}, "allowed_models"),
        ({"scopes": ["inference"], "requests_per_minute": 11}, "requests_per_minute"),
    ]
    for body, field in broader:
        response = client.post(url, {"name": "wider", **body}, format="json")
        assert response.status_code == 403, body
        assert field in response.json(), response.json()
    assert ApiKey.objects.filter(name="wider").count() == 0

    minted = client.post(url, {"name": "narrower", "scopes": ["inference"]}, format="json")
    assert minted.status_code == 201, minted.json()
    key = ApiKey.objects.get(name="narrower")
    assert key.allowed_models == ["small-model"] and key.requests_per_minute == 10
    limit = creator.key.expires_at
    assert key.expires_at is not None and limit is not None and key.expires_at <= limit
    assert key.created_by_key == creator.key.lookup_id and key.created_by is None


@pytest.mark.live
def test_a_manage_key_may_not_grant_a_scope_it_lacks(team):
    creator = actions.issue_api_key(team, scopes=("manage",))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {creator.plaintext}")
    response = client.post(
        f"/api/v1/teams/{team.slug}/keys/", {"scopes": ["inference"]}, format="json"
    )
    assert response.status_code == 403 and "scopes" in response.json()


@pytest.mark.live
def test_staff_act_on_a_team_only_with_the_admin_sites_permission_for_the_action(team):
    """A staff account that may only read keys (a dashboard viewer, say) lists them but
    mints none, revokes none and lifts no limit: the same rights the admin site gives."""
    key = actions.issue_api_key(team).key
    viewer = APIClient()
    viewer.force_authenticate(staff_user("viewer", VIEW_KEYS))
    assert viewer.get("/api/v1/teams/acme/keys/").status_code == 200
    minted = viewer.post("/api/v1/teams/acme/keys/", {"scopes": ["manage"]}, format="json")
    assert minted.status_code == 403 and "accounts.add_apikey" in minted.json()["detail"]
    revoked = viewer.post(f"/api/v1/teams/acme/keys/{key.lookup_id}/revoke/")
    assert revoked.status_code == 403
    lifted = viewer.patch("/api/v1/teams/acme/quota/", {"requests_per_minute": None}, "json")
    assert lifted.status_code == 403
    assert viewer.patch("/api/v1/teams/acme/cache/", {"exact_ttl_s": 60}, "json").status_code == 403
    assert ApiKey.objects.count() == 1 and ApiKey.objects.get().revoked_at is None
    assert QuotaPolicy.objects.get(team=team).requests_per_minute == 60

    allowed = APIClient()
    allowed.force_authenticate(staff_user("ops", ADD_KEY))
    assert allowed.post("/api/v1/teams/acme/keys/", {}, format="json").status_code == 201
