"""What a chaos run adds to the configured database, and takes away at the end.

Why tight quotas: a quota that is never reached proves nothing about admission across two
gateway processes and a Redis restart. Each team is shaped to hit one limit under the
run's load: `steady` stays under all of them (its replies are the billing baseline),
`rpm` offers more requests than its requests-per-minute, `tpm` more tokens than its
tokens-per-minute, `month` spends its monthly tokens part way through the run. The batch
runs under a team of its own, with no minute limits to reach (batch lines have windows of
their own, docs/batches.md).
"""

import secrets
from dataclasses import dataclass

from bench.chaos.history import TeamLimits
from gateway.accounts import actions
from gateway.accounts.models import Team
from inference import fleet
from inference.models import ModelDeployment

UPSTREAM_MODEL = "sim"


@dataclass(frozen=True)
class TeamPlan:
    """A team of the run: its limits and its share of the interactive arrivals."""

    role: str  # steady, rpm, tpm, month, batch
    share: float
    limits: TeamLimits


@dataclass(frozen=True)
class Member:
    role: str
    team: Team
    key: str
    share: float
    limits: TeamLimits


def plan_teams(rate_per_s: float, duration_s: float, tokens_per_request: int) -> list[TeamPlan]:
    """Limits from the offered load: the rpm team gets 1.5 x its limit's worth of requests,
    the tpm team 1.6 x its limit's worth of tokens, the month team runs out about half way."""
    shares = {"steady": 0.4, "rpm": 0.2, "tpm": 0.2, "month": 0.2}
    per_minute = {role: rate_per_s * share * 60 for role, share in shares.items()}
    rpm = max(5, int(per_minute["rpm"] / 1.5))
    tpm = max(200, int(per_minute["tpm"] * tokens_per_request / 1.6))
    month = max(500, int(per_minute["month"] * duration_s / 60 * tokens_per_request * 0.5))
    return [
        TeamPlan("steady", shares["steady"], TeamLimits("steady")),
        TeamPlan("rpm", shares["rpm"], TeamLimits("rpm", requests_per_minute=rpm)),
        TeamPlan("tpm", shares["tpm"], TeamLimits("tpm", tokens_per_minute=tpm)),
        TeamPlan("month", shares["month"], TeamLimits("month", tokens_per_month=month)),
        TeamPlan("batch", 0.0, TeamLimits("batch")),
    ]


@dataclass
class World:
    deployment: ModelDeployment
    members: list[Member]

    @classmethod
    def create(cls, plans: list[TeamPlan], slots: int) -> "World":
        tag = secrets.token_hex(4)
        deployment = fleet.ensure_deployment(
            f"chaos-{tag}", served_model_name=UPSTREAM_MODEL, max_in_flight_per_worker=slots
        )
        members = []
        try:
            for plan in plans:
                limits = plan.limits
                team = actions.create_team(
                    f"chaos-{plan.role}-{tag}",
                    **{
                        **actions.NO_LIMITS,
                        "requests_per_minute": limits.requests_per_minute,
                        "tokens_per_minute": limits.tokens_per_minute,
                        "tokens_per_month": limits.tokens_per_month,
                    },
                )
                key = actions.issue_api_key(team, name="chaos").plaintext
                members.append(Member(plan.role, team, key, plan.share, limits))
        except BaseException:
            cls(deployment, members).delete()
            raise
        return cls(deployment, members)

    def member(self, role: str) -> Member:
        return next(member for member in self.members if member.role == role)

    def team_names(self) -> dict[int, str]:
        """Team id -> the role the history names it by."""
        return {member.team.pk: member.role for member in self.members}

    def delete(self) -> None:
        """The teams (with their usage records, files and batches), then the deployment
        (with its workers)."""
        Team.objects.filter(pk__in=[member.team.pk for member in self.members]).delete()
        self.deployment.delete()
