import time
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from foundation.redis_clients import sync_redis
from scaling.autoscale.actuators import build_actuator
from scaling.autoscale.config import actuator_from_settings, tick_seconds
from scaling.autoscale.loop import AutoscaleLoop


class Command(BaseCommand):
    help = (
        "Run the autoscaler loop: each tick, if this process holds the Redis lease, "
        "decide for every enabled AutoscalePolicy, record why, and actuate."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--once", action="store_true", help="one tick, then exit")
        parser.add_argument("--tick", type=float, help="seconds between ticks (default 15)")
        parser.add_argument(
            "--actuator",
            choices=["local", "kubernetes"],
            help="default: AUTOSCALE_ACTUATOR or local",
        )
        parser.add_argument(
            "--worker", choices=["sim", "vllm"], help="local actuator: what to start (default sim)"
        )
        parser.add_argument("--sim-profile", default="h100-llama3-8b")
        parser.add_argument("--namespace", help="kubernetes actuator: the namespace")

    def handle(self, *args: Any, **options: Any) -> None:
        kind = options["actuator"]
        if kind == "local" and options["worker"]:
            actuator = build_actuator(
                "local", worker=options["worker"], sim_profile=options["sim_profile"]
            )
        elif kind == "kubernetes" and options["namespace"]:
            actuator = build_actuator("kubernetes", namespace=options["namespace"])
        else:
            actuator = actuator_from_settings(kind)
        tick = options["tick"] or tick_seconds()
        loop = AutoscaleLoop(actuator, sync_redis(), tick_s=tick)
        self.stdout.write(f"autoscaler: {actuator.name} actuator, tick {tick:g} s")
        standby = False
        try:
            while True:
                started = time.monotonic()
                decisions = loop.tick()
                if decisions is None and not standby:
                    self.stdout.write("standby: another process holds the autoscaler lease")
                standby = decisions is None
                for row in decisions or []:
                    change = f"{row.from_replicas}->{row.to_replicas}"
                    self.stdout.write(f"{row.deployment.name}: {row.action} {change} {row.reason}")
                if options["once"]:
                    return
                time.sleep(max(tick - (time.monotonic() - started), 0.1))
        except KeyboardInterrupt:
            pass
        finally:
            loop.lock.release()
