from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from gateway.accounts.actions import NO_LIMITS, create_team


class Command(BaseCommand):
    help = (
        "Create a team. Without limits it follows the platform default quota policy; with "
        "any, it gets its own policy (the rest copied from the default). --unlimited: its "
        "own policy with no limits but those given."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--rpm", type=int, help="requests per minute")
        parser.add_argument("--tpm", type=int, help="tokens per minute")
        parser.add_argument("--monthly-tokens", type=int, help="tokens per calendar month")
        parser.add_argument("--max-tokens-cap", type=int, help="largest max_tokens accepted")
        parser.add_argument(
            "--unlimited",
            action="store_true",
            help="no limit of any kind not given (instead of the default's)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        given = {
            "requests_per_minute": options["rpm"],
            "tokens_per_minute": options["tpm"],
            "tokens_per_month": options["monthly_tokens"],
            "max_tokens_cap": options["max_tokens_cap"],
        }
        limits = {name: value for name, value in given.items() if value is not None}
        if options["unlimited"]:
            limits = {**NO_LIMITS, **limits}
        try:
            team = create_team(options["name"], **limits)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        quota = "its own quota policy" if limits else "the default quota policy"
        self.stdout.write(f"Created team {team.name} (slug {team.slug}, id {team.pk}), on {quota}.")
