"""The gateway's dispatch queue, published: how many requests wait in each gateway process's
dispatcher for a worker slot, per deployment, summed over processes by whoever reads it.

vLLM's own waiting count stays near zero behind a gateway, because the dispatcher holds
each worker at its batch target and keeps the excess in its queue (dispatcher.py). So the
autoscaler's queue signal, /metrics' `sluice_queue_depth` and the dashboard read this.

One Redis hash, QUEUE_KEY: a field per (deployment, process), JSON `[deployment, process]`,
whose value is `"<count> <unix time>"`. A process writes when requests start waiting (at
once), then at most every PUBLISH_INTERVAL_S while any of its queues is non-empty; it
deletes its field when that queue empties, and writes nothing while idle. A field older
than STALE_AFTER_S counts for nothing and is deleted by the next reader, so a process that
died with requests queued stops counting within seconds; the hash itself expires
KEY_TTL_S after the last write.
"""

import asyncio
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping

import redis
import redis.asyncio as aioredis
from django.core.exceptions import ImproperlyConfigured

from foundation.redis_clients import REDIS_FAILURES, async_redis

logger = logging.getLogger(__name__)
QUEUE_KEY = "sluice:dispatch:queue"
PUBLISH_INTERVAL_S = 1.0
STALE_AFTER_S = 5.0
KEY_TTL_S = 60
PUBLISH_FAILURES = (*REDIS_FAILURES, ImproperlyConfigured, OSError)
_WARN_EVERY_S = 60.0


def field(deployment: str, process: str) -> str:
    return json.dumps([deployment, process])


def sum_depths(
    raw: Mapping[str, str], now: float, stale_after_s: float = STALE_AFTER_S
) -> tuple[dict[str, int], list[str]]:
    """The hash's fields -> requests waiting per deployment (fresh fields only), and the
    fields to delete (stale or unreadable)."""
    depths: dict[str, int] = {}
    stale = []
    for key, value in raw.items():
        try:
            deployment, _process = json.loads(key)
            count, at = value.split()
            fresh = now - float(at) < stale_after_s
        except ValueError:
            stale.append(key)
            continue
        if not fresh:
            stale.append(key)
            continue
        depths[str(deployment)] = depths.get(str(deployment), 0) + int(count)
    return depths, stale


def read_depths(client: redis.Redis) -> dict[str, int]:
    """Requests waiting in the gateways' dispatch queues, per deployment (sync callers: the
    autoscaler loop, the dashboard). Raises what the client raises."""
    raw: dict[str, str] = client.hgetall(QUEUE_KEY)  # type: ignore[assignment]
    depths, stale = sum_depths(raw, time.time())
    if stale:
        client.hdel(QUEUE_KEY, *stale)
    return depths


async def aread_depths(client: aioredis.Redis) -> dict[str, int]:
    """read_depths for async callers (/metrics)."""
    raw: dict[str, str] = await client.hgetall(QUEUE_KEY)  # type: ignore[assignment]
    depths, stale = sum_depths(raw, time.time())
    if stale:
        await client.hdel(QUEUE_KEY, *stale)
    return depths


class QueuePublisher:
    """Writes one process's dispatch queue lengths into QUEUE_KEY (see the module docstring).

    wake() is called when a request starts waiting; it costs nothing on the fast path (a
    request that gets a slot at once never calls it). A failed write is logged (at most once
    a minute) and retried at the next interval: publishing never fails a request."""

    def __init__(
        self,
        interval_s: float = PUBLISH_INTERVAL_S,
        client: Callable[[], aioredis.Redis] = async_redis,
    ) -> None:
        self.interval_s = interval_s
        self.client = client
        self.token = secrets.token_hex(4)  # two dispatchers in one process stay apart
        self._task: asyncio.Task[None] | None = None
        self._published: set[str] = set()
        self._warned_at = float("-inf")

    @property
    def process(self) -> str:
        """host:pid:token, read at each write: a forked child is its own process."""
        return f"{socket.gethostname()}:{os.getpid()}:{self.token}"

    def wake(self, lengths: Callable[[], dict[str, int]]) -> None:
        """Publish now and keep publishing while any queue is non-empty."""
        loop = asyncio.get_running_loop()
        task = self._task
        if task is None or task.done() or task.get_loop() is not loop:
            self._task = loop.create_task(self._run(lengths))

    async def _run(self, lengths: Callable[[], dict[str, int]]) -> None:
        while True:
            queued = {name: n for name, n in lengths().items() if n > 0}
            await self.publish(queued)
            if queued:
                await asyncio.sleep(self.interval_s)
            elif not any(lengths().values()):  # no await between this check and returning
                return

    async def publish(self, queued: dict[str, int]) -> None:
        """Write these non-zero lengths and delete this process's fields for the others."""
        gone = self._published - queued.keys()
        if not queued and not gone:
            return
        process, now = self.process, time.time()
        try:
            pipe = self.client().pipeline(transaction=False)
            for name, n in queued.items():
                pipe.hset(QUEUE_KEY, field(name, process), f"{n} {now:.3f}")
            if queued:
                pipe.expire(QUEUE_KEY, KEY_TTL_S)
            if gone:
                pipe.hdel(QUEUE_KEY, *(field(name, process) for name in gone))
            await pipe.execute()
        except PUBLISH_FAILURES as exc:
            if time.monotonic() - self._warned_at > _WARN_EVERY_S:
                self._warned_at = time.monotonic()
                logger.warning("could not publish the dispatch queue: %s", exc)
            return
        self._published = set(queued)
