"""`manage.py replay TRACE`: the autoscaler against a request trace, in simulated or real time.

A thin adapter: it turns arguments into a policy and options, calls the replay
(scaling/replay/comparison.py in simulated time, scaling/replay/live/ with --live),
and prints the report that scaling/replay/report_text.py and live/report_text.py write.
"""

import json
import os
from argparse import ArgumentParser
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from foundation.embedded_redis import EmbeddedRedisError
from scaling.autoscale.types import PolicySpec
from scaling.replay.analytical_fleet import FleetModel
from scaling.replay.comparison import MODES, compare
from scaling.replay.inputs import ReplayInputError, deployment_policy, gpu_cost, measured_from_s
from scaling.replay.live.load import fit_rate_scale, mean_output_tokens, window
from scaling.replay.live.options import FIXED, LiveOptions, LiveReplayError
from scaling.replay.live.pools import DEFAULT_POOL_SIZE, parse_pools, pool_policy
from scaling.replay.live.prediction import predicted
from scaling.replay.live.private_redis import PrivateRedis
from scaling.replay.live.replay import LiveReplay
from scaling.replay.live.report import LiveResult
from scaling.replay.live.report_text import live_header, live_report
from scaling.replay.report_text import result_as_dict, simulated_report
from scaling.replay.traces import Demand, load_trace, trace_path

LIVE_MODES = ("reactive", "predictive")
LIVE_MAX_REPLICAS = 16  # processes on this host: keep the fleet small


class Command(BaseCommand):
    help = (
        "Replay a request trace (steady, diurnal, spike, multitenant, or a .jsonl path) "
        "through the autoscaler in simulated time on an analytical fleet model, and "
        "report SLO attainment, GPU-hours, cost and scaling events against an oracle "
        "that knows the future. --live: in real time instead, on simulator "
        "processes that the autoscale loop starts and stops (docs/autoscaling.md, "
        "Live replay)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("trace")
        parser.add_argument(
            "--modes",
            help="comma-separated (default: oracle,reactive,"
            "predictive; with --live: reactive,predictive)",
        )
        parser.add_argument("--deployment", help="use this deployment's AutoscalePolicy")
        parser.add_argument("--startup-time", type=float, default=180.0)
        parser.add_argument("--warm-pool", type=int, default=0)
        parser.add_argument("--min-replicas", type=int, default=1)
        parser.add_argument("--max-replicas", type=int, help="default 2000; with --live 4")
        parser.add_argument(
            "--slots", type=int, help="batch slots per replica (default 64; with --live 8)"
        )
        parser.add_argument("--ttft-target", type=float, help="default: the trace's, or 1.0")
        parser.add_argument(
            "--gpu-cost",
            type=float,
            default=4.0,
            help="per GPU-hour (default: the deployment's, else 4.0)",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--measure-from-hours",
            type=float,
            help="exclude a warm-up (default: the first day of a trace of "
            "two days or more, so seasonality has a yesterday)",
        )
        parser.add_argument("--events", type=int, default=0, help="list this many events")
        parser.add_argument("--json", action="store_true")
        live = parser.add_argument_group("live replay (--live)")
        live.add_argument(
            "--live",
            action="store_true",
            help="real time: simulator processes, the real loop and scraper, "
            "requests through the dispatcher",
        )
        live.add_argument(
            "--speed",
            type=float,
            default=30.0,
            help="trace seconds per wall second; the policy's tick, windows, "
            "cooldowns and start-up are divided by it (default 30)",
        )
        live.add_argument(
            "--rate-scale",
            type=float,
            help="wall req/s per trace req/s (default: the window's peak needs "
            "max-replicas - 1 replicas at the target utilisation)",
        )
        live.add_argument(
            "--start", type=float, default=0.0, help="trace second to start the window at"
        )
        live.add_argument(
            "--duration", type=float, help="trace seconds to replay (default: to the trace's end)"
        )
        live.add_argument(
            "--lead-in",
            type=float,
            default=300.0,
            help="trace seconds at the window's first rate before measuring",
        )
        live.add_argument(
            "--live-tokens",
            type=int,
            default=16,
            help="chunks streamed per request; a request still lasts as long "
            "as the trace's output tokens at 15 ms each (default 16)",
        )
        live.add_argument(
            "--live-worker",
            default=FIXED,
            help="fixed (250 ms to the first token + 15 ms per trace output "
            "token, at any load: FleetModel's request) or a simulator "
            "profile name (its batching model, at real time)",
        )
        live.add_argument(
            "--pools",
            help="run each controller once per warm pool: comma-separated of cold (no "
            "warm pool), warm (--warm-pool replicas, default 1, awake), asleep (the same "
            "in sleep mode, woken in --wake-time); e.g. cold,warm,asleep",
        )
        live.add_argument(
            "--warm-pool-sleeps",
            action="store_true",
            help="the warm pool sleeps (vLLM's sleep mode; needs --warm-pool)",
        )
        live.add_argument(
            "--wake-time",
            type=float,
            default=10.0,
            help="trace seconds a sleeping replica takes to wake, divided by --speed "
            "like the start-up time (default 10)",
        )
        live.add_argument(
            "--redis-url",
            default="",
            help="default: REDIS_URL from the environment, else a private "
            "bundled Redis 8 for the run",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            demand = load_trace(trace_path(options["trace"]))
        except FileNotFoundError as exc:
            raise CommandError(str(exc)) from None
        target = options["ttft_target"] or float(demand.meta.get("ttft_target_s", 1.0))
        try:
            if options["live"]:
                self._live(demand, options, target)
            else:
                self._simulated(demand, options, target)
        except ReplayInputError as exc:
            raise CommandError(str(exc)) from None

    def _simulated(self, demand: Demand, options: dict[str, Any], target: float) -> None:
        options["max_replicas"] = options["max_replicas"] or 2000
        options["slots"] = options["slots"] or 64
        policy = self._policy(options, target)
        model = FleetModel(
            slots_per_replica=policy.slots_per_replica,
            startup_time_s=policy.startup_time_s,
            gpu_cost_per_hour=gpu_cost(options["deployment"], options["gpu_cost"]),
            ttft_target_s=target,
        )
        measure_s = measured_from_s(demand, options["measure_from_hours"])
        modes = (options["modes"] or ",".join(MODES)).split(",")
        results = compare(
            demand, model, policy, modes, seed=options["seed"], measure_from_s=measure_s
        )
        if options["json"]:
            self.stdout.write(json.dumps([result_as_dict(r) for r in results], indent=2))
            return
        self._write(simulated_report(demand, policy, model, measure_s, results, options["events"]))

    def _policy(self, options: dict[str, Any], target: float) -> PolicySpec:
        if options["deployment"]:
            return deployment_policy(options["deployment"])
        return PolicySpec(
            min_replicas=options["min_replicas"],
            max_replicas=options["max_replicas"],
            warm_pool=options["warm_pool"],
            ttft_p99_target_s=target,
            startup_time_s=options["startup_time"],
            slots_per_replica=options["slots"],
        )

    def _live(self, trace: Demand, options: dict[str, Any], target: float) -> None:
        modes = (options["modes"] or ",".join(LIVE_MODES)).split(",")
        if unknown := [m for m in modes if m not in LIVE_MODES]:
            raise CommandError(
                f"--live runs {' or '.join(LIVE_MODES)}, not {unknown[0]!r} "
                "(the oracle needs the future)"
            )
        options["max_replicas"] = options["max_replicas"] or 4
        options["slots"] = options["slots"] or 64
        policy = self._policy(options, target)
        if policy.max_replicas > LIVE_MAX_REPLICAS:
            raise CommandError(
                f"--live starts one process per replica on this host: keep "
                f"--max-replicas at most {LIVE_MAX_REPLICAS}"
            )
        if options["speed"] <= 0 or options["live_tokens"] < 2:
            raise CommandError("--speed must be positive and --live-tokens at least 2")
        policy = self._asleep(policy, options)
        runs = self._runs(policy, modes, options)
        try:
            demand = window(trace, options["start"], options["duration"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        live = LiveOptions(
            speed=options["speed"],
            rate_scale=options["rate_scale"],
            start_s=options["start"],
            duration_s=options["duration"],
            lead_in_s=options["lead_in"],
            tokens=options["live_tokens"],
            output_tokens=mean_output_tokens(demand),
            worker=options["live_worker"],
            ttft_target_s=target,
            gpu_cost_per_hour=gpu_cost(options["deployment"], options["gpu_cost"]),
            seed=options["seed"],
            wake_time_s=options["wake_time"],
        )
        live = replace(live, rate_scale=live.rate_scale or fit_rate_scale(demand, policy, live))
        pools = parse_pools(options["pools"]) if options["pools"] else None
        if not options["json"]:
            self._write(live_header(trace, demand, policy, live, pools))
        results: list[LiveResult] = []
        with self._redis(options["redis_url"]) as url:
            for label, run in runs:
                try:
                    results.append(LiveReplay(demand, run, live, url, label=label).run())
                except KeyboardInterrupt:
                    raise CommandError(
                        f"interrupted during the {run.mode} {label} run; every replica "
                        "it started has been stopped"
                    ) from None
                except LiveReplayError as exc:
                    raise CommandError(str(exc)) from None
        models = [predicted(demand, replace(policy, mode="oracle"), live)]
        for label, run in runs:
            if label == "asleep":
                continue  # the model has no sleep mode: its warm row stands for asleep too
            models.append(predicted(demand, run, live))
            if label:
                models[-1].name = f"{run.mode} {label} (model)"
        if options["json"]:
            rows = [r.as_dict() for r in results]
            rows += [{**result_as_dict(m), "live": False} for m in models]
            self.stdout.write(json.dumps(rows, indent=2))
            return
        self._write(live_report(results, models, options["events"]))

    def _asleep(self, policy: PolicySpec, options: dict[str, Any]) -> PolicySpec:
        """The policy with --warm-pool-sleeps, checked against --warm-pool and --pools."""
        if options["wake_time"] < 0:
            raise CommandError("--wake-time must not be negative")
        if not options["warm_pool_sleeps"]:
            return policy
        if options["pools"]:
            raise CommandError("--pools sets each run's warm pool: drop --warm-pool-sleeps")
        if policy.warm_pool < 1:
            raise CommandError("--warm-pool-sleeps needs a warm pool: --warm-pool N")
        return replace(policy, warm_sleeps=True)

    def _runs(
        self, policy: PolicySpec, modes: list[str], options: dict[str, Any]
    ) -> list[tuple[str, PolicySpec]]:
        """(label, policy) for each live run, in order: per controller, each --pools
        variant (scaling/replay/live/pools.py), else the policy as given."""
        if not options["pools"]:
            return [("", replace(policy, mode=mode)) for mode in modes]
        try:
            pools = parse_pools(options["pools"])
            size = policy.warm_pool or DEFAULT_POOL_SIZE
            return [
                (pool, pool_policy(replace(policy, mode=mode), pool, size))
                for mode in modes
                for pool in pools
            ]
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    @contextmanager
    def _redis(self, url: str) -> Iterator[str]:
        """--redis-url, else REDIS_URL, else a private bundled Redis for the run."""
        redis = PrivateRedis(url or os.environ.get("REDIS_URL", ""))
        try:
            url = redis.start()
        except EmbeddedRedisError as exc:
            raise CommandError(f"{exc}; or give --redis-url (Redis >= 8)") from exc
        try:
            yield url
        finally:
            redis.stop()

    def _write(self, lines: list[str]) -> None:
        for line in lines:
            self.stdout.write(line)
