import json
import os
import subprocess
import sys
import tempfile
from argparse import ArgumentParser
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from foundation import embedded_redis
from inference.models import ModelDeployment
from scaling.autoscale.record import policy_spec
from scaling.autoscale.types import PolicySpec
from scaling.models import AutoscalePolicy
from scaling.replay.analytical_fleet import FleetModel
from scaling.replay.live import (
    FIXED,
    LiveOptions,
    LiveReplay,
    LiveReplayError,
    LiveResult,
    TimeScale,
    fit_rate_scale,
    mean_output_tokens,
    window,
)
from scaling.replay.simulated import (
    AutoscalerController,
    Controller,
    OracleController,
    ReplayResult,
    replay,
)
from scaling.replay.traces import Demand, load_trace, trace_path

MODES = ("oracle", "reactive", "predictive")
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
        if options["live"]:
            self._live(demand, options, target)
            return
        options["max_replicas"] = options["max_replicas"] or 2000
        options["slots"] = options["slots"] or 64
        policy = self._policy(options, target)
        model = FleetModel(
            slots_per_replica=policy.slots_per_replica,
            startup_time_s=policy.startup_time_s,
            gpu_cost_per_hour=self._gpu_cost(options),
            ttft_target_s=target,
        )
        measure = options["measure_from_hours"]
        measure_s = (
            (86_400.0 if demand.seconds >= 2 * 86_400 else 0.0)
            if measure is None
            else measure * 3600
        )
        results = [
            replay(
                demand,
                model,
                self._controller(mode, policy, demand, model),
                policy,
                seed=options["seed"],
                measure_from_s=measure_s,
            )
            for mode in (options["modes"] or ",".join(MODES)).split(",")
        ]
        if options["json"]:
            self.stdout.write(json.dumps([_as_dict(r) for r in results], indent=2))
            return
        self._report(demand, policy, model, measure_s, results, options["events"])

    def _policy(self, options: dict[str, Any], target: float) -> PolicySpec:
        if options["deployment"]:
            row = (
                AutoscalePolicy.objects.select_related("deployment")
                .filter(deployment__name=options["deployment"])
                .first()
            )
            if row is None:
                known = ModelDeployment.objects.filter(name=options["deployment"]).exists()
                name = options["deployment"]
                raise CommandError(
                    f"{name} has no AutoscalePolicy" if known else f"no deployment {name}"
                )
            return policy_spec(row)
        return PolicySpec(
            min_replicas=options["min_replicas"],
            max_replicas=options["max_replicas"],
            warm_pool=options["warm_pool"],
            ttft_p99_target_s=target,
            startup_time_s=options["startup_time"],
            slots_per_replica=options["slots"],
        )

    def _gpu_cost(self, options: dict[str, Any]) -> float:
        """The deployment's own price when replaying its policy and it has one."""
        if options["deployment"]:
            row = ModelDeployment.objects.filter(name=options["deployment"]).first()
            if row is not None and row.gpu_cost_per_hour > 0:
                return float(row.gpu_cost_per_hour)
        return float(options["gpu_cost"])

    def _controller(
        self, mode: str, policy: PolicySpec, demand: Demand, model: FleetModel
    ) -> Controller:
        if mode == "oracle":
            return OracleController(policy, demand, model)
        if mode in ("reactive", "predictive"):
            return AutoscalerController(replace(policy, mode=mode))
        raise CommandError(f"unknown mode {mode!r}: use {', '.join(MODES)}")

    def _report(
        self,
        demand: Demand,
        policy: PolicySpec,
        model: FleetModel,
        measure_s: float,
        results: list[ReplayResult],
        events: int,
    ) -> None:
        hours = demand.seconds / 3600
        self.stdout.write(
            f"trace {demand.meta.get('trace', '?')}: {hours:.1f} h, "
            f"{sum(demand.rate):,.0f} requests expected; measured from "
            f"{measure_s / 3600:g} h"
        )
        self.stdout.write(
            f"simulated time, analytical fleet: {model.slots_per_replica} slots "
            f"per replica, start-up {model.startup_time_s:g} s, TTFT target "
            f"{model.ttft_target_s:g} s, warm pool {policy.warm_pool}"
        )
        oracle = next((r for r in results if r.name == "oracle"), None)
        self.stdout.write(
            f"{'controller':<11} {'requests':>11} {'in SLO':>8} {'GPU-h':>9} "
            f"{'x oracle':>8} {'cost':>10} {'ups':>4} {'downs':>5} "
            f"{'rev<30m':>7}"
        )
        for r in results:
            ratio = f"{r.gpu_hours / oracle.gpu_hours:.2f}" if oracle and oracle.gpu_hours else "-"
            self.stdout.write(
                f"{r.name:<11} {r.requests:>11,.0f} {r.attainment:>8.2%} "
                f"{r.gpu_hours:>9,.1f} {ratio:>8} {r.cost:>10,.0f} "
                f"{r.count('up'):>4} {r.count('down'):>5} "
                f"{r.reversals:>7}"
            )
        for r in results if events else []:
            self.stdout.write(f"\n{r.name}: first {events} scaling events")
            for e in r.events[:events]:
                self.stdout.write(
                    f"  {e['t'] / 3600:7.2f} h {e['action']:<4} "
                    f"{e['from']:>4} -> {e['to']:<4} {e['rule']}"
                )

    # the live replay

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
            gpu_cost_per_hour=self._gpu_cost(options),
            seed=options["seed"],
        )
        rate_scale = live.rate_scale or fit_rate_scale(demand, policy, live)
        live = replace(live, rate_scale=rate_scale)
        if not options["json"]:
            self._live_header(trace, demand, policy, live)
        results: list[LiveResult] = []
        with self._redis(options) as url:
            for mode in modes:
                try:
                    results.append(LiveReplay(demand, replace(policy, mode=mode), live, url).run())
                except KeyboardInterrupt:
                    raise CommandError(
                        f"interrupted during the {mode} run; every replica "
                        "it started has been stopped"
                    ) from None
                except LiveReplayError as exc:
                    raise CommandError(str(exc)) from None
        models = [
            self._model_replay(demand, replace(policy, mode=m), live) for m in ("oracle", *modes)
        ]
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    [
                        *(r.as_dict() for r in results),
                        *({**_as_dict(m), "live": False} for m in models),
                    ],
                    indent=2,
                )
            )
            return
        self._live_report(results, models, options["events"])

    def _redis(self, options: dict[str, Any]) -> "_RedisFor":
        return _RedisFor(options["redis_url"] or os.environ.get("REDIS_URL", ""))

    def _model_replay(self, demand: Demand, policy: PolicySpec, live: LiveOptions) -> ReplayResult:
        """The analytical replay of the same scaled load (rate x rate_scale, the live
        request's service time), in trace time with the unscaled policy: what the
        simulated-time replay predicts for this live run."""
        scale = live.rate_scale or 1.0
        scaled = Demand(
            rate=[r * scale for r in demand.rate],
            output_tokens=[live.output_tokens] * demand.seconds,
            meta=demand.meta,
        )
        model = FleetModel(
            slots_per_replica=policy.slots_per_replica,
            base_ttft_s=live.worker_ttft_s,
            per_token_s=live.per_token_s,
            startup_time_s=policy.startup_time_s,
            gpu_cost_per_hour=live.gpu_cost_per_hour,
            ttft_target_s=live.ttft_target_s,
        )
        controller: Controller = (
            OracleController(policy, scaled, model)
            if policy.mode == "oracle"
            else AutoscalerController(policy)
        )
        result = replay(scaled, model, controller, policy, seed=live.seed)
        result.name = f"{policy.mode} (model)"
        return result

    def _live_header(
        self, trace: Demand, demand: Demand, policy: PolicySpec, live: LiveOptions
    ) -> None:
        scale, rate = TimeScale(live.speed), live.rate_scale or 1.0
        wall = (live.lead_in_s + demand.seconds) / live.speed
        worker = (
            f"fixed latency: first chunk after {live.worker_ttft_s * 1000:g} ms, then "
            f"{live.tokens - 1} more {live.worker_itl_s * 1000:.0f} ms apart = a "
            f"{live.output_tokens:.0f}-token request at {live.per_token_s * 1000:g} "
            f"ms/token, {live.service_s:.2f} s"
            if live.worker == FIXED
            else f"profile {live.worker}"
        )
        self.stdout.write(
            f"trace {trace.meta.get('trace', '?')}: live replay of trace seconds "
            f"{live.start_s:g}-{live.start_s + demand.seconds:g} ({demand.seconds / 3600:.2f} h) "
            f"at speed {live.speed:g}: about {wall:.0f} s of wall time per controller"
        )
        self.stdout.write(
            f"rate x{rate:.3g}: trace peak {max(demand.rate):,.0f} req/s -> "
            f"{max(demand.rate) * rate:.1f} req/s; mean {sum(demand.rate) / demand.seconds:,.0f}"
            f" -> {sum(demand.rate) / demand.seconds * rate:.1f} req/s"
        )
        self.stdout.write(
            f"real: simulator processes ({worker}; {policy.slots_per_replica} slots each in "
            f"the dispatcher), scraper, AutoscaleLoop, "
            f"decide(), LocalProcessActuator, Dispatcher + stream_completion; replicas "
            f"{policy.min_replicas}-{policy.max_replicas}, warm pool {policy.warm_pool}, "
            f"TTFT target {live.ttft_target_s:g} s (wall)"
        )
        self.stdout.write(f"scaled by 1/{live.speed:g}: {scale.describe(policy)}")

    def _live_report(
        self, results: list[LiveResult], models: list[ReplayResult], events: int
    ) -> None:
        oracle = next((m.gpu_hours for m in models if m.name.startswith("oracle")), 0.0)

        def ratio(gpu_hours: float) -> str:
            return f"{gpu_hours / oracle:.2f}" if oracle else "-"

        self.stdout.write(
            f"{'controller':<19} {'requests':>9} {'in SLO':>8} {'errors':>6} "
            f"{'TTFT P50':>8} {'P99':>6} {'GPU-h':>8} {'x oracle':>8} "
            f"{'cost':>9} {'ups':>4} {'downs':>5} {'rev<30m':>7} "
            f"{'peak':>4}"
        )
        for r in results:
            p50, p99 = _seconds(r.ttft_p50_s), _seconds(r.ttft_p99_s)
            self.stdout.write(
                f"{r.replay.name:<19} {r.replay.requests:>9,.0f} {r.replay.attainment:>8.2%} "
                f"{sum(r.errors.values()):>6} {p50:>8} {p99:>6} {r.replay.gpu_hours:>8.2f} "
                f"{ratio(r.replay.gpu_hours):>8} {r.replay.cost:>9,.2f} "
                f"{r.replay.count('up'):>4} {r.replay.count('down'):>5} "
                f"{r.replay.reversals:>7} {r.peak_serving:>4}"
            )
        for m in models:
            peak = max((serving for _, serving, _ in m.timeline), default=0)
            self.stdout.write(
                f"{m.name:<19} {m.requests:>9,.0f} {m.attainment:>8.2%} {'-':>6} {'-':>8} "
                f"{'-':>6} {m.gpu_hours:>8.2f} {ratio(m.gpu_hours):>8} {m.cost:>9,.2f} "
                f"{m.count('up'):>4} {m.count('down'):>5} {m.reversals:>7} {peak:>4}"
            )
        self.stdout.write(
            "GPU-h: replica-seconds on the wall clock x speed (trace hours of the "
            "scaled fleet). (model) rows: the simulated-time replay of the same "
            "scaled load; it counts requests per trace second, the live rows per "
            "wall second."
        )
        for r in results:
            startup = r.startup_s
            self.stdout.write(
                f"{r.mode}: {r.sent} sent, {r.measured} measured, errors {r.errors or 0}, "
                f"{r.replica_seconds:.1f} replica-seconds in {r.wall_s:.0f} s wall, "
                f"{len(r.replicas)} processes started, start-up measured "
                + (f"{min(startup):.1f}-{max(startup):.1f} s wall" if startup else "-")
                + f", driver lag P99 {r.driver_lag_p99_s * 1000:.0f} ms"
                + (f", {r.tick_errors} failed ticks" if r.tick_errors else "")
            )
            for d in [d for d in r.decisions if d["action"] != "hold"][:events]:
                self.stdout.write(
                    f"  {d['t'] / 3600:7.3f} h {d['action']:<5} "
                    f"{d['from']:>2} -> {d['to']:<2} {d['rule']}: {d['reason']}"
                )


class _RedisFor:
    """The given Redis, else a private bundled Redis 8 for the length of the run."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> str:
        if self.url:
            return self.url
        self.scratch = tempfile.TemporaryDirectory(prefix="sluice-replay-")
        port = embedded_redis.free_port()
        command = embedded_redis.redis_server_command(port, Path(self.scratch.name), False)
        # Its log goes to stderr: stdout is the report (and --json must parse).
        self.process = subprocess.Popen(command, stdout=sys.stderr, stderr=sys.stderr)
        url = f"redis://127.0.0.1:{port}/0"
        try:
            embedded_redis.wait_until_ready(url, self.process)
        except embedded_redis.EmbeddedRedisError as exc:
            self.process.kill()
            self.scratch.cleanup()
            raise CommandError(f"{exc}; or give --redis-url (Redis >= 8)") from exc
        return url

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.scratch is not None:
            self.scratch.cleanup()


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _as_dict(result: ReplayResult) -> dict[str, Any]:
    return {
        "controller": result.name,
        "requests": result.requests,
        "attainment": result.attainment,
        "gpu_hours": result.gpu_hours,
        "cost": result.cost,
        "ups": result.count("up"),
        "downs": result.count("down"),
        "reversals_30m": result.reversals,
        "events": result.events,
    }
