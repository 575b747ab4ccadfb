"""GPU cost and who it is for.

A deployment's GPU cost over a period is the sum of its fleet samples' minutes: every
worker holding a GPU (dead ones excepted) at the hourly rate of its gpu label, spot or on
demand (GpuRate), else at the deployment's gpu_cost_per_hour, as recorded each minute
(gateway/dashboard/fleet_sampling.py); samples from before that was recorded count their
worker-minutes / 60 times the deployment's gpu_cost_per_hour. That cost is
split among teams in proportion to the tokens each processed on that deployment's model;
cost of a deployment no team used in the period is "unallocated" (idle capacity). The
split works in integer micro-dollars with largest-remainder rounding, so the teams' shares
plus the unallocated part add up to the total exactly, not to within a rounding error.

Cache savings: cached and coalesced requests are billed 0 tokens (docs/caching.md), so
what they saved is estimated as hits x the mean tokens of a request the model generated
on the same deployment, priced at that deployment's GPU cost per token.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, Sum

from gateway.dashboard.models import FleetHour, FleetSample
from gateway.dashboard.periods import Period
from gateway.dashboard.selectors import HIT_KINDS, rollups
from inference.models import ModelDeployment

MICROS = 1_000_000


def example_priced_models() -> list[str]:
    """Deployments whose prices are documented examples (the demo's, set by setup_demo):
    every page that shows money labels their figures "example prices"."""
    return sorted(
        ModelDeployment.objects.filter(prices_are_examples=True).values_list("name", flat=True)
    )


@dataclass(frozen=True)
class DeploymentCost:
    model: str
    worker_hours: float
    cost_micros: int


@dataclass
class CostLine:
    team_id: int
    team: str
    model: str
    requests: int = 0
    tokens: int = 0
    billed_micros: int = 0
    gpu_cost_micros: int = 0
    hits: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CostSplit:
    deployments: dict[str, DeploymentCost]
    lines: list[CostLine]
    unallocated_micros: int

    @property
    def total_micros(self) -> int:
        return sum(d.cost_micros for d in self.deployments.values())

    @property
    def requests(self) -> int:
        return sum(line.requests for line in self.lines)

    def by_team(self) -> dict[str, int]:
        teams: dict[str, int] = defaultdict(int)
        for line in self.lines:
            teams[line.team] += line.gpu_cost_micros
        return dict(teams)

    def by_model(self) -> dict[str, int]:
        models: dict[str, int] = defaultdict(int)
        for line in self.lines:
            models[line.model] += line.gpu_cost_micros
        return dict(models)

    def cost_per_1000_requests_micros(self) -> int | None:
        return self.total_micros * 1000 // self.requests if self.requests else None


def deployment_costs(p: Period) -> dict[str, DeploymentCost]:
    """Each deployment's GPU cost in the period: the cost its samples recorded (each
    minute's workers at their rates then, fleet_sampling.py), and for samples from before
    that was recorded, their worker-minutes at the deployment's gpu_cost_per_hour now.
    Rounded to the micro-dollar once per deployment."""
    table: Any = FleetSample if p.by_minute else FleetHour  # state columns: worker-minutes
    minutes = F("starting") + F("warm") + F("ready") + F("draining")
    rows = (
        table.objects.filter(bucket__gte=p.start, bucket__lt=p.end)
        .values("deployment__name", "deployment__gpu_cost_per_hour")
        .annotate(
            minutes=Sum(minutes),
            unrecorded_minutes=Sum(minutes, filter=Q(gpu_cost_per_hour_micros__isnull=True)),
            recorded=Sum("gpu_cost_per_hour_micros"),
        )
        .order_by()
    )
    costs = {}
    for row in rows:
        price: Decimal = row["deployment__gpu_cost_per_hour"]
        # Micro-dollars per hour summed over minutes: / 60 is micro-dollars.
        rate_minutes = (
            Decimal(row["recorded"] or 0) + Decimal(row["unrecorded_minutes"] or 0) * price * MICROS
        )
        micros = int((rate_minutes / 60).to_integral_value())
        costs[row["deployment__name"]] = DeploymentCost(
            row["deployment__name"], (row["minutes"] or 0) / 60, micros
        )
    return costs


def _allocate(total: int, weights: list[int]) -> list[int]:
    """Split an integer total in proportion to integer weights, exactly (largest remainder)."""
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    order = sorted(range(len(weights)), key=lambda i: -(total * weights[i] % whole))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def cost_split(p: Period) -> CostSplit:
    deployments = deployment_costs(p)
    lines: dict[tuple[int, str], CostLine] = {}
    rows = (
        rollups(p)
        .values("team_id", "team__name", "model")
        .annotate(
            requests=Sum("requests"),
            billed=Sum("cost_micros"),
            tokens=Sum(F("prompt_tokens") + F("completion_tokens")),
            **{kind: Sum(f) for kind, f in HIT_KINDS.items()},
        )
        .order_by("team__name", "model")
    )
    for row in rows:
        lines[(row["team_id"], row["model"])] = CostLine(
            row["team_id"],
            row["team__name"],
            row["model"],
            row["requests"] or 0,
            row["tokens"] or 0,
            row["billed"] or 0,
            hits={kind: row[kind] or 0 for kind in HIT_KINDS},
        )
    unallocated = 0
    for model, cost in deployments.items():
        users = [line for line in lines.values() if line.model == model and line.tokens > 0]
        if not users:
            unallocated += cost.cost_micros
            continue
        for line, share in zip(
            users, _allocate(cost.cost_micros, [u.tokens for u in users]), strict=True
        ):
            line.gpu_cost_micros = share
    return CostSplit(deployments, list(lines.values()), unallocated)


def cache_savings(split: CostSplit) -> dict[str, dict[str, float]]:
    """Per cache kind: requests answered, tokens, money (micros) and GPU-hours saved."""
    saved: dict[str, dict[str, float]] = {
        kind: {"hits": 0, "tokens": 0.0, "micros": 0.0, "gpu_hours": 0.0} for kind in HIT_KINDS
    }
    per_model: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"tokens": 0, "generated": 0, "hits": defaultdict(int)}
    )
    for line in split.lines:
        entry = per_model[line.model]
        entry["tokens"] += line.tokens
        entry["generated"] += line.requests - sum(line.hits.values())
        for kind, count in line.hits.items():
            entry["hits"][kind] += count
    for model, entry in per_model.items():
        cost = split.deployments.get(model)
        if not entry["tokens"] or not entry["generated"]:
            continue
        mean_tokens = entry["tokens"] / entry["generated"]
        for kind, count in entry["hits"].items():
            tokens = count * mean_tokens
            saved[kind]["hits"] += count
            saved[kind]["tokens"] += tokens
            if cost is not None:
                saved[kind]["micros"] += tokens * cost.cost_micros / entry["tokens"]
                saved[kind]["gpu_hours"] += tokens * cost.worker_hours / entry["tokens"]
    return saved


@dataclass(frozen=True)
class Bill:
    team: str
    billed_micros: int
    gpu_cost_micros: int
    budget_micros: int | None

    @property
    def budget_used(self) -> float | None:
        return self.billed_micros / self.budget_micros if self.budget_micros else None


def monthly_bills(p: Period, split: CostSplit) -> list[Bill]:
    """Each team's month-to-date bill (token prices, what its budget limits) beside its
    share of the GPU cost, for every team, with usage or not."""
    from gateway.accounts.models import DefaultQuotaPolicy, QuotaPolicy, Team

    budgets = dict(QuotaPolicy.objects.values_list("team_id", "budget_per_month_usd"))
    default_budget = DefaultQuotaPolicy.load().budget_per_month_usd  # teams without their own
    gpu = split.by_team()
    billed: dict[int, int] = defaultdict(int)
    for line in split.lines:
        billed[line.team_id] += line.billed_micros
    bills = []
    for team in Team.objects.all():
        budget = budgets.get(team.pk, default_budget)
        bills.append(
            Bill(
                team.name,
                billed[team.pk],
                gpu.get(team.name, 0),
                None if budget is None else int(budget * MICROS),
            )
        )
    return bills
