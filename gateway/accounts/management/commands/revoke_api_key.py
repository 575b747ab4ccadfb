from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from gateway.accounts.actions import revoke_api_key
from gateway.accounts.keys import is_lookup_id
from gateway.accounts.models import ApiKey


class Command(BaseCommand):
    help = "Revoke an API key by its 8-character id (the part after sk-sluice-)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("key_id")

    def handle(self, *args: Any, **options: Any) -> None:
        key_id: str = options["key_id"]
        if not is_lookup_id(key_id):
            raise CommandError(
                f"{key_id!r} is not a key id: it is the 8 lowercase letters or digits after "
                "'sk-sluice-' in the key."
            )
        key = ApiKey.objects.filter(lookup_id=key_id).first()
        if key is None:
            raise CommandError(f"No API key with id {key_id}.")
        already = key.revoked_at is not None
        revoke_api_key(key)
        state = "was already revoked" if already else "is revoked"
        self.stdout.write(f"API key {key_id} of team {key.team.name} {state}.")
