from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from gateway.accounts.actions import create_team


class Command(BaseCommand):
    help = "Create a team with its quota policy. Limits left out are unlimited."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--rpm", type=int, help="requests per minute")
        parser.add_argument("--tpm", type=int, help="tokens per minute")
        parser.add_argument("--monthly-tokens", type=int, help="tokens per calendar month")
        parser.add_argument("--max-tokens-cap", type=int, help="largest max_tokens accepted")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            team = create_team(
                options["name"],
                requests_per_minute=options["rpm"],
                tokens_per_minute=options["tpm"],
                tokens_per_month=options["monthly_tokens"],
                max_tokens_cap=options["max_tokens_cap"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(f"Created team {team.name} (slug {team.slug}, id {team.pk}).")
