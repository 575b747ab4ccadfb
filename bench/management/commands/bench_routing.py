from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from bench.routing import Workload, compare, summary, table
from inference.sim.profiles import PROFILES
from scaling.routing.policies import POLICIES


class Command(BaseCommand):
    help = (
        "Compare routing policies on a shared-prefix multi-tenant trace: fresh simulator "
        "workers per policy, the same trace, TTFT P50/P99, throughput and per-worker share "
        "as a markdown table (docs/routing.md)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        defaults = Workload()
        parser.add_argument("--policies", default="round_robin,least_loaded,prefix_aware")
        parser.add_argument("--workers", type=int, default=4)
        parser.add_argument("--profile", choices=sorted(PROFILES), default="a10g-llama3-8b")
        parser.add_argument(
            "--max-in-flight", type=int, help="per worker (default: the profile's max_num_seqs)"
        )
        for name, value in vars(defaults).items():
            parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)

    def handle(self, *args: Any, **options: Any) -> None:
        policies = [p.strip() for p in options["policies"].split(",") if p.strip()]
        unknown = sorted(set(policies) - set(POLICIES))
        if unknown:
            raise SystemExit(f"unknown policies {unknown}; choose from {sorted(POLICIES)}")
        workload = Workload(**{name: options[name] for name in vars(Workload())})
        self.stdout.write(f"{options['workers']} x {options['profile']}, {workload}\n")
        results = compare(
            policies, workload, options["workers"], options["profile"], options["max_in_flight"]
        )
        self.stdout.write(table(results, workload))
        p99 = summary(results, workload)
        if "prefix_aware" in p99:
            for baseline in ("round_robin", "least_loaded"):
                if baseline in p99 and p99["prefix_aware"] > 0:
                    ratio = p99[baseline] / p99["prefix_aware"]
                    self.stdout.write(f"P99 TTFT {baseline} / prefix_aware: {ratio:.1f}x")
