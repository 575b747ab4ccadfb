import json
import secrets
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from gateway.accounts import actions
from gateway.accounts.models import ApiKey, Membership, Team
from inference.fleet import ensure_deployment
from inference.worker_command import EMBEDDED_MODEL

DEMO_KEY_NAME = "demo key (make run)"


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
        ensure_deployment(EMBEDDED_MODEL, max_in_flight_per_worker=16)
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
