from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from gateway.accounts.actions import issue_api_key
from gateway.accounts.models import ApiKey, Team


class Command(BaseCommand):
    help = "Create an API key for a team. The key is printed once, as the last line."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("team_name")
        parser.add_argument("--name", default="", help="a label for the key")
        parser.add_argument("--expires-in-days", type=int)
        parser.add_argument(
            "--scope",
            action="append",
            choices=ApiKey.Scope.values,
            help="repeatable; default: inference",
        )
        parser.add_argument("--model", action="append", help="allowed model (repeatable)")
        parser.add_argument("--rpm", type=int, help="per-key requests per minute")

    def handle(self, *args: Any, **options: Any) -> None:
        team = Team.objects.filter(name=options["team_name"]).first()
        if team is None:
            raise CommandError(
                f"No team named {options['team_name']!r}. Create it with: "
                f"python manage.py create_team {options['team_name']!r}"
            )
        try:
            issued = issue_api_key(
                team,
                name=options["name"],
                expires_in_days=options["expires_in_days"],
                scopes=tuple(options["scope"] or [ApiKey.Scope.INFERENCE]),
                allowed_models=tuple(options["model"] or ()),
                requests_per_minute=options["rpm"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(
            f"Created API key {issued.key.lookup_id} for team {team.name}. "
            "It is shown once; store it now:"
        )
        self.stdout.write(issued.plaintext)
