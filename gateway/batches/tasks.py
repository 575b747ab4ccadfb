"""Celery's side of batches: run one (on the `batches` queue, a worker of its own), and a
sweep every 10 s that hands held-by-nobody batches to a runner and deletes expired files."""

import asyncio
import logging
import os
import socket
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from foundation.redis_clients import reset_clients
from gateway.batches import actions, progress, runner

logger = logging.getLogger(__name__)


def runner_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@shared_task(name="gateway.batches.tasks.run_batch")
def run_batch(batch_id: str) -> None:
    try:
        asyncio.run(runner.run_batch(batch_id, runner_name()))
    finally:
        reset_clients()  # the async Redis pools belonged to that event loop


def queue_run(batch_id: str) -> None:
    """A new batch's first run."""
    progress.mark_queued([batch_id])
    run_batch.delay(batch_id)


@shared_task(name="gateway.batches.tasks.sweep_batches")
def sweep_batches() -> int:
    """Queue a run for every unfinished batch no live runner holds: new ones whose first
    run was lost, and those whose runner died (its hold went stale)."""
    stale = timezone.now() - timedelta(seconds=settings.BATCH_RUNNER_STALE_S)
    orphans = progress.queue_orphans(progress.orphans(stale), stale)
    for batch_id in orphans:
        logger.info("batch %s has no live runner: queueing one", batch_id)
        run_batch.delay(batch_id)
    actions.delete_expired_files()
    return len(orphans)
