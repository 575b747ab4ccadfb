from celery import shared_task

from gateway.dashboard.fleet_sampling import record_fleet_sample
from gateway.dashboard.rollup import refresh


@shared_task(name="gateway.dashboard.tasks.refresh_dashboard")
def refresh_dashboard() -> dict[str, int]:
    """Every 30 s (CELERY_BEAT_SCHEDULE): recent rollup buckets and this minute's fleet."""
    samples = record_fleet_sample()  # first: refresh() sums this minute into the fleet's hour
    return {**refresh(), "fleet_samples": samples}
