"""Staff-only dashboard pages. Each view parses the period, calls selectors, shapes charts.

staff_member_required sends anyone else (anonymous, or logged in but not staff) to the
admin login, as the admin itself does. Pages that name teams' figures (costs, teams,
batches) also take the admin site's view permission for those records, as the
management API does for one team's usage: being staff is not reading every team's bill.
The overview and fleet pages show the platform's totals only.
"""

import csv
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gateway.accounts.models import Team
from gateway.dashboard import batch_selectors, charts, costs, price_table, selectors
from gateway.dashboard.fleet_sampling import read_snapshot
from gateway.dashboard.params import is_row_id
from gateway.dashboard.periods import PERIODS, Period, month_to_date, period
from scaling.models import ScalingDecision

MAX_DECISIONS = 500
VIEW_USAGE = "usage.view_usagerecord"  # the management API's, for one team's usage
VIEW_BATCHES = "batches.view_batch"

View = Callable[[HttpRequest], HttpResponse]


def staff_with(permission: str) -> Callable[[View], View]:
    """staff_member_required, then `permission`: a staff account without it is refused
    (403) with the permission named, so whoever administers accounts knows what to grant."""

    def decorate(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest) -> HttpResponse:
            if not request.user.has_perm(permission):
                raise PermissionDenied(
                    f"This page shows every team's figures: it needs the permission {permission}."
                )
            return view(request)

        return staff_member_required(guarded)

    return decorate


def _period(request: HttpRequest, default: str = "hour") -> Period:
    return period(request.GET.get("period", default))


def _page(
    request: HttpRequest, template: str, p: Period, charts_: list[charts.Chart], **context: Any
) -> HttpResponse:
    return render(
        request,
        f"dashboard/{template}",
        {
            "period": p,
            "periods": PERIODS,
            "charts": charts_,
            "example_models": costs.example_priced_models(),
            **context,
        },
    )


@staff_member_required
def overview(request: HttpRequest) -> HttpResponse:
    p = _period(request)
    usage, fleet = selectors.usage_series(p), selectors.fleet_series(p)
    x, fx = [r["bucket"] for r in usage], [r["bucket"] for r in fleet]
    figures = [
        charts.lines("rps", "Requests per second", x, [("req/s", [r["rps"] for r in usage])]),
        charts.lines(
            "latency",
            "Latency and time to first token (estimated from buckets)",
            x,
            [
                (name, [r[key] for r in usage])
                for name, key in (
                    ("latency P50", "latency_p50"),
                    ("latency P99", "latency_p99"),
                    ("TTFT P50", "ttft_p50"),
                    ("TTFT P99", "ttft_p99"),
                )
            ],
            "ms",
        ),
        charts.lines(
            "errors",
            "Error rate",
            x,
            [("errors", [r["error_rate"] for r in usage])],
            "share of requests",
        ),
        charts.lines(
            "cache",
            "Cache hit rate by kind",
            x,
            [(kind, [r[f"hit_rate_{kind}"] for r in usage]) for kind in selectors.HIT_KINDS],
            "share of requests",
        ),
        charts.lines(
            "queue",
            "Queue length (sampled each minute)",
            fx,
            [
                # The one that grows behind a gateway: it holds each worker at its batch
                # target and queues the rest (docs/autoscaling.md, "The gateways' queue").
                ("waiting in the gateway", [r["gateway_queue"] for r in fleet]),
                ("waiting on workers", [r["waiting"] for r in fleet]),
            ],
            "requests",
            stacked=True,
        ),
        charts.lines(
            "workers",
            "Workers by state",
            fx,
            [(s, [r[s] for r in fleet]) for s in selectors.STATES],
            "workers",
            stacked=True,
        ),
    ]
    queued = selectors.gateway_queue_now()
    return _page(
        request,
        "overview.html",
        p,
        figures,
        totals=selectors.totals(p),
        gateway_queue=None if queued is None else sum(queued.values()),
    )


@staff_with(VIEW_USAGE)
def cost_page(request: HttpRequest) -> HttpResponse:
    p = _period(request, "day")
    split = costs.cost_split(p)
    by_team, by_model = split.by_team(), split.by_model()
    savings = costs.cache_savings(split)
    mtd = month_to_date()
    bills = costs.monthly_bills(mtd, costs.cost_split(mtd))
    figures = [
        charts.bars(
            "by-team",
            "GPU cost by team (USD)",
            list(by_team),
            [("USD", [v / costs.MICROS for v in by_team.values()])],
        ),
        charts.bars(
            "by-model",
            "GPU cost by model (USD)",
            list(by_model),
            [("USD", [v / costs.MICROS for v in by_model.values()])],
        ),
        charts.bars(
            "savings",
            "GPU cost saved by each cache (USD, estimated)",
            list(savings),
            [("USD", [s["micros"] / costs.MICROS for s in savings.values()])],
        ),
        charts.bars(
            "bills",
            "Month to date: billed against budget (USD)",
            [b.team for b in bills],
            [
                ("billed", [b.billed_micros / costs.MICROS for b in bills]),
                ("budget", [(b.budget_micros or 0) / costs.MICROS for b in bills]),
            ],
        ),
    ]
    return _page(
        request,
        "costs.html",
        p,
        figures,
        split=split,
        savings=savings,
        bills=bills,
        per_1000=split.cost_per_1000_requests_micros(),
        prices=price_table.deployment_prices(),
        gpu_rates=price_table.gpu_rates(),
    )


@staff_with(VIEW_USAGE)
def cost_csv(request: HttpRequest) -> HttpResponse:
    """The cost split of the chosen period, one line per team and model, in USD."""
    p = _period(request, "day")
    split = costs.cost_split(p)
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="sluice-costs-{p.name}.csv"'
    writer = csv.writer(response)
    writer.writerow(
        [
            "period_start",
            "period_end",
            "team",
            "model",
            "requests",
            "tokens",
            "gpu_cost_usd",
            "billed_usd",
        ]
    )
    for line in split.lines:
        writer.writerow(
            [
                p.start.isoformat(),
                p.end.isoformat(),
                line.team,
                line.model,
                line.requests,
                line.tokens,
                _usd(line.gpu_cost_micros),
                _usd(line.billed_micros),
            ]
        )
    writer.writerow(
        [
            p.start.isoformat(),
            p.end.isoformat(),
            "(unallocated: idle GPUs)",
            "",
            0,
            0,
            _usd(split.unallocated_micros),
            _usd(0),
        ]
    )
    return response


def _usd(micros: int) -> str:
    return f"{micros / costs.MICROS:.6f}"


@staff_with(VIEW_USAGE)
def teams(request: HttpRequest) -> HttpResponse:
    p = _period(request, "day")
    usage = selectors.team_usage(p)
    names = [u.team.name for u in usage]
    figures = [
        charts.bars(
            "team-requests",
            "Requests by team",
            names,
            [("requests", [u.requests for u in usage]), ("errors", [u.errors for u in usage])],
        ),
        charts.bars(
            "team-tokens", "Tokens by team", names, [("tokens", [u.tokens for u in usage])]
        ),
    ]
    return _page(request, "teams.html", p, figures, usage=usage)


@staff_member_required
def fleet(request: HttpRequest) -> HttpResponse:
    p = _period(request, "day")
    usage, samples = selectors.usage_series(p), selectors.fleet_series(p)
    rows = (
        ScalingDecision.objects.filter(at__gte=p.start, at__lt=p.end)
        .order_by("-at")[:MAX_DECISIONS]
        .values(
            "at",
            "action",
            "rule",
            "from_replicas",
            "to_replicas",
            "reason",
            "deployment__name",
            "actuated",
            "error",
        )
    )
    decisions: list[dict[str, Any]] = [dict(row) for row in rows]
    figures = [
        charts.timeline(
            "timeline",
            "Autoscaler decisions against demand",
            [r["bucket"] for r in usage],
            [r["rps"] for r in usage],
            [r["bucket"] for r in samples],
            [r["ready"] for r in samples],
            decisions,
        )
    ]
    workers = sorted(read_snapshot(), key=lambda w: (w["deployment"], w["url"]))
    return _page(
        request,
        "fleet.html",
        p,
        figures,
        workers=workers,
        queues=_queues(workers, selectors.gateway_queue_now()),
        decisions=decisions[:50],
        batch_throughput=batch_selectors.batch_throughput(),
    )


def _queues(
    workers: list[dict[str, Any]], in_gateway: dict[str, int] | None
) -> list[dict[str, Any]]:
    """Per deployment now: requests waiting in the gateways' dispatch queues (None: Redis did
    not answer) and on the workers themselves (vLLM's waiting count, from the snapshot)."""
    on_workers: dict[str, float] = {}
    for w in workers:
        on_workers[w["deployment"]] = on_workers.get(w["deployment"], 0.0) + float(
            w.get("waiting") or 0
        )
    names = sorted({*on_workers, *(in_gateway or {})})
    return [
        {
            "deployment": name,
            "gateway": None if in_gateway is None else in_gateway.get(name, 0),
            "workers": on_workers.get(name, 0.0),
        }
        for name in names
    ]


@staff_with(VIEW_BATCHES)
def batches(request: HttpRequest) -> HttpResponse:
    """Batch jobs, newest first (at most MAX_BATCH_ROWS), of every team or of one."""
    team_param = request.GET.get("team") or ""
    team_id = int(team_param) if is_row_id(team_param) else None
    limit = batch_selectors.MAX_BATCH_ROWS
    jobs = batch_selectors.batch_jobs(team_id=team_id, limit=limit)
    return render(
        request,
        "dashboard/batches.html",
        {
            "jobs": jobs,
            "limit": limit,
            "truncated": len(jobs) >= limit,
            "teams": Team.objects.order_by("name"),
            "team_id": team_id,
            "charts": [],
            "example_models": costs.example_priced_models(),
        },
    )
