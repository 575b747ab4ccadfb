"""Writes to the fleet: deployments and workers, from settings, the admin or an actuator."""

import logging
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from inference.models import ModelDeployment, Worker

logger = logging.getLogger(__name__)


def ensure_deployment(name: str, **fields: str | int | Decimal) -> ModelDeployment:
    deployment, created = ModelDeployment.objects.get_or_create(name=name, defaults=fields)
    if created:
        logger.info("created model deployment %s", name)
    return deployment


def register_worker(
    deployment: ModelDeployment,
    url: str,
    registered_by: str,
    labels: dict[str, object] | None = None,
    state: str = Worker.State.STARTING,
) -> Worker:
    """Add a worker, or re-register a known URL (a restarted process) as starting."""
    url = url.rstrip("/")
    worker, created = Worker.objects.update_or_create(
        url=url,
        defaults={
            "deployment": deployment,
            "registered_by": registered_by,
            "labels": labels or {},
            "state": state,
            "state_changed_at": timezone.now(),
        },
    )
    logger.info(
        "%s worker %s for %s (%s)",
        "registered" if created else "re-registered",
        url,
        deployment.name,
        registered_by,
    )
    return worker


def set_worker_state(worker: Worker, state: str, reason: str) -> Worker:
    if worker.state != state:
        logger.info("worker %s: %s -> %s (%s)", worker.url, worker.state, state, reason)
        worker.state = state
        worker.state_changed_at = timezone.now()
        worker.save(update_fields=["state", "state_changed_at"])
    return worker


def parse_worker_setting(value: str) -> list[tuple[str, str]]:
    """SLUICE_WORKERS="model@http://host:port,model@http://host2:port" -> pairs."""
    pairs = []
    for entry in filter(None, (part.strip() for part in value.split(","))):
        model, at, url = entry.partition("@")
        if not at or not model or not url.startswith(("http://", "https://")):
            raise ValueError(f"SLUICE_WORKERS entry {entry!r} is not model@http(s)://host:port")
        pairs.append((model, url))
    return pairs


def register_workers_from_settings() -> list[Worker]:
    """Register SLUICE_WORKERS; workers an earlier setting named (old ports) become dead."""
    pairs = parse_worker_setting(settings.SLUICE_WORKERS)
    workers = [
        register_worker(ensure_deployment(model), url, registered_by="settings")
        for model, url in pairs
    ]
    current = [w.url for w in workers]
    for stale in Worker.objects.filter(registered_by="settings").exclude(url__in=current):
        set_worker_state(stale, Worker.State.DEAD, "no longer in SLUICE_WORKERS")
    return workers
