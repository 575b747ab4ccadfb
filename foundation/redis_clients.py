"""Shared Redis clients with short timeouts.

The async client is kept per event loop: a redis.asyncio connection belongs to the loop
that opened it, and Django runs sync code (DRF views, management commands) through
async_to_sync, which may use a fresh loop.
"""

import asyncio
import threading
import weakref
from typing import Any

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from foundation.redis_batch import CommandBatcher, batcher_for

_sync_client: redis.Redis | None = None
_sync_cache_client: redis.Redis | None = None
_sync_lock = threading.Lock()
_async_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis]" = (
    weakref.WeakKeyDictionary()
)
_async_cache_clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis]" = (
    weakref.WeakKeyDictionary()
)


_batchers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CommandBatcher]" = (
    weakref.WeakKeyDictionary()
)
_cache_batchers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CommandBatcher]" = (
    weakref.WeakKeyDictionary()
)


class RedisUnavailable(Exception):
    """Redis could not be reached in time; callers fail closed."""


# Any client-side Redis failure (refused, timed out, pool exhausted, garbled reply, server
# error) means the quota state is unknown; callers treat them all as "unavailable".
REDIS_FAILURES = (redis.exceptions.RedisError,)


def redis_url() -> str:
    url: str = settings.REDIS_URL
    if not url:
        raise ImproperlyConfigured(
            "Redis is not configured: set REDIS_URL to a Redis >= 8 server, or start the "
            "platform with `make run`, which starts the bundled Redis 8 and records its URL "
            "under var/redis.url."
        )
    return url


def _client_options(asynchronous: bool = False) -> dict[str, Any]:
    return {
        "socket_connect_timeout": settings.REDIS_CONNECT_TIMEOUT_S,
        "socket_timeout": settings.REDIS_SOCKET_TIMEOUT_S,
        "decode_responses": True,
        "health_check_interval": 30,
        "retry": _reconnect_once(asynchronous),
    }


def _reconnect_once(asynchronous: bool) -> Retry | AsyncRetry:
    """A command that meets a broken connection is sent once more, on a new one.

    A Redis restart closes every pooled connection, and each is found broken only when it
    is next used, possibly seconds later: without this, each of them failed one request,
    outside any fault (the chaos run's late 503). Only a connection error is retried, at
    once: a timeout (a hung Redis) still fails fast, and a refused reconnect fails as
    before. A command that ran just before its connection broke could run twice; for the
    admission script that is a reservation counted twice, the safe side of a limit, and the
    reconcile script applies once per reservation (its settled marker), as settlement's own
    retry of a failed reconcile needs.
    """
    kind = AsyncRetry if asynchronous else Retry
    return kind(NoBackoff(), retries=1, supported_errors=(redis.exceptions.ConnectionError,))


def sync_redis() -> redis.Redis:
    global _sync_client
    if _sync_client is None:
        with _sync_lock:
            if _sync_client is None:
                _sync_client = redis.Redis.from_url(redis_url(), **_client_options())
    return _sync_client


def sync_cache_redis() -> redis.Redis:
    """The caches' Redis for sync code (management API, admin pages)."""
    global _sync_cache_client
    if _sync_cache_client is None:
        with _sync_lock:
            if _sync_cache_client is None:
                _sync_cache_client = redis.Redis.from_url(
                    settings.CACHE_REDIS_URL or redis_url(), **_client_options()
                )
    return _sync_cache_client


def _async_client(
    url: str, registry: "weakref.WeakKeyDictionary[Any, aioredis.Redis]"
) -> aioredis.Redis:
    loop = asyncio.get_running_loop()
    client = registry.get(loop)
    if client is None:
        # A bounded pool that waits (up to the socket timeout) for a free connection:
        # a burst of requests queues briefly instead of opening thousands of sockets.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=settings.REDIS_MAX_CONNECTIONS,
            timeout=settings.REDIS_SOCKET_TIMEOUT_S,
            **_client_options(asynchronous=True),
        )
        client = aioredis.Redis(connection_pool=pool)
        registry[loop] = client
    return client


def async_redis() -> aioredis.Redis:
    return _async_client(redis_url(), _async_clients)


def async_cache_redis() -> aioredis.Redis:
    """The response caches' Redis (CACHE_REDIS_URL): its own memory budget and eviction,
    so a full cache can never evict sessions, quotas or Celery data."""
    return _async_client(settings.CACHE_REDIS_URL or redis_url(), _async_cache_clients)


def async_redis_batch() -> CommandBatcher:
    """The primary Redis, for commands that may share a pipeline with concurrent requests'
    (foundation/redis_batch.py): admission and billing."""
    return batcher_for(_batchers, async_redis)


def async_cache_redis_batch() -> CommandBatcher:
    return batcher_for(_cache_batchers, async_cache_redis)


def reset_clients() -> None:
    """Forget cached clients, so a changed REDIS_URL takes effect (tests, forked workers)."""
    global _sync_client, _sync_cache_client
    with _sync_lock:
        _sync_client = _sync_cache_client = None
    _async_clients.clear()
    _async_cache_clients.clear()
    _batchers.clear()
    _cache_batchers.clear()
