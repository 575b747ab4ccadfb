"""The demo deployment ships with example prices, labelled as such on the cost pages."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from gateway.accounts.management.commands.setup_demo import EXAMPLE_PRICES
from gateway.accounts.models import Team
from gateway.dashboard import rollup
from gateway.dashboard.models import FleetSample
from gateway.dashboard.templatetags.dashboard_format import usd
from gateway.usage.models import UsageRecord
from inference import deployments
from inference.models import ModelDeployment
from inference.worker_command import EMBEDDED_MODEL
from tests.staff import tuning_staff


def _demo_usage(now: datetime) -> int:
    """An hour of the demo worker up and a few requests to it; returns what they cost."""
    demo = ModelDeployment.objects.get(name=EMBEDDED_MODEL)
    team = Team.objects.get()
    info = deployments._load()[EMBEDDED_MODEL]
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    for m in range(60):
        FleetSample.objects.create(bucket=start + timedelta(minutes=m), deployment=demo, ready=1)
    billed = 0
    for i in range(3):
        cost = info.cost_micros(1_000, 2_000)
        billed += cost
        UsageRecord.objects.create(
            request_id=f"demo-{i}",
            team_id=team.pk,
            model=EMBEDDED_MODEL,
            created_at=start + timedelta(minutes=5 + i),
            prompt_tokens=1_000,
            completion_tokens=2_000,
            status="ok",
            latency_ms=300,
            ttft_ms=80,
            cost_micros=cost,
            cache_result="miss",
            api_key_id="k1",
        )
    rollup.backfill(hours=3, now=now)
    return billed


@pytest.mark.live
@pytest.mark.django_db
def test_the_cost_page_of_a_fresh_demo_shows_money_labelled_as_example_prices() -> None:
    call_command("setup_demo", "--json")
    demo = ModelDeployment.objects.get(name=EMBEDDED_MODEL)
    assert demo.prices_are_examples
    assert demo.price_input_per_million > 0 and demo.price_output_per_million > 0
    assert demo.gpu_cost_per_hour > 0
    billed = _demo_usage(datetime.now(UTC))
    # 3 x (1,000 x $0.15 + 2,000 x $0.60) per million = $0.00405
    assert billed == 4_050
    client = Client()
    client.force_login(tuning_staff())
    page = client.get(reverse("dashboard:costs"), {"period": "day"}).content.decode()
    assert 'id="example-prices"' in page and "(example prices)" in page
    assert usd(billed) != "$0.00" and usd(billed) in page  # billed, not rounded away
    assert "$0.50" in page  # one worker-hour at the example $0.50 per hour
    teams = client.get(reverse("dashboard:teams"), {"period": "day"}).content.decode()
    assert 'id="example-prices"' in teams


@pytest.mark.live
@pytest.mark.django_db
def test_an_operators_price_is_never_overwritten_by_the_examples() -> None:
    ModelDeployment.objects.create(name=EMBEDDED_MODEL, price_output_per_million=Decimal("9"))
    call_command("setup_demo", "--json")
    demo = ModelDeployment.objects.get(name=EMBEDDED_MODEL)
    assert demo.price_output_per_million == Decimal("9")
    assert demo.price_input_per_million == 0 and demo.gpu_cost_per_hour == 0
    assert not demo.prices_are_examples
    client = Client()
    client.force_login(tuning_staff())
    page = client.get(reverse("dashboard:costs")).content.decode()
    assert "example prices" not in page.lower()


@pytest.mark.live
@pytest.mark.django_db
def test_an_unpriced_demo_deployment_from_an_older_install_gets_the_examples() -> None:
    ModelDeployment.objects.create(name=EMBEDDED_MODEL)
    call_command("setup_demo", "--json")
    demo = ModelDeployment.objects.get(name=EMBEDDED_MODEL)
    assert demo.prices_are_examples
    for field, value in EXAMPLE_PRICES.items():
        assert getattr(demo, field) == value


@pytest.mark.live
@pytest.mark.django_db
def test_an_operator_repricing_the_demo_deployment_drops_the_example_label() -> None:
    call_command("setup_demo", "--json")
    demo = ModelDeployment.objects.get(name=EMBEDDED_MODEL)
    demo.max_in_flight_per_worker = 8
    demo.save()  # not a price: still the examples
    assert ModelDeployment.objects.get(pk=demo.pk).prices_are_examples
    demo.price_input_per_million = Decimal("0.40")
    demo.save()
    assert not ModelDeployment.objects.get(pk=demo.pk).prices_are_examples
    call_command("setup_demo", "--json")  # a restart keeps the operator's prices
    again = ModelDeployment.objects.get(pk=demo.pk)
    assert again.price_input_per_million == Decimal("0.40") and not again.prices_are_examples
