import asyncio
from argparse import ArgumentParser
from dataclasses import fields
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from bench.fairness import Child, Run, Setup, World, measure, start_simulator, table
from foundation.redis_clients import reset_clients
from inference import fleet
from scaling.replay.live.private_redis import PrivateRedis


class Command(BaseCommand):
    help = (
        "Fair queueing across teams on a live gateway: team B at its fair share of one "
        "worker's slots, alone and while team A floods at 10x its share, with FAIR_QUEUEING "
        "off and on; B's TTFT P50/P99 as a markdown table (docs/benchmarks.md)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        for option in fields(Setup):
            flag = f"--{option.name.replace('_', '-')}"
            parser.add_argument(flag, type=type(option.default), default=option.default)

    def handle(self, *args: Any, **options: Any) -> None:
        setup = Setup(**{option.name: options[option.name] for option in fields(Setup)})
        self.stdout.write(
            f"one worker, {setup.slots} slots, fixed TTFT {setup.ttft_ms:g} ms, then "
            f"{setup.itl_ms:g} ms a token, {setup.max_tokens} tokens on average; B: "
            f"{setup.share} streams for "
            f"{setup.duration_s:g} s; A: {setup.flood_factor * setup.share} streams\n"
        )
        redis = PrivateRedis("")  # always a private one: the flood must not reach a platform
        redis_url = redis.start()
        settings.REDIS_URL = settings.CACHE_REDIS_URL = redis_url
        reset_clients()
        simulator, sim_url = start_simulator(setup)
        world = World.create(setup)
        try:
            fleet.register_worker(world.deployment, sim_url, registered_by="bench")
            runs = asyncio.run(self._measure(setup, world, redis_url, simulator, sim_url))
        finally:
            world.delete()
            simulator.stop()
            redis.stop()
        self.stdout.write(table(runs, setup))

    async def _measure(
        self, setup: Setup, world: World, redis_url: str, simulator: Child, sim_url: str
    ) -> list[Run]:
        await simulator.wait_for(f"{sim_url}/health", "the simulator")
        return await measure(setup, world, redis_url, sim_url)
