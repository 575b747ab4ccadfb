import json
from argparse import ArgumentParser
from dataclasses import replace
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from inference.models import ModelDeployment
from scaling.autoscale_record import policy_spec
from scaling.autoscale_replay import (
    AutoscalerController,
    Controller,
    OracleController,
    ReplayResult,
    replay,
)
from scaling.autoscale_sim import FleetModel
from scaling.autoscale_trace import Demand, load_trace, trace_path
from scaling.autoscale_types import PolicySpec
from scaling.models import AutoscalePolicy

MODES = ("oracle", "reactive", "predictive")


class Command(BaseCommand):
    help = ("Replay a request trace (steady, diurnal, spike, multitenant, or a .jsonl path) "
            "through the autoscaler in simulated time on an analytical fleet model, and "
            "report SLO attainment, GPU-hours, cost and scaling events against an oracle "
            "that knows the future.")  # fmt: skip

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("trace")
        parser.add_argument("--modes", default=",".join(MODES), help="comma-separated")
        parser.add_argument("--deployment", help="use this deployment's AutoscalePolicy")
        parser.add_argument("--startup-time", type=float, default=180.0)
        parser.add_argument("--warm-pool", type=int, default=0)
        parser.add_argument("--min-replicas", type=int, default=1)
        parser.add_argument("--max-replicas", type=int, default=2000)
        parser.add_argument("--slots", type=int, default=64, help="batch slots per replica")
        parser.add_argument("--ttft-target", type=float, help="default: the trace's, or 1.0")
        parser.add_argument("--gpu-cost", type=float, default=4.0,
                            help="per GPU-hour (default: the deployment's, else 4.0)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--measure-from-hours", type=float,
                            help="exclude a warm-up (default: the first day of a trace of "
                                 "two days or more, so seasonality has a yesterday)")  # fmt: skip
        parser.add_argument("--events", type=int, default=0, help="list this many events")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            demand = load_trace(trace_path(options["trace"]))
        except FileNotFoundError as exc:
            raise CommandError(str(exc)) from None
        target = options["ttft_target"] or float(demand.meta.get("ttft_target_s", 1.0))
        policy = self._policy(options, target)
        model = FleetModel(slots_per_replica=policy.slots_per_replica,
                           startup_time_s=policy.startup_time_s,
                           gpu_cost_per_hour=self._gpu_cost(options),
                           ttft_target_s=target)  # fmt: skip
        measure = options["measure_from_hours"]
        measure_s = (86_400.0 if demand.seconds >= 2 * 86_400 else 0.0) if measure is None \
            else measure * 3600
        results = [replay(demand, model, self._controller(mode, policy, demand, model), policy,
                          seed=options["seed"], measure_from_s=measure_s)
                   for mode in options["modes"].split(",")]  # fmt: skip
        if options["json"]:
            self.stdout.write(json.dumps([_as_dict(r) for r in results], indent=2))
            return
        self._report(demand, policy, model, measure_s, results, options["events"])

    def _policy(self, options: dict[str, Any], target: float) -> PolicySpec:
        if options["deployment"]:
            row = (AutoscalePolicy.objects.select_related("deployment")
                   .filter(deployment__name=options["deployment"]).first())  # fmt: skip
            if row is None:
                known = ModelDeployment.objects.filter(name=options["deployment"]).exists()
                name = options["deployment"]
                raise CommandError(f"{name} has no AutoscalePolicy" if known
                                   else f"no deployment {name}")
            return policy_spec(row)
        return PolicySpec(min_replicas=options["min_replicas"],
                          max_replicas=options["max_replicas"], warm_pool=options["warm_pool"],
                          ttft_p99_target_s=target, startup_time_s=options["startup_time"],
                          slots_per_replica=options["slots"])  # fmt: skip

    def _gpu_cost(self, options: dict[str, Any]) -> float:
        """The deployment's own price when replaying its policy and it has one."""
        if options["deployment"]:
            row = ModelDeployment.objects.filter(name=options["deployment"]).first()
            if row is not None and row.gpu_cost_per_hour > 0:
                return float(row.gpu_cost_per_hour)
        return float(options["gpu_cost"])

    def _controller(self, mode: str, policy: PolicySpec, demand: Demand,
                    model: FleetModel) -> Controller:  # fmt: skip
        if mode == "oracle":
            return OracleController(policy, demand, model)
        if mode in ("reactive", "predictive"):
            return AutoscalerController(replace(policy, mode=mode))
        raise CommandError(f"unknown mode {mode!r}: use {', '.join(MODES)}")

    def _report(self, demand: Demand, policy: PolicySpec, model: FleetModel, measure_s: float,
                results: list[ReplayResult], events: int) -> None:  # fmt: skip
        hours = demand.seconds / 3600
        self.stdout.write(f"trace {demand.meta.get('trace', '?')}: {hours:.1f} h, "
                          f"{sum(demand.rate):,.0f} requests expected; measured from "
                          f"{measure_s / 3600:g} h")  # fmt: skip
        self.stdout.write(f"simulated time, analytical fleet: {model.slots_per_replica} slots "
                          f"per replica, start-up {model.startup_time_s:g} s, TTFT target "
                          f"{model.ttft_target_s:g} s, warm pool {policy.warm_pool}")  # fmt: skip
        oracle = next((r for r in results if r.name == "oracle"), None)
        self.stdout.write(f"{'controller':<11} {'requests':>11} {'in SLO':>8} {'GPU-h':>9} "
                          f"{'x oracle':>8} {'cost':>10} {'ups':>4} {'downs':>5} "
                          f"{'rev<30m':>7}")
        for r in results:
            ratio = f"{r.gpu_hours / oracle.gpu_hours:.2f}" if oracle and oracle.gpu_hours else "-"
            self.stdout.write(f"{r.name:<11} {r.requests:>11,.0f} {r.attainment:>8.2%} "
                              f"{r.gpu_hours:>9,.1f} {ratio:>8} {r.cost:>10,.0f} "
                              f"{r.count('up'):>4} {r.count('down'):>5} "
                              f"{r.reversals:>7}")
        for r in results if events else []:
            self.stdout.write(f"\n{r.name}: first {events} scaling events")
            for e in r.events[:events]:
                self.stdout.write(f"  {e['t'] / 3600:7.2f} h {e['action']:<4} "
                                  f"{e['from']:>4} -> {e['to']:<4} {e['rule']}")  # fmt: skip


def _as_dict(result: ReplayResult) -> dict[str, Any]:
    return {"controller": result.name, "requests": result.requests,
            "attainment": result.attainment, "gpu_hours": result.gpu_hours,
            "cost": result.cost, "ups": result.count("up"), "downs": result.count("down"),
            "reversals_30m": result.reversals, "events": result.events}  # fmt: skip
