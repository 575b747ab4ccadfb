"""Spot prices and GPU rates by worker label (issue 16, "Prices").

A request a spot-labelled worker served is billed at its deployment's spot discount (a
batch line on spot at the larger of that and the batch discount); the fleet sampler costs
each live worker at its gpu label's rate, spot or on demand, else at its deployment's
price, and records it, so the cost split of any period adds up to the cent, whatever the
rates were when."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from gateway.accounts import actions as account_actions
from gateway.accounts.management.commands.setup_demo import EXAMPLE_GPU, EXAMPLE_GPU_RATE
from gateway.dashboard import costs, rollup
from gateway.dashboard.fleet_sampling import record_fleet_sample
from gateway.dashboard.models import FleetHour, FleetSample
from gateway.dashboard.periods import period
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from inference.deployments import DeploymentInfo
from inference.models import GpuRate, ModelDeployment, Worker
from inference.worker_command import EMBEDDED_MODEL
from tests.staff import tuning_staff
from tests.waiting import wait_until

NOW = datetime(2026, 3, 14, 12, 30, 20, tzinfo=UTC)
H100 = {"on_demand_per_hour": Decimal("4.1234"), "spot_per_hour": Decimal("1.7777")}


def worker(deployment: ModelDeployment, n: int, state: str = "ready", **labels: object) -> Worker:
    return Worker.objects.create(
        deployment=deployment, url=f"http://10.0.0.{n}:8000", state=state, labels=labels
    )


@pytest.mark.unit
def test_a_spot_request_saves_the_spot_discount_and_a_batch_line_on_spot_the_larger_one():
    info = DeploymentInfo(
        "m",
        Decimal(10),
        Decimal(20),
        0,
        batch_discount_percent=50,
        spot_discount_percent=30,
    )
    full = 1_000 * 10 + 500 * 20
    assert info.cost_micros(1_000, 500) == full
    assert info.cost_micros(1_000, 500, spot=True) == full * 70 // 100
    assert info.cost_micros(1_000, 500, batch=True) == full // 2
    assert info.cost_micros(1_000, 500, batch=True, spot=True) == full // 2  # 50 > 30
    deeper_spot = DeploymentInfo(
        "m", Decimal(10), Decimal(20), 0, batch_discount_percent=20, spot_discount_percent=60
    )
    assert deeper_spot.cost_micros(1_000, 500, batch=True, spot=True) == full * 40 // 100


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_ledger_bills_a_request_on_a_spot_worker_at_the_spot_discount(
    platform: dict[str, Any],
) -> None:
    ModelDeployment.objects.filter(name="small-model").update(
        price_input_per_million=Decimal(10),
        price_output_per_million=Decimal(20),
        spot_discount_percent=40,
    )

    def billed(expect_spot: bool) -> bool:
        """A fresh request (the gateway rereads prices and labels within seconds) whose
        ledger row carries the price its worker's labels call for."""
        reply = (
            platform["client"]
            .chat.completions.with_raw_response.create(
                model="small-model",
                messages=[{"role": "user", "content": "Spot or not?"}],
                max_tokens=4,
                temperature=0.9,
            )
            .parse()
        )
        usage = reply.usage
        assert usage is not None
        full = usage.prompt_tokens * 10 + usage.completion_tokens * 20

        def recorded() -> UsageRecord | None:
            ingest("test-consumer")
            return UsageRecord.objects.filter(request_id=reply.id).first()

        row = wait_until(recorded, 5, "the usage record")
        assert row is not None and row.worker == platform["sim"].url
        return bool(row.cost_micros == (full * 60 // 100 if expect_spot else full))

    wait_until(lambda: billed(False), 15, "a request on demand billed in full", poll_s=0.5)
    Worker.objects.filter(url=platform["sim"].url).update(labels={"gpu": "h100", "spot": True})
    wait_until(lambda: billed(True), 20, "a request on spot billed 40% less", poll_s=0.5)
    Worker.objects.filter(url=platform["sim"].url).update(labels={"spot": "true"})  # not JSON true
    wait_until(lambda: billed(False), 20, "a worker labelled a string billed in full", poll_s=0.5)


@pytest.mark.live
@pytest.mark.django_db
def test_the_fleet_sampler_costs_each_live_worker_at_its_labels_rate() -> None:
    deployment = fleet.ensure_deployment("h100-model", gpu_cost_per_hour=Decimal("0.5"))
    GpuRate.objects.create(gpu="h100", **H100)
    worker(deployment, 1, gpu="h100")  # on demand
    worker(deployment, 2, gpu="h100", spot=True)
    worker(deployment, 3, "starting", gpu="a100", spot=True)  # no a100 rate: the deployment's
    worker(deployment, 4, "draining")  # no gpu label: the deployment's
    worker(deployment, 5, "dead", gpu="h100")  # holds no GPU
    record_fleet_sample(NOW)
    sample = FleetSample.objects.get(deployment=deployment)
    per_hour = H100["on_demand_per_hour"] + H100["spot_per_hour"] + 2 * Decimal("0.5")
    assert sample.gpu_cost_per_hour_micros == per_hour * 1_000_000 == 6_901_100
    assert (sample.ready, sample.starting, sample.draining, sample.dead) == (2, 1, 1, 1)

    # A rate changed later prices the minutes after it; the one recorded stays.
    GpuRate.objects.filter(gpu="h100").update(spot_per_hour=Decimal("9"))
    record_fleet_sample(NOW + timedelta(minutes=1))
    assert FleetSample.objects.get(bucket=NOW.replace(second=0)).gpu_cost_per_hour_micros == (
        6_901_100
    )
    later = FleetSample.objects.get(bucket=NOW.replace(second=0) + timedelta(minutes=1))
    assert later.gpu_cost_per_hour_micros == 6_901_100 + (9_000_000 - 1_777_700)
    split = costs.cost_split(period("hour", NOW + timedelta(minutes=1)))
    assert split.deployments["h100-model"].cost_micros == round(
        Decimal(6_901_100 + later.gpu_cost_per_hour_micros) / 60
    )


@pytest.mark.live
@pytest.mark.django_db
def test_the_split_at_per_label_rates_adds_up_exactly_in_minutes_and_hours() -> None:
    teams = [account_actions.create_team(name).pk for name in ("Acme", "Globex", "Initech")]
    mixed = fleet.ensure_deployment("mixed-model", gpu_cost_per_hour=Decimal("2.3333"))
    idle = fleet.ensure_deployment("idle-model", gpu_cost_per_hour=Decimal("1.01"))
    GpuRate.objects.create(gpu="h100", **H100)
    worker(mixed, 1, gpu="h100")
    worker(mixed, 2, gpu="h100", spot=True)
    worker(mixed, 3, "warm")
    worker(idle, 4, "warm", gpu="h100", spot=True)
    start = NOW.replace(minute=0, second=0, microsecond=0)
    for m in range(7):  # seven sampled minutes; the spot worker leaves after the third
        if m == 3:
            Worker.objects.filter(url="http://10.0.0.2:8000").update(state="dead")
        record_fleet_sample(start + timedelta(minutes=m))
    for n, (team, tokens) in enumerate(zip(teams, (7, 11, 13), strict=True)):
        UsageRecord.objects.create(
            request_id=f"r{n}",
            team_id=team,
            api_key_id="k1",
            model="mixed-model",
            created_at=start + timedelta(minutes=1, seconds=n),
            prompt_tokens=tokens,
            completion_tokens=n,
            status="ok",
            latency_ms=100,
            cost_micros=1,
            cache_result="miss",
        )
    rollup.backfill(hours=2, now=start + timedelta(minutes=10))
    on_demand = H100["on_demand_per_hour"] + Decimal("2.3333")
    rate_minutes = 7 * on_demand + 3 * H100["spot_per_hour"]
    expected = round(rate_minutes * 1_000_000 / 60)
    for name in ("hour", "day"):  # FleetSample minutes, then FleetHour sums
        split = costs.cost_split(period(name, start + timedelta(minutes=10)))
        assert split.deployments["mixed-model"].cost_micros == expected, name
        assert split.deployments["idle-model"].cost_micros == round(
            7 * H100["spot_per_hour"] * 1_000_000 / 60
        )
        shares = [line.gpu_cost_micros for line in split.lines]
        assert sum(shares) == expected and len(set(shares)) == 3
        assert sum(split.by_team().values()) + split.unallocated_micros == split.total_micros
        assert split.unallocated_micros == split.deployments["idle-model"].cost_micros
    hour = FleetHour.objects.get(deployment=mixed)
    assert hour.gpu_cost_per_hour_micros == rate_minutes * 1_000_000


@pytest.mark.live
@pytest.mark.django_db
def test_samples_from_before_costs_were_recorded_fall_back_to_the_deployments_price() -> None:
    deployment = fleet.ensure_deployment("old-model", gpu_cost_per_hour=Decimal("3"))
    GpuRate.objects.create(gpu="h100", **H100)
    worker(deployment, 1, gpu="h100", spot=True)
    start = NOW.replace(minute=0, second=0, microsecond=0)
    for m in range(4):  # recorded before the upgrade: no cost column, 2 workers ready
        FleetSample.objects.create(
            bucket=start + timedelta(minutes=m), deployment=deployment, ready=2
        )
    record_fleet_sample(start + timedelta(minutes=4))
    minutes = costs.cost_split(period("hour", start + timedelta(minutes=5)))
    expected = round((4 * 2 * Decimal(3) + H100["spot_per_hour"]) * 1_000_000 / 60)
    assert minutes.deployments["old-model"].cost_micros == expected
    rollup.backfill(hours=2, now=start + timedelta(minutes=5))
    assert FleetHour.objects.get(deployment=deployment).gpu_cost_per_hour_micros is None
    hours = costs.cost_split(period("day", start + timedelta(minutes=5)))
    assert hours.deployments["old-model"].cost_micros == round(9 * Decimal(3) * 1_000_000 / 60)


@pytest.mark.live  # setup_demo issues a key (Redis)
@pytest.mark.django_db
def test_repricing_a_discount_or_a_gpu_rate_drops_the_example_label() -> None:
    call_command("setup_demo", "--json")
    demo = ModelDeployment.objects.get(name=EMBEDDED_MODEL)
    assert demo.prices_are_examples and demo.spot_discount_percent > 0
    demo.spot_discount_percent = 10
    demo.save()
    assert not ModelDeployment.objects.get(pk=demo.pk).prices_are_examples
    rate = GpuRate.objects.get(gpu=EXAMPLE_GPU)
    assert rate.is_example
    rate.save()  # nothing changed: still the example
    assert GpuRate.objects.get(pk=rate.pk).is_example
    rate.spot_per_hour = Decimal("1.25")
    rate.save()
    assert not GpuRate.objects.get(pk=rate.pk).is_example


@pytest.mark.live  # setup_demo issues a key (Redis)
@pytest.mark.django_db
def test_a_deleted_example_gpu_rate_is_not_brought_back_by_the_next_start() -> None:
    call_command("setup_demo", "--json")
    GpuRate.objects.all().delete()
    call_command("setup_demo", "--json")
    assert not GpuRate.objects.exists()


@pytest.mark.live  # setup_demo issues a key (Redis)
@pytest.mark.django_db
def test_the_cost_page_lists_the_prices_and_gpu_rates_marked_as_examples() -> None:
    call_command("setup_demo", "--json")
    demo = ModelDeployment.objects.get(name=EMBEDDED_MODEL)
    worker(demo, 1, gpu=EXAMPLE_GPU, spot=True)
    client = Client()
    client.force_login(tuning_staff())
    page = client.get(reverse("dashboard:costs")).content.decode()
    prices = page[page.index('id="prices"') : page.index('id="gpu-rates"')]
    row = prices[prices.index(EMBEDDED_MODEL) :]
    row = row[: row.index("</tr>")]
    # input $0.15, cached input (blank: the input price), output $0.60; batch 50% off;
    # spot 30% off; GPU $0.50 per hour for workers no rate prices.
    cells = ["$0.15", "$0.15", "$0.60", "$0.075 / $0.30", "$0.105 / $0.42", "$0.50"]
    assert [c.split("</td>")[0].split(" (")[0] for c in row.split('"num">')[1:]] == cells
    assert "(example prices)" in row
    rates = page[page.index('id="gpu-rates"') :]
    rates = rates[: rates.index("</table>")]
    on_demand, spot = (
        f"${EXAMPLE_GPU_RATE[k]:.2f}" for k in ("on_demand_per_hour", "spot_per_hour")
    )
    assert f"<td>{EXAMPLE_GPU} <span" in rates and "(example prices)" in rates
    assert f'"num">{on_demand}</td>' in rates and f'"num">{spot}</td>' in rates
    assert '"num">0 / 1</td>' in rates  # the one live h100 worker, on spot


@pytest.mark.unit
@pytest.mark.django_db
def test_gpu_rates_are_set_in_the_admin() -> None:
    client = Client()
    client.force_login(
        get_user_model().objects.create_superuser("root", password="pw-not-used-1234")
    )
    added = client.post(
        "/admin/inference/gpurate/add/",
        {"gpu": "l4", "on_demand_per_hour": "0.80", "spot_per_hour": "0.30"},
    )
    assert added.status_code == 302
    rate = GpuRate.objects.get(gpu="l4")
    assert (rate.per_hour(spot=False), rate.per_hour(spot=True)) == (Decimal("0.8"), Decimal("0.3"))
    assert not rate.is_example
    listing = client.get("/admin/inference/gpurate/").content.decode()
    assert "GPU rates" in listing and "l4" in listing
