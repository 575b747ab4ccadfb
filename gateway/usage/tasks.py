import socket

from celery import shared_task

from gateway.usage.ledger import ingest


@shared_task(name="gateway.usage.tasks.ingest_usage_events")
def ingest_usage_events() -> int:
    return ingest(consumer=f"{socket.gethostname()}-celery")
