import asyncio
from argparse import ArgumentParser
from dataclasses import fields
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from bench.batch_fill import Processes, Result, Setup, World, measure, start_simulators, table
from foundation.redis_clients import reset_clients
from inference import fleet
from scaling.replay.live.private_redis import PrivateRedis


class Command(BaseCommand):
    help = (
        "Batch lines on idle capacity on a live gateway: interactive load at --load of a "
        "simulator fleet's capacity, without and then with a --batch-lines batch running from "
        "a Celery worker; interactive TTFT P50/P99, batch lines/s and fleet utilisation as a "
        "markdown table (docs/benchmarks.md)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        for option in fields(Setup):
            flag = f"--{option.name.replace('_', '-')}"
            if option.name == "headroom":
                parser.add_argument(
                    flag, type=float, default=None, help="BATCH_HEADROOM (default: the setting)"
                )
            else:
                parser.add_argument(flag, type=type(option.default), default=option.default)

    def handle(self, *args: Any, **options: Any) -> None:
        setup = Setup(**{option.name: options[option.name] for option in fields(Setup)})
        self.stdout.write(setup.describe())
        redis = PrivateRedis("")  # always a private one: the load must not reach a platform
        redis_url = redis.start()
        settings.REDIS_URL = settings.CACHE_REDIS_URL = redis_url
        reset_clients()
        processes = Processes()
        world: World | None = None
        try:
            sim_urls = start_simulators(setup, processes)
            world = World.create(setup)
            for url in sim_urls:
                fleet.register_worker(world.deployment, url, registered_by="bench")
            result = asyncio.run(self._measure(setup, world, redis_url, sim_urls, processes))
        finally:
            processes.stop()
            if world is not None:
                world.delete()
            redis.stop()
        self.stdout.write(table(result))

    async def _measure(
        self,
        setup: Setup,
        world: World,
        redis_url: str,
        sim_urls: list[str],
        processes: Processes,
    ) -> Result:
        for child, url in zip(processes.simulators, sim_urls, strict=True):
            await child.wait_for(f"{url}/health", "a simulator")
        return await measure(setup, world, redis_url, sim_urls, processes)
