import logging
import signal
import threading
import time
from argparse import ArgumentParser
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from foundation.redis_clients import sync_redis
from inference import fleet
from inference.models import Worker
from scaling.autoscale.actuators import build_actuator
from scaling.autoscale.config import actuator_from_settings, tick_seconds
from scaling.autoscale.loop import AutoscaleLoop

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Run the autoscaler loop: each tick, if this process holds the Redis lease, "
        "decide for every enabled AutoscalePolicy, record why, and actuate. A replica is "
        "always its deployment's worker_kind: vLLM, or the simulator for a deployment "
        "marked simulated."
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
            "--sim-profile",
            help="local actuator: the simulator profile of simulated deployments' replicas "
            "(default AUTOSCALE_SIM_PROFILE or h100-llama3-8b)",
        )
        parser.add_argument("--namespace", help="kubernetes actuator: the namespace")

    def handle(self, *args: Any, **options: Any) -> None:
        kind = options["actuator"]
        if kind == "kubernetes" and options["namespace"]:
            actuator = build_actuator("kubernetes", namespace=options["namespace"])
        else:
            actuator = actuator_from_settings(kind, sim_profile=options["sim_profile"])
        tick = options["tick"] or tick_seconds()
        register_configured_workers()
        loop = AutoscaleLoop(actuator, sync_redis(), tick_s=tick)
        self.stdout.write(f"autoscaler: {actuator.name} actuator, tick {tick:g} s")
        standby = False
        # `make run` stops us with SIGTERM: release the lease so a restart leads at once.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
        try:
            while True:
                started = time.monotonic()
                try:
                    decisions = loop.tick()
                except Exception:
                    if options["once"]:
                        raise
                    # A database or Redis hiccup costs one tick, not the process (which
                    # `make run` would answer by stopping the whole platform).
                    logger.exception("autoscaler tick failed; retrying next tick")
                    close_old_connections()
                else:
                    if decisions is None and not standby:
                        self.stdout.write("standby: another process holds the autoscaler lease")
                    standby = decisions is None
                    for row in decisions or []:
                        change = f"{row.from_replicas}->{row.to_replicas}"
                        self.stdout.write(
                            f"{row.deployment.name}: {row.action} {change} {row.reason}"
                        )
                if options["once"]:
                    return
                time.sleep(max(tick - (time.monotonic() - started), 0.1))
        except KeyboardInterrupt:
            pass
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)
            loop.stop()


def register_configured_workers() -> None:
    """The SLUICE_WORKERS the scraper has not registered yet. `make run` starts the scraper
    and this loop together, and the scraper registers them: a first tick before it would
    see the embedded deployment with no worker and start one beside its own (min_replicas
    1). A worker already known is left as it is (re-registering would take it out of
    rotation until the next scrape)."""
    for model, url in fleet.parse_worker_setting(settings.SLUICE_WORKERS):
        known = Worker.objects.filter(url=url.rstrip("/")).exclude(state=Worker.State.DEAD)
        if not known.exists():
            fleet.register_worker(fleet.ensure_deployment(model), url, registered_by="settings")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
