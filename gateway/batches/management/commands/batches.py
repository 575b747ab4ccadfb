"""`manage.py batches list` and `manage.py batches cancel <batch_id>`: the Batch API's jobs
for operators, without the dashboard."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gateway.accounts.models import Team
from gateway.batches.actions import BatchRefused, cancel_batch
from gateway.batches.models import Batch
from gateway.dashboard.batch_selectors import batch_jobs

COLUMNS = ("id", "team", "status", "progress", "tokens", "created")


class Command(BaseCommand):
    help = (
        "List batch jobs (newest first), or cancel one: `batches list [--team T] "
        "[--status S] [--limit N]`, `batches cancel <batch_id>`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="subcommand", required=True, metavar="{list,cancel}")
        listing = commands.add_parser("list", help="batch jobs, newest first")
        listing.add_argument("--team", help="a team's name or id")
        listing.add_argument("--status", choices=Batch.Status.values)
        listing.add_argument("--limit", type=int, default=50, help="at most this many (50)")
        cancel = commands.add_parser(
            "cancel", help="cancel an unfinished batch (its runner stops starting lines)"
        )
        cancel.add_argument("batch_id")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["subcommand"] == "cancel":
            self._cancel(options["batch_id"])
        else:
            self._list(options["team"], options["status"], options["limit"])

    def _list(self, team: str | None, status: str | None, limit: int) -> None:
        if limit < 1:
            raise CommandError("--limit must be 1 or more.")
        team_id = None if team is None else _team(team).pk
        jobs = batch_jobs(team_id=team_id, status=status, limit=limit)
        if not jobs:
            self.stdout.write("No batches.")
            return
        rows = [
            (
                job.id,
                job.team,
                job.status,
                f"{job.done}/{job.total}" + (f" ({job.failed} failed)" if job.failed else ""),
                str(job.tokens),
                job.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            )
            for job in jobs
        ]
        widths = [max(len(row[i]) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
        for row in [COLUMNS, *rows]:
            self.stdout.write(
                "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            )
        if len(jobs) == limit:
            self.stdout.write(f"(the newest {limit}; --limit N for more)")

    def _cancel(self, batch_id: str) -> None:
        already = Batch.objects.filter(id=batch_id, status=Batch.Status.CANCELLING).exists()
        try:
            batch = cancel_batch(batch_id)
        except BatchRefused as exc:
            raise CommandError(exc.message) from None
        state = "was already" if already else "is now"
        self.stdout.write(f"Batch {batch.id} of team {batch.team.name} {state} {batch.status}.")


def _team(name_or_id: str) -> Team:
    team = Team.objects.filter(name=name_or_id).first()
    if team is None and name_or_id.isascii() and name_or_id.isdigit():
        team = Team.objects.filter(pk=int(name_or_id)).first()
    if team is None:
        raise CommandError(f"No team named {name_or_id!r} (nor with that id).")
    return team
