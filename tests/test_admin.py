import re

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.test import Client

from gateway.accounts import actions
from gateway.accounts.api.views import VIEW_KEYS
from gateway.accounts.authentication import authenticate_key
from gateway.accounts.models import ApiKey
from tests.staff import staff_user

pytestmark = pytest.mark.django_db
MODELS = ["team", "membership", "apikey", "quotapolicy"]


@pytest.fixture
def staff_client():
    user = get_user_model().objects.create_superuser("root", password="pw-not-used-1234")
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.unit
@pytest.mark.parametrize("model", MODELS)
def test_every_model_has_an_admin_page_for_staff_only(staff_client, model):
    actions.create_team("Acme")
    assert staff_client.get(f"/admin/accounts/{model}/").status_code == 200
    anonymous = Client().get(f"/admin/accounts/{model}/")
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]


@pytest.mark.live
def test_adding_a_key_in_the_admin_shows_it_once_and_it_works(staff_client):
    team = actions.create_team("Acme")
    response = staff_client.post(
        "/admin/accounts/apikey/add/",
        {
            "team": team.pk,
            "name": "from admin",
            "scopes": '["inference"]',
            "allowed_models": "[]",
            "requests_per_minute": "",
            "expires_at_0": "",
            "expires_at_1": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    shown = re.search(r"sk-sluice-[a-z0-9]{8}-[A-Za-z0-9]{40}", response.content.decode())
    assert shown is not None, response.content.decode()[:2000]
    assert async_to_sync(authenticate_key)(shown.group(0), "inference").team_id == team.pk
    created_by = ApiKey.objects.get().created_by
    assert created_by is not None and created_by.username == "root"


@pytest.mark.live
def test_a_key_past_the_teams_limit_is_a_form_error_in_the_admin(staff_client, settings):
    settings.MAX_KEYS_PER_TEAM = 1
    team = actions.create_team("Acme")
    actions.issue_api_key(team)
    form = {
        "team": team.pk,
        "name": "one too many",
        "scopes": '["inference"]',
        "allowed_models": "[]",
        "requests_per_minute": "",
        "expires_at_0": "",
        "expires_at_1": "",
    }
    response = staff_client.post("/admin/accounts/apikey/add/", form)
    assert response.status_code == 200 and "revoke unused ones" in response.content.decode()
    assert ApiKey.objects.filter(team=team).count() == 1


@pytest.mark.live
def test_the_admin_revoke_action_revokes(staff_client):
    team = actions.create_team("Acme")
    key = actions.issue_api_key(team).key
    staff_client.post(
        "/admin/accounts/apikey/",
        {"action": "revoke_selected", "_selected_action": [key.pk]},
    )
    key.refresh_from_db()
    assert key.revoked_at is not None


@pytest.mark.live
def test_the_admin_can_revoke_a_key_with_the_keys_made_with_it(staff_client):
    team = actions.create_team("Acme")
    leaked = actions.issue_api_key(team, scopes=("manage", "inference")).key
    made = actions.issue_api_key(team, created_by_key=leaked.lookup_id).key
    other = actions.issue_api_key(team).key
    staff_client.post(
        "/admin/accounts/apikey/",
        {"action": "revoke_selected_and_their_keys", "_selected_action": [leaked.pk]},
    )
    revoked = set(ApiKey.objects.exclude(revoked_at=None).values_list("pk", flat=True))
    assert revoked == {leaked.pk, made.pk} and other.pk not in revoked


@pytest.mark.live
def test_staff_who_may_only_view_keys_cannot_revoke_them():
    team = actions.create_team("Acme")
    key = actions.issue_api_key(team).key
    viewer = Client()
    viewer.force_login(staff_user("viewer", VIEW_KEYS))
    listing = viewer.get("/admin/accounts/apikey/")
    assert listing.status_code == 200 and "revoke_selected" not in listing.content.decode()
    viewer.post(
        "/admin/accounts/apikey/",
        {"action": "revoke_selected", "_selected_action": [key.pk]},
    )
    key.refresh_from_db()
    assert key.revoked_at is None
