"""The platform default quota policy (issue 14): a team without a policy of its own follows
it, every chat completion carries OpenAI's x-ratelimit-* headers, and an admin edit of the
default reaches running gateways within about a second (docs/accounts.md, "Quotas")."""

import re
import time
from typing import Any

import openai
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from gateway.accounts import actions
from gateway.accounts.models import DefaultQuotaPolicy, QuotaPolicy, Team
from gateway.accounts.quotas import RateLimitState
from gateway.accounts.records import effective_limits, limits_for_team, team_limits
from gateway.serving.errors import rate_limit_headers
from tests.conftest import MESSAGES
from tests.staff import EVERY_TEAM_ACTION, staff_user
from tests.waiting import wait_until

RATE_LIMIT_HEADERS = [
    f"x-ratelimit-{what}-{kind}"
    for kind in ("requests", "tokens")
    for what in ("limit", "remaining", "reset")
]
# OpenAI's reset format (Go durations): 20ms, 1.5s, 59.999s, 1m0s.
DURATION = re.compile(r"^(\d+h)?(\d+m)?(\d+(\.\d+)?s|\d+ms)$")
DEFAULT_PAGE = "/admin/accounts/defaultquotapolicy/"


def new_team_client(base_url: str, name: str = "Newco") -> tuple[Team, openai.OpenAI]:
    """A team created with no limits, and an OpenAI client with one of its keys."""
    team = actions.create_team(name)
    key = actions.issue_api_key(team).plaintext
    return team, openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0)


def ask(client: openai.OpenAI, **options: Any) -> Any:
    return client.chat.completions.with_raw_response.create(
        model="small-model", messages=MESSAGES, max_tokens=2, **options
    )


def admitted_rpm(team: Team) -> int | None:
    """The team's requests per minute as admission reads them (through Redis)."""
    team_limits.clear_local()
    return async_to_sync(limits_for_team)(team.pk).requests_per_minute


def staff(username: str, *permissions: str) -> User:
    user: User = get_user_model().objects.create_user(username, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=permissions))
    return user


def form_of(policy: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A policy's fields as an admin form posts them (empty: no limit)."""
    return {
        f"{prefix}{name}": "" if value is None else str(value) for name, value in policy.items()
    }


# Which teams follow the default, and how each way of creating a team gets there.


@pytest.mark.unit
@pytest.mark.django_db
def test_the_default_starts_from_the_settings_and_applies_to_a_team_created_without_limits(
    settings,
):
    settings.DEFAULT_REQUESTS_PER_MINUTE = 7
    settings.DEFAULT_TOKENS_PER_MINUTE = 7_000
    settings.DEFAULT_TOKENS_PER_MONTH = 70_000
    settings.DEFAULT_MAX_TOKENS_CAP = 700
    team = actions.create_team("Newco")
    call_command("create_team", "Otherco")
    for created in (team, Team.objects.get(name="Otherco")):
        assert not QuotaPolicy.objects.filter(team=created).exists()
        limits = effective_limits(created.pk)
        assert (limits.requests_per_minute, limits.tokens_per_minute) == (7, 7_000)
        assert (limits.tokens_per_month, limits.max_tokens_cap) == (70_000, 700)
    settings.DEFAULT_REQUESTS_PER_MINUTE = 8  # the settings only seed; the row is the truth
    assert effective_limits(team.pk).requests_per_minute == 7


@pytest.mark.unit
@pytest.mark.django_db
def test_limits_given_at_creation_make_an_own_policy_with_the_rest_from_the_default():
    DefaultQuotaPolicy.load()
    DefaultQuotaPolicy.objects.update(requests_per_minute=10, tokens_per_month=1_000)
    team = actions.create_team("Acme", requests_per_minute=100)
    own = QuotaPolicy.objects.get(team=team)
    assert (own.requests_per_minute, own.tokens_per_month) == (100, 1_000)
    call_command("create_team", "Wide", "--unlimited", "--rpm", "5")
    wide = effective_limits(Team.objects.get(name="Wide").pk)
    assert wide.requests_per_minute == 5
    assert (wide.tokens_per_minute, wide.tokens_per_month, wide.max_tokens_cap) == (None,) * 3
    unlimited = effective_limits(actions.create_team("Fuzz", **actions.NO_LIMITS).pk)
    assert (unlimited.requests_per_minute, unlimited.tokens_per_minute) == (None, None)


@pytest.mark.unit
@pytest.mark.django_db
def test_the_management_api_shows_a_new_team_on_the_default_without_giving_it_a_policy():
    team = actions.create_team("Newco")
    client = APIClient()
    client.force_authenticate(staff_user("ops", *EVERY_TEAM_ACTION))
    body = client.get("/api/v1/teams/newco/quota/").json()
    assert body["source"] == "default"
    assert body["requests_per_minute"] == DefaultQuotaPolicy.load().requests_per_minute
    assert not QuotaPolicy.objects.filter(team=team).exists()


@pytest.mark.live
@pytest.mark.django_db
def test_the_management_api_gives_a_team_its_own_policy_and_takes_it_back():
    actions.update_default_quota(requests_per_minute=10, tokens_per_minute=1_000)
    team = actions.create_team("Newco")
    client = APIClient()
    client.force_authenticate(staff_user("ops", *EVERY_TEAM_ACTION))
    usage = client.get("/api/v1/teams/newco/usage/").json()["limits"]
    assert {item["limit"]: item["limit_value"] for item in usage}["requests_per_minute"] == 10
    changed = client.patch("/api/v1/teams/newco/quota/", {"requests_per_minute": 50}, "json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["source"] == "team"
    assert (changed.json()["requests_per_minute"], changed.json()["tokens_per_minute"]) == (
        50,
        1_000,
    )
    assert admitted_rpm(team) == 50
    dropped = client.delete("/api/v1/teams/newco/quota/")
    assert dropped.json()["source"] == "default"
    assert dropped.json()["requests_per_minute"] == 10
    assert not QuotaPolicy.objects.filter(team=team).exists()
    assert admitted_rpm(team) == 10


@pytest.mark.live
@pytest.mark.django_db
def test_a_team_added_in_the_admin_follows_the_default_unless_its_policy_is_changed():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root"))
    default = actions.default_policy_values()
    page = client.get("/admin/accounts/team/add/").content.decode()
    shown = f'value="{default["requests_per_minute"]}"'
    assert shown in page  # the default, as what the team's own policy would start from
    assert shown in client.get("/admin/accounts/quotapolicy/add/").content.decode()
    for name, requests_per_minute in (("Plain", default["requests_per_minute"]), ("Own", 5)):
        form = {
            "name": name,
            "slug": name.lower(),
            "created_at_0": "2026-01-01",
            "created_at_1": "00:00:00",
            "quota-TOTAL_FORMS": "1",
            "quota-INITIAL_FORMS": "0",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            **form_of({**default, "requests_per_minute": requests_per_minute}, "quota-0-"),
        }
        response = client.post("/admin/accounts/team/add/", form)
        assert response.status_code == 302, response.content.decode()[:3000]
    assert not QuotaPolicy.objects.filter(team__name="Plain").exists()
    assert QuotaPolicy.objects.get(team__name="Own").requests_per_minute == 5


# The admin's singleton page.


@pytest.mark.unit
@pytest.mark.django_db
def test_the_default_policy_is_one_admin_page_for_staff_with_the_permission_only():
    allowed = Client()
    allowed.force_login(staff("ops", "view_defaultquotapolicy", "change_defaultquotapolicy"))
    listed = allowed.get(DEFAULT_PAGE)
    assert listed.status_code == 302 and listed["Location"] == f"{DEFAULT_PAGE}1/change/"
    assert allowed.get(f"{DEFAULT_PAGE}1/change/").status_code == 200
    assert allowed.get(f"{DEFAULT_PAGE}add/").status_code == 403
    assert allowed.get(f"{DEFAULT_PAGE}1/delete/").status_code == 403
    refused = Client()
    refused.force_login(staff("intern"))
    assert refused.get(DEFAULT_PAGE).status_code == 403
    assert refused.get(f"{DEFAULT_PAGE}1/change/").status_code == 403
    assert refused.post(f"{DEFAULT_PAGE}1/change/", {"requests_per_minute": ""}).status_code == 403
    assert DefaultQuotaPolicy.objects.get().requests_per_minute is not None
    assert DefaultQuotaPolicy.objects.count() == 1


# What clients see.


@pytest.mark.unit
def test_rate_limit_headers_use_openais_durations_and_omit_a_kind_without_a_limit():
    state = RateLimitState(
        limit_requests=60,
        remaining_requests=59,
        reset_requests_s=60.0,
        limit_tokens=None,
        remaining_tokens=None,
        reset_tokens_s=0.25,
    )
    assert rate_limit_headers(state) == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "59",
        "x-ratelimit-reset-requests": "1m0s",
    }


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_team_created_without_limits_gets_the_default_rpm_and_the_rate_limit_headers(
    platform,
):
    actions.update_default_quota(requests_per_minute=2, tokens_per_minute=50_000)
    _, client = new_team_client(platform["gateway"].url)

    first = ask(client)
    assert all(name in first.headers for name in RATE_LIMIT_HEADERS), dict(first.headers)
    assert first.headers["x-ratelimit-limit-requests"] == "2"
    assert first.headers["x-ratelimit-remaining-requests"] == "1"
    assert first.headers["x-ratelimit-limit-tokens"] == "50000"
    assert int(first.headers["x-ratelimit-remaining-tokens"]) < 50_000
    assert DURATION.match(first.headers["x-ratelimit-reset-requests"])
    assert DURATION.match(first.headers["x-ratelimit-reset-tokens"])

    streamed = ask(client, stream=True)
    assert streamed.headers["x-ratelimit-remaining-requests"] == "0"
    assert all(name in streamed.headers for name in RATE_LIMIT_HEADERS)
    for _chunk in streamed.parse():
        pass

    with pytest.raises(openai.RateLimitError) as refused:
        ask(client)
    assert refused.value.body["code"] == "requests_per_minute"  # type: ignore[index]
    headers = refused.value.response.headers
    assert all(name in headers for name in RATE_LIMIT_HEADERS), dict(headers)
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert 1 <= int(headers["retry-after"]) <= 60


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_an_admin_edit_of_the_default_reaches_a_running_gateway_within_two_seconds(platform):
    actions.update_default_quota(requests_per_minute=500, tokens_per_minute=500_000)
    _, client = new_team_client(platform["gateway"].url)
    assert ask(client).headers["x-ratelimit-limit-requests"] == "500"  # cached by the gateway

    admin = Client()
    admin.force_login(staff("ops", "view_defaultquotapolicy", "change_defaultquotapolicy"))
    edited = {**actions.default_policy_values(), "requests_per_minute": 700}
    response = admin.post(f"{DEFAULT_PAGE}1/change/", form_of(edited))
    assert response.status_code == 302, response.content.decode()[:3000]
    edited_at = time.monotonic()

    wait_until(
        lambda: ask(client).headers["x-ratelimit-limit-requests"] == "700",
        2.0,
        "the gateway to apply the edited default",
    )
    assert time.monotonic() - edited_at < 2.5


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_team_with_its_own_policy_is_unaffected_by_the_default(platform):
    _, follower = new_team_client(platform["gateway"].url)
    own = platform["client"]  # team Acme: its own policy, 100 requests per minute
    actions.update_default_quota(requests_per_minute=3)
    wait_until(
        lambda: ask(follower).headers["x-ratelimit-limit-requests"] == "3",
        2.0,
        "the gateway to apply the edited default",
    )
    assert ask(own).headers["x-ratelimit-limit-requests"] == "100"
    assert QuotaPolicy.objects.get(team=platform["team"]).requests_per_minute == 100


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_request_refused_after_admission_still_carries_the_rate_limit_headers(platform):
    """No worker for the model: admitted (a request counted), then refused with 503; the
    client still learns where its quota stands."""
    _, client = new_team_client(platform["gateway"].url)
    with pytest.raises(openai.InternalServerError) as refused:
        client.chat.completions.create(
            model="model-without-workers", messages=MESSAGES, max_tokens=2
        )
    assert refused.value.status_code == 503
    headers = refused.value.response.headers
    assert all(name in headers for name in RATE_LIMIT_HEADERS), dict(headers)
