"""Celery's side of the caches: the expired entries of every namespace purged once a
minute, so a namespace that stops storing does not keep its index records for good
(caching/eviction.py, purge_every_namespace)."""

import asyncio
import logging

from celery import shared_task

from caching import eviction
from foundation.redis_clients import REDIS_FAILURES, async_cache_redis, reset_clients

logger = logging.getLogger(__name__)


@shared_task(name="caching.tasks.purge_expired_cache_entries", ignore_result=True)
def purge_expired_cache_entries() -> int:
    """How many expired entries went (-1: the cache Redis could not be reached)."""
    try:
        purged = asyncio.run(_purge())
    except REDIS_FAILURES as exc:
        logger.warning("expired cache entries not purged: cache Redis failed: %s", exc)
        return -1
    finally:
        reset_clients()  # the async Redis pools belonged to that event loop
    if purged:
        logger.info("purged %d expired cache entries", purged)
    return purged


async def _purge() -> int:
    return await eviction.purge_every_namespace(async_cache_redis())  # this loop's client
