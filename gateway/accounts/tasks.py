"""Background work for accounts: move API key last-used times from Redis to the database."""

import logging
from datetime import UTC, datetime

import redis.exceptions
from celery import shared_task
from django.db import transaction
from django.db.models import Q

from foundation.redis_clients import sync_redis
from gateway.accounts.authentication import LAST_USED_HASH
from gateway.accounts.models import ApiKey

logger = logging.getLogger(__name__)
FLUSHING_HASH = f"{LAST_USED_HASH}:flushing"


@shared_task(name="gateway.accounts.tasks.flush_api_key_last_used")
def flush_api_key_last_used() -> int:
    """Write pending last-used times; a crash mid-way leaves them in Redis for the next run."""
    client = sync_redis()
    if not client.exists(FLUSHING_HASH):
        try:
            client.rename(LAST_USED_HASH, FLUSHING_HASH)
        except redis.exceptions.ResponseError:
            return 0  # nothing pending
    pending: dict[str, str] = client.hgetall(FLUSHING_HASH)  # type: ignore[assignment]
    with transaction.atomic():
        for lookup_id, epoch in pending.items():
            used_at = datetime.fromtimestamp(int(epoch), tz=UTC)
            ApiKey.objects.filter(lookup_id=lookup_id).filter(
                Q(last_used_at__isnull=True) | Q(last_used_at__lt=used_at)
            ).update(last_used_at=used_at)
    client.delete(FLUSHING_HASH)
    logger.info("recorded last use of %d API key(s)", len(pending))
    return len(pending)
