"""The staff dashboard: access, rollups, the cost split, tuning with audit and revert."""

import csv
import io
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from caching.policy import cache_policies, policy_for_team
from foundation.redis_clients import sync_redis
from gateway.accounts import actions as account_actions
from gateway.dashboard import actions, costs, histogram, rollup, selectors
from gateway.dashboard.fleet_sampling import record_fleet_sample
from gateway.dashboard.models import (
    FleetSample,
    HourRollup,
    KeyHourRollup,
    MinuteRollup,
    TuningChange,
)
from gateway.dashboard.periods import period
from gateway.usage.models import UsageRecord
from inference import fleet
from scaling.models import AutoscalePolicy
from scaling.routing.queue_depth import QUEUE_KEY
from scaling.routing.queue_depth import field as queue_field
from tests.staff import tuning_staff

NOW = datetime(2026, 3, 14, 12, 30, 20, tzinfo=UTC)
PAGES = ["overview", "costs", "costs_csv", "teams", "fleet", "tuning"]


def cache_form_values(team: Any) -> dict[str, Any]:
    """The cache form's values in force, as a browser posts them (an empty field for None)."""
    values = actions.current_cache_values(team)
    return {name: "" if value is None else value for name, value in values.items()}


@pytest.fixture
def staff_client() -> Client:
    client = Client()
    client.force_login(tuning_staff())
    return client


def record(
    team_id: int, n: int, at: datetime, model: str = "small-model", **fields: object
) -> UsageRecord:
    values: dict[str, object] = {
        "prompt_tokens": 10,
        "completion_tokens": 20,
        "status": "ok",
        "latency_ms": 300,
        "ttft_ms": 80,
        "cost_micros": 30,
        "cache_result": "miss",
        "api_key_id": "k1",
        **fields,
    }
    return UsageRecord.objects.create(
        request_id=f"r-{team_id}-{model}-{n}-{at.timestamp()}",
        team_id=team_id,
        model=model,
        created_at=at,
        **values,
    )


@pytest.mark.unit
@pytest.mark.django_db
@pytest.mark.parametrize("page", PAGES)
def test_only_staff_see_the_dashboard(page: str) -> None:
    url = reverse(f"dashboard:{page}")
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    member = Client()
    member.force_login(get_user_model().objects.create_user("ann"))
    refused = member.get(url)
    assert refused.status_code == 302 and refused["Location"].startswith("/admin/login/")


@pytest.mark.unit
@pytest.mark.django_db
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("name", ["hour", "day", "month"])
def test_every_page_renders_for_staff(staff_client: Client, page: str, name: str) -> None:
    team = account_actions.create_team("Acme")
    fleet.ensure_deployment("small-model", gpu_cost_per_hour=Decimal("2.5"))
    record(team.pk, 1, datetime.now(UTC) - timedelta(minutes=2))
    rollup.refresh()
    response = staff_client.get(reverse(f"dashboard:{page}"), {"period": name})
    assert response.status_code == 200


@pytest.mark.unit
@pytest.mark.django_db
def test_staff_without_the_view_permissions_read_totals_but_no_teams_figures() -> None:
    """Being staff is not reading every team's bill: the pages that name teams take the
    admin site's view permission, and say which one is missing."""
    acme = account_actions.create_team("Acme")
    client = Client()
    client.force_login(get_user_model().objects.create_user("viewer", is_staff=True))
    for page, permission in (
        ("costs", "usage.view_usagerecord"),
        ("costs_csv", "usage.view_usagerecord"),
        ("teams", "usage.view_usagerecord"),
        ("batches", "batches.view_batch"),
    ):
        refused = client.get(reverse(f"dashboard:{page}"))
        assert refused.status_code == 403, page
        assert f"it needs the permission {permission}" in refused.content.decode(), page
    overview = client.get(reverse("dashboard:overview"))
    assert overview.status_code == 200
    assert reverse("dashboard:costs") not in overview.content.decode()  # no dead links
    assert reverse("dashboard:batches") not in overview.content.decode()
    assert client.get(reverse("dashboard:fleet")).status_code == 200
    assert (
        reverse("dashboard:batches") not in client.get(reverse("dashboard:fleet")).content.decode()
    )
    team_change = actions.change_cache_policy(None, acme, {"similarity_threshold": 0.9})
    global_change = actions.change_cache_policy(None, None, {"similarity_threshold": 0.91})
    global_page = client.get(reverse("dashboard:tuning"))  # the global policy
    assert global_page.status_code == 200
    assert reverse("dashboard:revert", args=[global_change.pk]) in global_page.content.decode()
    assert reverse("dashboard:revert", args=[team_change.pk]) not in global_page.content.decode()
    team_policy = client.get(reverse("dashboard:tuning"), {"team": acme.pk})
    assert team_policy.status_code == 403
    assert "needs the permission caching.view_cachepolicy" in team_policy.content.decode()
    admin_index = client.get("/admin/").content.decode()
    assert reverse("dashboard:overview") in admin_index
    assert reverse("dashboard:costs") not in admin_index
    viewer = get_user_model().objects.get(username="viewer")
    viewer.user_permissions.add(Permission.objects.get(codename="view_usagerecord"))
    assert client.get(reverse("dashboard:teams")).status_code == 200
    assert client.get(reverse("dashboard:batches")).status_code == 403


@pytest.mark.unit
@pytest.mark.django_db
def test_the_admin_index_links_to_the_dashboard(staff_client: Client) -> None:
    get_user_model().objects.filter(username="ops").update(is_superuser=True)
    assert reverse("dashboard:costs") in staff_client.get("/admin/").content.decode()


@pytest.mark.unit
@pytest.mark.django_db
def test_rollups_are_idempotent_and_count_late_ledger_rows() -> None:
    team = account_actions.create_team("Acme")
    minute = NOW.replace(second=0) - timedelta(minutes=3)
    for n in range(3):
        record(team.pk, n, minute + timedelta(seconds=n), latency_ms=100 * (n + 1))
    record(
        team.pk,
        9,
        minute,
        status="failed",
        cache_result="hit-exact",
        prompt_tokens=0,
        completion_tokens=0,
    )
    rollup.refresh(NOW)
    rollup.refresh(NOW)
    row = MinuteRollup.objects.get(bucket=minute)
    assert (row.requests, row.errors, row.hits_exact, row.misses) == (4, 1, 1, 3)
    assert row.prompt_tokens + row.completion_tokens == 90
    record(team.pk, 10, minute + timedelta(seconds=30))  # arrives late, within the look-back
    rollup.refresh(NOW)
    assert MinuteRollup.objects.get(bucket=minute).requests == 5
    assert HourRollup.objects.get(bucket=NOW.replace(minute=0, second=0)).requests == 5
    assert KeyHourRollup.objects.get().requests == 5
    rollup.backfill(hours=2, now=NOW)
    assert HourRollup.objects.get().requests == 5
    assert KeyHourRollup.objects.get().requests == 5


@pytest.mark.unit
def test_percentiles_are_read_off_the_bucket_counts() -> None:
    counts = [0] * histogram.BUCKETS
    counts[2] = 100  # all in [100, 200) ms
    assert histogram.percentile(counts, 0.5) == pytest.approx(150)
    assert histogram.percentile(counts, 0.99) == pytest.approx(199)
    assert histogram.percentile([0] * histogram.BUCKETS, 0.5) is None


def _costly_fleet(now: datetime = NOW) -> tuple[int, int, int]:
    """Three teams on two deployments (one with no users: idle) over two hours."""
    acme, globex, initech = (
        account_actions.create_team(n).pk for n in ("Acme", "Globex", "Initech")
    )
    small = fleet.ensure_deployment("small-model", gpu_cost_per_hour=Decimal("2.3333"))
    large = fleet.ensure_deployment("large-model", gpu_cost_per_hour=Decimal("7.77"))
    idle = fleet.ensure_deployment("idle-model", gpu_cost_per_hour=Decimal("1.01"))
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    for m in range(0, 90):
        at = start + timedelta(minutes=m)
        FleetSample.objects.create(bucket=at, deployment=small, ready=3, draining=m % 2, dead=4)
        FleetSample.objects.create(bucket=at, deployment=large, ready=2, starting=1)
        FleetSample.objects.create(bucket=at, deployment=idle, warm=1)
    usage = [
        (acme, "small-model", 7),
        (globex, "small-model", 11),
        (initech, "small-model", 13),
        (acme, "large-model", 17),
        (globex, "large-model", 3),
    ]
    for n, (team, model, tokens) in enumerate(usage):
        for i in range(3):
            record(
                team,
                n * 10 + i,
                start + timedelta(minutes=5 + i),
                model=model,
                prompt_tokens=tokens,
                completion_tokens=i,
            )
        record(
            team,
            n * 10 + 5,
            start + timedelta(minutes=9),
            model=model,
            cache_result="hit-semantic",
            prompt_tokens=0,
            completion_tokens=0,
        )
    rollup.backfill(hours=3, now=now)
    return acme, globex, initech


@pytest.mark.unit
@pytest.mark.django_db
def test_the_cost_split_adds_up_to_the_total() -> None:
    _costly_fleet()
    split = costs.cost_split(period("day", NOW))
    worker_minutes_small = 90 * 3 + 45
    assert split.deployments["small-model"].worker_hours == pytest.approx(worker_minutes_small / 60)
    assert split.deployments["small-model"].cost_micros == round(
        worker_minutes_small * Decimal("2.3333") * 1_000_000 / 60
    )
    assert split.deployments["idle-model"].cost_micros == round(Decimal("1.01") * 1_500_000)
    assert split.unallocated_micros == split.deployments["idle-model"].cost_micros
    assert sum(split.by_team().values()) + split.unallocated_micros == split.total_micros
    for model in ("small-model", "large-model"):
        assert split.by_model()[model] == split.deployments[model].cost_micros
    shares = {(line.team, line.model): line.gpu_cost_micros for line in split.lines}
    assert shares[("Initech", "small-model")] > shares[("Globex", "small-model")]
    saved = costs.cache_savings(split)
    assert saved["semantic"]["hits"] == 5 and saved["semantic"]["micros"] > 0
    assert saved["exact"]["hits"] == 0


@pytest.mark.unit
@pytest.mark.django_db
def test_the_csv_export_carries_the_same_split(staff_client: Client) -> None:
    _costly_fleet(datetime.now(UTC))
    split = costs.cost_split(period("day"))
    body = staff_client.get(reverse("dashboard:costs_csv"), {"period": "day"}).content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    total = sum(Decimal(r["gpu_cost_usd"]) for r in rows)
    assert total == Decimal(split.total_micros) / 1_000_000
    assert {r["team"] for r in rows} >= {"Acme", "Globex", "Initech"}


@pytest.mark.live
@pytest.mark.django_db
def test_team_usage_and_top_keys() -> None:
    acme, _, _ = _costly_fleet()
    usage = {u.team.pk: u for u in selectors.team_usage(period("day", NOW))}
    assert usage[acme].requests == 8 and usage[acme].top_keys[0]["api_key_id"] == "k1"
    assert usage[acme].limits is not None


def fresh_threshold(team_id: int) -> float:
    """What another gateway process reads once its one-second copy has aged out."""
    cache_policies.clear_local()
    return async_to_sync(policy_for_team)(team_id).similarity_threshold


@pytest.mark.live
@pytest.mark.django_db(transaction=True)  # policies are published on commit
def test_a_tuning_change_applies_live_is_audited_and_reverts(staff_client: Client) -> None:
    team = account_actions.create_team("Acme")
    before = fresh_threshold(team.pk)
    form = {
        "form": "cache",
        "team": team.pk,
        **cache_form_values(team),
        "similarity_threshold": 0.97,
    }
    form = {k: v for k, v in form.items() if v is not False}  # unchecked boxes are absent
    assert staff_client.post(reverse("dashboard:tuning"), form).status_code == 302
    assert fresh_threshold(team.pk) == 0.97
    change = TuningChange.objects.get()
    assert change.user is not None and change.user.username == "ops"
    assert (change.team, change.old, change.new) == (
        team,
        {"similarity_threshold": before},
        {"similarity_threshold": 0.97},
    )
    page = staff_client.get(reverse("dashboard:tuning")).content.decode()
    assert "0.97" in page and reverse("dashboard:revert", args=[change.pk]) in page

    assert staff_client.post(reverse("dashboard:revert", args=[change.pk])).status_code == 302
    assert fresh_threshold(team.pk) == before
    undo = TuningChange.objects.exclude(pk=change.pk).get()
    assert undo.reverts == change and undo.new == {"similarity_threshold": before}


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_an_invalid_change_saves_and_audits_nothing(staff_client: Client) -> None:
    team = account_actions.create_team("Acme")
    form = {
        "form": "cache",
        "team": team.pk,
        **cache_form_values(team),
        "similarity_threshold": 1.5,
    }
    response = staff_client.post(reverse("dashboard:tuning"), form)
    assert response.status_code == 200 and "similarity_threshold" in response.content.decode()
    assert not TuningChange.objects.exists()
    assert fresh_threshold(team.pk) != 1.5


@pytest.mark.unit
@pytest.mark.django_db
def test_autoscale_thresholds_are_validated_audited_and_revertible() -> None:
    deployment = fleet.ensure_deployment("small-model")
    change = actions.change_autoscale_policy(None, deployment, {"scale_up_utilisation": 0.9})
    assert AutoscalePolicy.objects.get().scale_up_utilisation == 0.9
    with pytest.raises(Exception, match="target_utilisation"):
        actions.change_autoscale_policy(None, deployment, {"scale_down_utilisation": 0.75})
    assert TuningChange.objects.count() == 1
    actions.revert(None, change)
    assert AutoscalePolicy.objects.get().scale_up_utilisation == 0.8
    with pytest.raises(actions.NothingChanged):
        actions.revert(None, change)


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_requests_refused_by_a_quota_show_on_the_teams_page(staff_client: Client) -> None:
    team = account_actions.create_team("Throttled", requests_per_minute=1)
    fleet.ensure_deployment("small-model")
    key = account_actions.issue_api_key(team).plaintext
    body = '{"model": "small-model", "messages": [{"role": "user", "content": "hi"}]}'
    statuses = [
        Client()
        .post(
            "/v1/chat/completions",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
        .status_code
        for _ in range(3)
    ]
    assert statuses[1:] == [429, 429]  # the first is admitted (then finds no worker)
    usage = {u.team.pk: u for u in selectors.team_usage(period("hour", datetime.now(UTC)))}
    assert usage[team.pk].rejected == {"requests_per_minute": 2}
    page = staff_client.get(reverse("dashboard:teams")).content.decode()
    assert "refused by a quota" in page and "requests_per_minute" in page


@pytest.mark.unit
@pytest.mark.django_db
def test_staff_without_the_change_permission_read_tuning_but_cannot_change_it() -> None:
    client = Client()
    client.force_login(get_user_model().objects.create_user("viewer", is_staff=True))
    assert client.get(reverse("dashboard:tuning")).status_code == 200
    form = {"form": "cache", "team": "", **cache_form_values(None)}
    form["similarity_threshold"] = 0.97
    assert client.post(reverse("dashboard:tuning"), form).status_code == 403
    assert actions.current_cache_values(None)["similarity_threshold"] != 0.97
    assert not TuningChange.objects.exists()


def _queue_chart(client: Client, name: str) -> dict[str, list[Any]]:
    response = client.get(reverse("dashboard:overview"), {"period": name})
    (chart,) = [c for c in response.context["charts"] if c["id"] == "queue"]
    return {trace["name"]: trace["y"] for trace in chart["data"]}


@pytest.mark.unit
@pytest.mark.django_db
def test_the_overview_charts_the_gateways_queue_beside_the_workers_by_minute_and_hour(
    staff_client: Client,
) -> None:
    """The published queue is the one that grows behind a gateway: each minute's sample
    keeps it, the hour rollup sums it, and the overview's queue chart shows it beside
    vLLM's own waiting count (summed over deployments; an hour bucket is its mean)."""
    chat, other = fleet.ensure_deployment("chat"), fleet.ensure_deployment("other")
    now = timezone.now()
    first = rollup.floor_minute(now) - timedelta(minutes=3)
    for m in range(4):
        at = first + timedelta(minutes=m)
        FleetSample.objects.create(bucket=at, deployment=chat, waiting=1, gateway_queue=10 * m)
        FleetSample.objects.create(bucket=at, deployment=other, gateway_queue=5)
    by_minute = _queue_chart(staff_client, "hour")
    assert by_minute["waiting in the gateway"] == [5, 15, 25, 35]
    assert by_minute["waiting on workers"] == [1, 1, 1, 1]

    rollup.backfill(hours=1, now=now)
    expected: dict[datetime, list[float]] = {}
    for m in range(4):  # the four minutes may straddle an hour
        expected.setdefault(rollup.floor_hour(first + timedelta(minutes=m)), []).append(10 * m + 5)
    by_hour = {r["bucket"]: r["gateway_queue"] for r in selectors.fleet_series(period("day", now))}
    assert by_hour == {hour: sum(q) / len(q) for hour, q in expected.items()}
    day = _queue_chart(staff_client, "day")["waiting in the gateway"]
    assert sorted(day) == sorted(by_hour.values())


@pytest.mark.live
@pytest.mark.django_db
def test_each_minutes_fleet_sample_records_the_queue_the_gateways_publish() -> None:
    chat = fleet.ensure_deployment("chat")
    idle = fleet.ensure_deployment("idle")
    client = sync_redis()
    client.hset(QUEUE_KEY, queue_field("chat", "gateway-a"), f"7 {time.time()}")
    client.hset(QUEUE_KEY, queue_field("chat", "gateway-b"), f"4 {time.time()}")
    client.hset(QUEUE_KEY, queue_field("chat", "gone"), f"50 {time.time() - 60}")  # stale
    record_fleet_sample(NOW)
    assert FleetSample.objects.get(deployment=chat).gateway_queue == 11
    assert FleetSample.objects.get(deployment=idle).gateway_queue == 0


@pytest.mark.unit
@pytest.mark.django_db
@pytest.mark.parametrize("value", ["²", "9" * 30])
def test_a_team_or_deployment_parameter_that_is_no_row_id_is_ignored_not_a_500(
    staff_client: Client, value: str
) -> None:
    for page in ("tuning", "batches"):
        response = staff_client.get(reverse(f"dashboard:{page}"), {"team": value})
        assert response.status_code == 200, page
    tuning = staff_client.get(reverse("dashboard:tuning"), {"deployment": value})
    assert tuning.status_code == 200
