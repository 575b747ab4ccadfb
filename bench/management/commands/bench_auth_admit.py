import platform
import secrets
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

import uvloop
from django.conf import settings
from django.core.management.base import BaseCommand

from bench.auth_admit import run_bench
from foundation import embedded_redis
from foundation.redis_clients import reset_clients
from gateway.accounts import actions
from gateway.accounts.models import Team


class Command(BaseCommand):
    help = (
        "Print the per-request cost of authenticate + admit (P50/P99) against the configured "
        "Redis, or a fresh bundled Redis 8 when REDIS_URL is unset."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--requests", type=int, default=20_000)
        parser.add_argument("--concurrency", type=int, default=64)

    def handle(self, *args: Any, **options: Any) -> None:
        redis_process = None
        if not settings.REDIS_URL:
            data_dir = Path(settings.VAR_DIR) / "bench-redis"
            redis_process, settings.REDIS_URL = embedded_redis.start(data_dir, persistent=False)
            reset_clients()
        team = actions.create_team(
            f"bench-{secrets.token_hex(4)}",
            requests_per_minute=10**9,
            tokens_per_minute=2 * 10**9,
            tokens_per_month=10**15,
        )
        try:
            raw_key = actions.issue_api_key(team, name="bench").plaintext
            # uvloop: the event loop `make run`'s uvicorn serves requests on.
            results, rate = uvloop.run(
                run_bench(raw_key, team.pk, options["requests"], options["concurrency"])
            )
        finally:
            Team.objects.filter(pk=team.pk).delete()
            if redis_process is not None:
                redis_process.terminate()
        self.stdout.write(
            f"machine: {platform.machine()}, {platform.python_implementation()} "
            f"{platform.python_version()}, Redis at {settings.REDIS_URL}"
        )
        self.stdout.write(f"{'step':<52} {'n':>7} {'P50 ms':>8} {'P99 ms':>8} {'mean ms':>8}")
        for item in results:
            self.stdout.write(
                f"{item.name:<52} {item.count:>7} {item.p50_ms:>8.3f} {item.p99_ms:>8.3f} "
                f"{item.mean_ms:>8.3f}"
            )
        self.stdout.write(
            f"hot path throughput, {options['concurrency']} in flight, one process: "
            f"{rate:,.0f} requests/s"
        )
