"""The time ranges a page can show, and which rollup table answers each one fast."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from gateway.dashboard.models import HourRollup, MinuteRollup
from gateway.dashboard.rollup import floor_hour, floor_minute


@dataclass(frozen=True)
class Period:
    name: str
    start: datetime
    end: datetime
    table: type[MinuteRollup] | type[HourRollup]
    bucket_s: int

    @property
    def by_minute(self) -> bool:
        """Minute buckets (MinuteRollup, FleetSample), else hour buckets (HourRollup,
        KeyHourRollup, FleetHour)."""
        return self.bucket_s == 60

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600


PERIODS = ["hour", "day", "month"]


def period(name: str, now: datetime | None = None) -> Period:
    """hour: 60 minute buckets; day: 24 hour buckets; month: the last 30 days by hour.
    Unknown names fall back to the hour (a hand-edited URL is not an error page)."""
    now = now or timezone.now()
    if name == "day":
        end = floor_hour(now) + timedelta(hours=1)
        return Period("day", end - timedelta(hours=24), end, HourRollup, 3600)
    if name == "month":
        end = floor_hour(now) + timedelta(hours=1)
        return Period("month", end - timedelta(days=30), end, HourRollup, 3600)
    end = floor_minute(now) + timedelta(minutes=1)
    return Period("hour", end - timedelta(hours=1), end, MinuteRollup, 60)


def month_to_date(now: datetime | None = None) -> Period:
    now = now or timezone.now()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return Period("mtd", start, floor_hour(now) + timedelta(hours=1), HourRollup, 3600)
