import json
import secrets
from argparse import ArgumentParser
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from gateway.accounts import actions
from gateway.accounts.models import ApiKey, Membership, Team
from inference.fleet import ensure_deployment
from inference.models import GpuRate, ModelDeployment
from inference.worker_command import EMBEDDED_MODEL
from scaling.models import AutoscalePolicy

DEMO_KEY_NAME = "demo key (make run)"
# Documented example figures (docs/dashboard.md, "Example prices"), so the cost pages of a
# fresh `make run` show money rather than $0.00; the dashboard labels them as examples.
EXAMPLE_PRICES: dict[str, Decimal | int] = {
    "price_input_per_million": Decimal("0.15"),
    "price_output_per_million": Decimal("0.60"),
    "gpu_cost_per_hour": Decimal("0.50"),
    "spot_discount_percent": 30,
}
# An example GPU rate by worker label, shipped with the example prices, so the cost page's
# rate table shows what on-demand and spot cost: the embedded worker carries no gpu label
# (it is costed at the deployment's gpu_cost_per_hour), a worker labelled
# {"gpu": "h100"} would be costed at it.
EXAMPLE_GPU = "h100"
EXAMPLE_GPU_RATE = {"on_demand_per_hour": Decimal("2.50"), "spot_per_hour": Decimal("1.00")}


class Command(BaseCommand):
    help = (
        "Create the demo team and its staff admin if missing; rotate the demo password and "
        "API key (a key is only ever shown once, so each start issues a fresh one)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON line")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        name = settings.DEMO_TEAM_NAME
        team = Team.objects.filter(name=name).first() or actions.create_team(
            name, requests_per_minute=600, tokens_per_minute=200_000, max_tokens_cap=4096
        )
        user, _ = get_user_model().objects.get_or_create(
            username="demo", defaults={"is_staff": True, "is_superuser": True}
        )
        password = secrets.token_urlsafe(12)
        user.set_password(password)
        user.save()
        actions.add_member(team, user, Membership.Role.ADMIN)
        for old in ApiKey.objects.filter(team=team, name=DEMO_KEY_NAME, revoked_at=None):
            actions.revoke_api_key(old)
        issued = actions.issue_api_key(
            team,
            name=DEMO_KEY_NAME,
            scopes=(ApiKey.Scope.INFERENCE, ApiKey.Scope.MANAGE),
            created_by=user,
        )
        # The embedded CPU worker batches well up to about 16 streams (docs/benchmarks.md).
        fresh = not ModelDeployment.objects.filter(name=EMBEDDED_MODEL).exists()
        demo_deployment = ensure_deployment(
            EMBEDDED_MODEL, max_in_flight_per_worker=16, prices_are_examples=True, **EXAMPLE_PRICES
        )
        if price_examples(demo_deployment) or fresh:
            example_gpu_rate()
        demo_autoscale_policy(demo_deployment)
        demo = {
            "team": team.slug,
            "model": EMBEDDED_MODEL,
            "username": "demo",
            "password": password,
            "api_key": issued.plaintext,
        }
        if options["json"]:
            self.stdout.write(json.dumps(demo))
        else:
            for label, value in demo.items():
                self.stdout.write(f"{label}: {value}")


def price_examples(deployment: ModelDeployment) -> bool:
    """Give an unpriced demo deployment (one created before example prices existed) the
    example prices; returns whether it did. Only when every example figure is zero: a
    price an operator set, even one of them, is never overwritten."""
    if any(getattr(deployment, field) for field in EXAMPLE_PRICES):
        return False
    for field, value in EXAMPLE_PRICES.items():
        setattr(deployment, field, value)
    deployment.prices_are_examples = True
    deployment.save(update_fields=[*EXAMPLE_PRICES, "prices_are_examples"])
    return True


def example_gpu_rate() -> GpuRate:
    """The example GPU rate, added once, with the example prices (a fresh install, or a
    demo deployment given them now), so one an operator deleted is not brought back by the
    next `make run`, and one an operator set for that label is kept as it is."""
    rate, _ = GpuRate.objects.get_or_create(
        gpu=EXAMPLE_GPU, defaults={**EXAMPLE_GPU_RATE, "is_example": True}
    )
    return rate


def demo_autoscale_policy(deployment: ModelDeployment) -> AutoscalePolicy:
    """The embedded deployment's autoscale policy, created once (an operator's later edits
    stay): enabled, with bounds that fit the one CPU worker `make run` starts, so the loop
    it also starts holds, and says why, on the fleet page from the first minute."""
    policy, _ = AutoscalePolicy.objects.get_or_create(
        deployment=deployment, defaults={"enabled": True, "min_replicas": 1, "max_replicas": 1}
    )
    return policy
