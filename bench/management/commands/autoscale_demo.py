"""python manage.py autoscale_demo: watch the autoscaler add replicas. Against a running
`make run`, sets up a simulated deployment (demo-fleet) with a predictive policy on short
clocks, then drives a traffic ramp and a spike at it with `manage.py bench`'s open-loop
driver, and prints the decisions the loop took (docs/autoscaling.md, "Watch it scale")."""

import asyncio
import json
import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from bench import autoscale_demo as demo
from bench.loadtest import report
from bench.loadtest.drivers import Stop, open_loop, session_for
from bench.loadtest.probe import Endpoint, send
from bench.loadtest.summary import LevelSummary, summarize
from bench.loadtest.workloads import WorkloadSpec, requests_for
from bench.management.commands.bench import ProgressBar, _numbers
from foundation.redis_clients import REDIS_FAILURES, sync_redis
from gateway.accounts.models import Team
from gateway.dashboard.fleet_sampling import read_snapshot
from inference.models import ModelDeployment, Worker
from scaling.autoscale.status import loop_status
from scaling.models import ScalingDecision

Timeline = list[tuple[float, dict[str, int]]]  # (seconds since the load began, counts)


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url",
            default="http://127.0.0.1:8000",
            help="the running platform (default: a local `make run`)",
        )
        parser.add_argument(
            "--rates",
            default=",".join(f"{r:g}" for r in demo.DEFAULT_RATES),
            help="open-loop arrival rates per second, one level each: a ramp, then a spike "
            "(the level with the largest rise)",
        )
        parser.add_argument(
            "--duration-per-level", type=float, default=demo.DEFAULT_DURATION_S, metavar="S"
        )
        parser.add_argument("--max-tokens", type=int, default=64)
        parser.add_argument(
            "--api-key",
            default="",
            help="use this key (of a team allowed demo-fleet) instead of issuing a new one",
        )
        parser.add_argument(
            "--ready-timeout", type=float, default=90.0, help="seconds to wait for a replica"
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--dry-run", action="store_true", help="set up only: no load (prints the new key)"
        )
        parser.add_argument(
            "--cleanup",
            action="store_true",
            help="disable the demo policy and drain and stop the demo's replicas",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["cleanup"]:
                self._cleanup()
            else:
                self._demo(options)
        except demo.DemoError as exc:
            raise CommandError(str(exc)) from None

    def _demo(self, options: dict[str, Any]) -> None:
        base = options["url"].rstrip("/")
        levels = demo.load_profile(_numbers(options["rates"]))
        self._check_platform(base)
        team = demo.demo_team()
        deployment, policy = demo.ensure_fleet()
        self.stdout.write(
            f"Deployment {deployment.name}: simulated replicas, "
            f"{deployment.max_in_flight_per_worker} requests in flight each, "
            f"GPU ${deployment.gpu_cost_per_hour:.2f}/h per replica "
            f"{'(example price)' if deployment.prices_are_examples else ''}".rstrip()
        )
        self.stdout.write(
            f"Policy: {policy.mode}, {policy.min_replicas}-{policy.max_replicas} replicas, up "
            f"> {policy.scale_up_utilisation:.0%} for {policy.scale_up_window_s} s or on the "
            f"forecast {policy.startup_time_s} s ahead, cooldown {policy.scale_up_cooldown_s} s;"
            f" down < {policy.scale_down_utilisation:.0%} for {policy.scale_down_window_s} s"
        )
        api_key = options["api_key"] or self._issue_key(team, show=options["dry_run"])
        self._wait_for_replica(deployment, options["ready_timeout"])
        if options["dry_run"]:
            self._where_to_look(base, deployment, [], [], None)
            return
        endpoint = Endpoint(f"{base}/v1", api_key, demo.DEPLOYMENT, demo.DEPLOYMENT)
        started = timezone.now()
        summaries, timeline = asyncio.run(self._drive(endpoint, deployment, levels, options))
        self.stdout.write("\n" + report.table(summaries))
        self._where_to_look(
            base, deployment, timeline, demo.decisions_since(deployment, started), started
        )

    def _check_platform(self, base: str) -> None:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=5) as response:  # noqa: S310
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise CommandError(
                f"{base}/readyz answers {exc.code}: the platform is up but not ready "
                f"({exc.read()[:300]!r}); see the `make run` terminal"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise CommandError(
                f"nothing answers at {base}/readyz ({exc}). Start the platform first: `make "
                "run` in another terminal, wait for 'Sluice is ready', then run this again "
                "from the same directory (it shares var/: the database and Redis). "
                "Elsewhere: --url"
            ) from None
        self.stdout.write(f"Platform at {base}: {json.loads(body).get('status', 'ready')}")
        try:
            loop = loop_status(sync_redis())
        except REDIS_FAILURES as exc:
            raise CommandError(f"cannot reach the platform's Redis: {exc}") from None
        if loop is None:
            raise CommandError(
                "no autoscaler loop has ticked within three ticks in this Redis: `make run` "
                "starts one (its lines are prefixed `autoscaler |`); if it runs, this "
                "command uses another var/ (SLUICE_VAR_DIR) or REDIS_URL than it does"
            )
        self.stdout.write(
            f"Autoscaler loop: {loop.actuator} actuator, pid {loop.pid}, every {loop.tick_s:g} s"
        )

    def _issue_key(self, team: Team, show: bool) -> str:
        issued = demo.issue_key(team)
        self.stdout.write(
            f"Issued a new API key {issued.key.lookup_id} ({demo.KEY_NAME!r}, team {team.name}, "
            f"model {demo.DEPLOYMENT} only); earlier keys of that name are revoked. Keys are "
            "stored hashed, so an existing one can never be shown again."
        )
        if show:
            self.stdout.write(f"It is shown once: {issued.plaintext}")
        return issued.plaintext

    def _wait_for_replica(self, deployment: ModelDeployment, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        said = False
        while not demo.replica_counts(deployment).get(Worker.State.READY):
            if time.monotonic() >= deadline:
                raise CommandError(
                    f"no {deployment.name} replica became ready within {timeout_s:g} s; see "
                    "the `autoscaler |` and `scraper |` lines of `make run`"
                )
            if not said:
                self.stdout.write("Waiting for the loop to start the first replica (min 1)…")
                said = True
            time.sleep(1.0)
        self.stdout.write(f"Replicas: {_counts(demo.replica_counts(deployment))}")

    async def _drive(
        self,
        endpoint: Endpoint,
        deployment: ModelDeployment,
        levels: list[demo.Level],
        options: dict[str, Any],
    ) -> tuple[list[LevelSummary], Timeline]:
        """Each level as `manage.py bench --rate R --duration S` runs it (same driver, same
        workload), while the replica count is sampled every 2 s."""
        await self._probe(endpoint, options["max_tokens"])
        timeline: Timeline = []
        began = time.monotonic()
        sampler = asyncio.create_task(_sample(deployment, timeline, began))
        summaries = []
        duration = options["duration_per_level"]
        total = len(levels) * duration
        self.stdout.write(
            f"Load: {len(levels)} levels of {duration:g} s ({total / 60:.1f} min), open loop: "
            + ", ".join(f"{lv.rate:g}/s {lv.phase}" for lv in levels)
        )
        for index, level in enumerate(levels):
            spec = WorkloadSpec(
                "unique", endpoint.model, options["max_tokens"], seed=options["seed"] + index
            )
            bar = ProgressBar(f"{level.phase} {level.rate:g}/s", None, True)
            outcomes, elapsed = await open_loop(
                endpoint,
                requests_for(spec),
                level.rate,
                "poisson",
                Stop(duration_s=duration),
                True,
                300.0,
                bar,
                options["seed"] + index,
            )
            bar.finish()
            summary = summarize(level.phase, level.rate, "open", outcomes, elapsed)
            summaries.append(summary)
            counts = await asyncio.to_thread(demo.replica_counts, deployment)
            self.stdout.write(
                f"  t={time.monotonic() - began:4.0f}s {level.phase:<5} {level.rate:g}/s: "
                f"{summary.requests_per_s:.1f} req/s done, TTFT P50 {_ms(summary.ttft_p50_s)} "
                f"P99 {_ms(summary.ttft_p99_s)}, errors {summary.errors or '-'}; replicas "
                f"{_counts(counts)}, ${demo.cost_per_hour(deployment, counts):.2f}/h"
            )
        sampler.cancel()
        return summaries, timeline

    async def _probe(self, endpoint: Endpoint, max_tokens: int) -> None:
        """One request first: a gateway that does not know demo-fleet (another database)
        or refuses the key says so here, not as a level full of errors."""
        body = next(requests_for(WorkloadSpec("unique", endpoint.model, max_tokens, seed=99)))
        async with session_for(60.0) as session:
            outcome = await send(session, endpoint, body, True)
        if outcome.error is not None:
            raise CommandError(
                f"a first request to {endpoint.url} for {endpoint.model} failed ({outcome.error})"
                "; http_401/404: the gateway uses another database than this command (run both"
                " from the same directory, with the same DATABASE_URL and SLUICE_VAR_DIR)"
            )

    def _where_to_look(
        self,
        base: str,
        deployment: ModelDeployment,
        timeline: Timeline,
        decisions: list[ScalingDecision],
        started: datetime | None,
    ) -> None:
        if started is not None:
            self.stdout.write(
                "\nDecisions for demo-fleet (ScalingDecision rows), from the load's start:"
            )
            for row in decisions:
                at = (row.at - started).total_seconds()
                done = "" if row.action == "hold" else (" done" if row.actuated else " NOT done")
                self.stdout.write(
                    f"  +{at:4.0f}s {row.action:<5} {row.rule:<17} {row.from_replicas}->"
                    f"{row.to_replicas}{done}: {row.reason}{' ' + row.error if row.error else ''}"
                )
            if not decisions:
                self.stdout.write(
                    "  none yet (the loop records a step at once, a hold every 5 min)"
                )
            self.stdout.write("Replicas over time (seconds since the load began):")
            for at, counts in timeline:
                cost = demo.cost_per_hour(deployment, counts)
                self.stdout.write(f"  +{at:4.0f}s {_counts(counts)}  ${cost:.2f}/h")
        counts = demo.replica_counts(deployment)
        self.stdout.write(
            f"\nNow: {_counts(counts)}, ${demo.cost_per_hour(deployment, counts):.2f}/h "
            f"(example GPU price ${deployment.gpu_cost_per_hour:.2f}/h a replica)."
        )
        self.stdout.write(
            f"Watch: {base}/dashboard/fleet/ (log in as demo, password in the `make run` "
            f"banner): workers, decisions with reasons, GPU cost per hour. The diary: "
            f"{base}/admin/scaling/scalingdecision/?deployment__name={deployment.name}\n"
            f"After {demo.POLICY_FIELDS['scale_down_window_s']} s quiet the loop drains back "
            "to 1 replica. To stop the demo's replicas: manage.py autoscale_demo --cleanup"
        )

    def _cleanup(self) -> None:
        done = demo.cleanup(_idle_since)
        self.stdout.write(f"Disabled the autoscale policy of {demo.DEPLOYMENT} (if any).")
        for url in done.stopped:
            self.stdout.write(f"  stopped {url}")
        for url in done.still_busy:
            self.stdout.write(f"  {url}: draining, still busy; run --cleanup again")
        for url in done.not_ours:
            self.stdout.write(f"  {url}: not started by the autoscaler; left as it is")


async def _sample(deployment: ModelDeployment, timeline: Timeline, began: float) -> None:
    """Append the replica counts whenever they change (the database's routing state)."""
    while True:
        counts = await asyncio.to_thread(demo.replica_counts, deployment)
        if not timeline or timeline[-1][1] != counts:
            timeline.append((time.monotonic() - began, counts))
        await asyncio.sleep(2.0)


def _idle_since(worker: Worker, drained_at: float) -> bool:
    """A scrape taken after the drain began saw nothing running or waiting on it."""
    for view in read_snapshot():
        if view.get("id") == worker.pk:
            fresh = float(view.get("scraped_at", 0)) > drained_at
            return fresh and not view.get("running") and not view.get("waiting")
    return False


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"
