"""python manage.py bench: a concurrency (or arrival-rate) sweep against Sluice or any
OpenAI-compatible endpoint, optionally compared level by level with a second endpoint."""

import asyncio
import os
import sys
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench.loadtest import report
from bench.loadtest.drivers import Stop, closed_loop, open_loop
from bench.loadtest.probe import Endpoint, Outcome
from bench.loadtest.summary import LevelSummary, summarize
from bench.loadtest.workloads import WorkloadSpec, requests_for


def _numbers(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise CommandError(f"levels must be positive numbers, got {text!r}")
    return values


class ProgressBar:
    """One line on stderr, redrawn at most 10 times a second."""

    def __init__(self, label: str, total: int | None, enabled: bool) -> None:
        self.label, self.total, self.enabled = label, total, enabled
        self.started = time.perf_counter()
        self.drawn_at = 0.0

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if not self.enabled or (now - self.drawn_at < 0.1 and done != self.total):
            return
        self.drawn_at = now
        if self.total:
            filled = int(30 * done / self.total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total}"
        else:
            bar = f"{done} done"
        sys.stderr.write(f"\r  {self.label:<28} {bar}  {now - self.started:5.1f}s")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_argument_group("target")
        target.add_argument(
            "--url",
            default="http://127.0.0.1:8000/v1",
            help="API base URL (default: a local `make run`)",
        )
        target.add_argument(
            "--api-key",
            default=os.environ.get("SLUICE_API_KEY", ""),
            help="bearer key (default: $SLUICE_API_KEY)",
        )
        target.add_argument("--model", default="smollm2-135m-instruct")
        target.add_argument("--label", default="target", help="name of --url in the reports")
        target.add_argument(
            "--compare",
            metavar="URL",
            help="run every level against this endpoint too, interleaved",
        )
        target.add_argument("--compare-api-key", default="")
        target.add_argument("--compare-model", help="model name there (default: --model)")
        target.add_argument("--compare-label", default="compare")
        self._load_arguments(parser)
        output = parser.add_argument_group("output")
        output.add_argument("--json", type=Path, metavar="OUT")
        output.add_argument("--html", type=Path, metavar="OUT")
        output.add_argument("--quiet", action="store_true", help="no progress bar")

    def _load_arguments(self, parser: ArgumentParser) -> None:
        load = parser.add_argument_group("load")
        load.add_argument(
            "--concurrency", default="1,5,10,20,50,100", help="closed-loop levels (comma-separated)"
        )
        load.add_argument("--rate", help="open-loop arrival rates per second instead")
        load.add_argument("--arrivals", choices=["poisson", "bursty"], default="poisson")
        load.add_argument("--requests", type=int, help="requests per level (default 100)")
        load.add_argument("--duration", type=float, help="seconds per level instead")
        load.add_argument("--stream", action="store_true", default=True)
        load.add_argument("--no-stream", dest="stream", action="store_false")
        load.add_argument(
            "--workload",
            default="unique",
            help="unique, shared-prefix, or a JSONL file of request bodies",
        )
        load.add_argument(
            "--repeat-share",
            type=float,
            default=0.3,
            help="shared-prefix: share of exact repeats of earlier questions",
        )
        load.add_argument(
            "--paraphrase-share",
            type=float,
            default=0.2,
            help="shared-prefix: share of paraphrases of earlier questions",
        )
        load.add_argument("--max-tokens", type=int, default=64)
        load.add_argument(
            "--no-ignore-eos",
            dest="ignore_eos",
            action="store_false",
            help="let replies end early (by default every reply has "
            "--max-tokens tokens, via vLLM's ignore_eos)",
        )
        load.add_argument("--timeout", type=float, default=300.0, help="per request, seconds")
        load.add_argument("--seed", type=int, default=0)

    def handle(self, *args: Any, **options: Any) -> None:
        open_mode = options["rate"] is not None
        levels = _numbers(options["rate"] if open_mode else options["concurrency"])
        if options["requests"] is None and options["duration"] is None:
            options["requests"] = 100
        endpoints = [
            Endpoint(
                options["url"].rstrip("/"), options["api_key"], options["model"], options["label"]
            )
        ]
        if options["compare"]:
            endpoints.append(
                Endpoint(
                    options["compare"].rstrip("/"),
                    options["compare_api_key"],
                    options["compare_model"] or options["model"],
                    options["compare_label"],
                )
            )
        summaries = asyncio.run(self._sweep(endpoints, levels, open_mode, options))
        self._report(summaries, endpoints, open_mode, options)

    async def _sweep(
        self,
        endpoints: list[Endpoint],
        levels: list[float],
        open_mode: bool,
        options: dict[str, Any],
    ) -> list[LevelSummary]:
        summaries = []
        stop = Stop(options["requests"], options["duration"])
        for index, level in enumerate(levels):
            for endpoint in endpoints:  # interleaved: drift on the host hits both alike
                spec = WorkloadSpec(
                    options["workload"],
                    endpoint.model,
                    options["max_tokens"],
                    options["repeat_share"],
                    options["paraphrase_share"],
                    options["ignore_eos"],
                    options["seed"] + index,
                )
                try:
                    bodies = requests_for(spec)
                except (OSError, ValueError) as exc:
                    raise CommandError(f"workload: {exc}") from None
                what = "rate" if open_mode else "c"
                bar = ProgressBar(
                    f"{endpoint.label} {what}={level:g}", stop.requests, not options["quiet"]
                )
                outcomes, elapsed = await self._level(
                    endpoint, bodies, level, open_mode, stop, options, bar
                )
                bar.finish()
                summaries.append(
                    summarize(
                        endpoint.label, level, "open" if open_mode else "closed", outcomes, elapsed
                    )
                )
        return summaries

    async def _level(
        self,
        endpoint: Endpoint,
        bodies: Any,
        level: float,
        open_mode: bool,
        stop: Stop,
        options: dict[str, Any],
        bar: ProgressBar,
    ) -> tuple[list[Outcome], float]:
        if open_mode:
            return await open_loop(
                endpoint,
                bodies,
                level,
                options["arrivals"],
                stop,
                options["stream"],
                options["timeout"],
                bar,
                options["seed"],
            )
        return await closed_loop(
            endpoint, bodies, int(level), stop, options["stream"], options["timeout"], bar
        )

    def _report(
        self,
        summaries: list[LevelSummary],
        endpoints: list[Endpoint],
        open_mode: bool,
        options: dict[str, Any],
    ) -> None:
        self.stdout.write(report.table(summaries))
        pairs = []
        if len(endpoints) == 2:
            pairs = list(zip(summaries[0::2], summaries[1::2], strict=True))
            self.stdout.write(f"\n{endpoints[0].label} against {endpoints[1].label}:")
            self.stdout.write(report.comparison_table(pairs))
        settings = {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in options.items()
            if k
            not in (
                "api_key",
                "compare_api_key",
                "verbosity",
                "settings",
                "pythonpath",
                "traceback",
                "no_color",
                "force_color",
                "skip_checks",
            )
        }
        settings["mode"] = "open" if open_mode else "closed"
        doc = report.document(settings, summaries, pairs)
        if options["json"]:
            report.write_json(options["json"], doc)
            self.stdout.write(f"JSON: {options['json']}")
        if options["html"]:
            report.write_html(options["html"], doc, summaries)
            self.stdout.write(f"HTML report: {options['html']}")
