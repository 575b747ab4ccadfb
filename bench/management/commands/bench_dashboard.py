import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from bench import dashboard
from gateway.dashboard.rollup import backfill


class Command(BaseCommand):
    help = (
        "Insert synthetic usage records (default 1,000,000 over 30 days), roll them up and "
        "time every dashboard page for the hour, day and month views."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--records", type=int, default=1_000_000)
        parser.add_argument("--days", type=int, default=30)
        parser.add_argument("--teams", type=int, default=20)
        parser.add_argument("--models", type=int, default=3)
        parser.add_argument("--keys", type=int, default=100, help="API keys in all")
        parser.add_argument("--repeat", type=int, default=5, help="timed requests per page")
        parser.add_argument("--keep", action="store_true", help="leave the synthetic data")

    def handle(self, *args: Any, **o: Any) -> None:
        dashboard.clean_up()  # leftovers of an interrupted run
        now = dashboard.now_utc()
        step = self._step
        teams, models = dashboard.make_world(o["teams"], o["models"])
        step(
            f"insert {o['records']:,} usage records",
            lambda: dashboard.insert_usage(
                dashboard.usage_rows(o["records"], teams, models, o["keys"], o["days"], now)
            ),
        )
        step(
            "insert fleet samples and decisions",
            lambda: dashboard.insert_fleet(models, o["days"], now),
        )
        if connection.vendor == "postgresql":
            step("ANALYZE", lambda: connection.cursor().execute("ANALYZE") and None)
        step(f"roll up {o['days']} days (backfill)", lambda: backfill(o["days"] * 24 + 1, now))
        results = dashboard.time_pages(o["repeat"])
        self.stdout.write(f"\n{'page':<22}{'period':<8}{'median ms':>10}{'max ms':>9}")
        for page, period, median, worst in results:
            flag = "" if worst < 500 else "  > 500 ms"
            self.stdout.write(f"{page:<22}{period:<8}{median:>10.1f}{worst:>9.1f}{flag}")
        if not o["keep"]:
            self._step("clean up", dashboard.clean_up)

    def _step(self, label: str, work: Any) -> None:
        started = time.perf_counter()
        result = work()
        extra = f" ({result})" if result not in (None, "") else ""
        self.stdout.write(f"{label}: {time.perf_counter() - started:.1f} s{extra}")
        self.stdout.flush()
