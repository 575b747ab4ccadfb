import time
from argparse import ArgumentParser
from dataclasses import fields
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from bench.chaos.faults import KINDS, SCHEDULES
from bench.chaos.run import Options, run
from bench.chaos.stack import StackSetup


class Command(BaseCommand):
    help = (
        "Faults under load: start a private stack (Redis 8 with AOF, two gateways, Celery, "
        "beat, the scraper, simulator workers), drive open-loop load from teams with tight "
        "quotas while processes are killed, stopped and restarted on a schedule, then check "
        "the history against the usage ledger and print a report; exits non-zero on any "
        "violation (docs/loadtest.md, 'Chaos run')."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--duration-s", type=float, default=600.0)
        parser.add_argument("--load", type=float, default=0.7, help="share of capacity offered")
        parser.add_argument("--schedule", choices=sorted(SCHEDULES), default="default")
        parser.add_argument(
            "--faults", default="", help=f"only these kinds, comma-separated: {', '.join(KINDS)}"
        )
        parser.add_argument("--batch-lines", type=int, default=2000, help="0: no batch")
        parser.add_argument("--idle-sockets", type=int, default=2)
        parser.add_argument("--idle-s", type=float, default=150.0)
        parser.add_argument("--grace-s", type=float, default=15.0)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--run-dir", default="", help="default: var/chaos/<time>")
        for option in fields(StackSetup):
            flag = f"--{option.name.replace('_', '-')}"
            parser.add_argument(flag, type=type(option.default), default=option.default)

    def handle(self, *args: Any, **options: Any) -> None:
        run_dir = Path(
            options["run_dir"] or settings.VAR_DIR / "chaos" / time.strftime("%Y%m%d-%H%M%S")
        )
        run_dir.mkdir(parents=True, exist_ok=True)
        stack = StackSetup(**{option.name: options[option.name] for option in fields(StackSetup)})
        chosen = [kind.strip() for kind in options["faults"].split(",") if kind.strip()]
        unknown = sorted(set(chosen) - set(KINDS))
        if unknown:
            raise CommandError(f"unknown faults {unknown}; the kinds are {', '.join(KINDS)}")
        outcome = run(
            Options(
                stack=stack,
                duration_s=options["duration_s"],
                load=options["load"],
                schedule=options["schedule"],
                faults=chosen or None,
                batch_lines=options["batch_lines"],
                idle_sockets=options["idle_sockets"],
                idle_s=options["idle_s"],
                grace_s=options["grace_s"],
                seed=options["seed"],
                run_dir=run_dir,
            )
        )
        self.stdout.write(outcome.report)
        if not outcome.passed:
            raise CommandError(f"the chaos run found violations; see {run_dir / 'report.md'}")
