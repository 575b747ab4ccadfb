from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from gateway.dashboard.fleet_sampling import record_fleet_sample
from gateway.dashboard.rollup import backfill, refresh


class Command(BaseCommand):
    help = (
        "Fill the dashboard's rollup tables from the usage ledger: the recent minutes "
        "(as the 30 s Celery task does), or --hours N to rebuild a longer range."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--hours",
            type=int,
            default=0,
            help="rebuild the last N hours (after an outage, or on first install)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        samples = record_fleet_sample()
        result = backfill(options["hours"]) if options["hours"] else refresh()
        result["fleet_samples"] = samples
        self.stdout.write(", ".join(f"{k}: {v}" for k, v in result.items()))
