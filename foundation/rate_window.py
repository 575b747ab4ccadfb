"""Counting events in a window: in Redis across every process, or in one process's memory.

Abuse limits (messages per client address, failed sign-ins per username) must hold across
every socket and every gateway process, so `RedisWindow` counts in Redis: one key per
subject under `sluice:throttle:`, INCR plus PEXPIRE NX in one MULTI, so a key can never
be left without its expiry. The window starts at a subject's first event and the key
expires with it; the next event opens a new one. At most twice the limit can pass around
a window's end, which an abuse limit can afford (it bounds floods, it does not bill).
Redis failures raise `RedisUnavailable`: callers fail closed.

`LocalWindow` is for counts that live in one process anyway (the messages of one socket):
no round trip, and it keeps working when Redis does not.
"""

import time
from collections import deque
from dataclasses import dataclass

import redis
import redis.asyncio as aioredis

from foundation.redis_clients import REDIS_FAILURES, RedisUnavailable

KEY_PREFIX = "sluice:throttle:"


@dataclass(frozen=True)
class WindowCount:
    """How many events a subject has in its current window, and when that window ends."""

    count: int
    limit: int
    reset_in_s: float

    @property
    def over(self) -> bool:
        """The event just counted went past the limit."""
        return self.count > self.limit

    @property
    def full(self) -> bool:
        """No more events are allowed until the window ends (for failures: locked out)."""
        return self.count >= self.limit


@dataclass(frozen=True)
class RedisWindow:
    """`limit` events per `window_s` seconds for each subject of one kind (`name`)."""

    name: str
    limit: int
    window_s: float

    def key(self, subject: str) -> str:
        return f"{KEY_PREFIX}{self.name}:{subject}"

    def _counted(self, count: int | str | None, ttl_ms: int) -> WindowCount:
        # GET answers None and PTTL -2 for a missing key: nothing counted, nothing to wait for.
        return WindowCount(int(count or 0), self.limit, max(0, int(ttl_ms)) / 1000)

    async def hit(self, client: aioredis.Redis, subject: str) -> WindowCount:
        """Count one event for `subject` and return its window's count, this event included."""
        key = self.key(subject)
        try:
            async with client.pipeline(transaction=True) as pipe:
                pipe.incr(key)
                pipe.pexpire(key, int(self.window_s * 1000), nx=True)
                pipe.pttl(key)
                count, _, ttl_ms = await pipe.execute()
        except REDIS_FAILURES as exc:
            raise RedisUnavailable(f"the {self.name} limit cannot be counted") from exc
        return self._counted(count, ttl_ms)

    async def peek(self, client: aioredis.Redis, subject: str) -> WindowCount:
        """The count so far, without counting anything."""
        key = self.key(subject)
        try:
            async with client.pipeline(transaction=False) as pipe:
                pipe.get(key)
                pipe.pttl(key)
                count, ttl_ms = await pipe.execute()
        except REDIS_FAILURES as exc:
            raise RedisUnavailable(f"the {self.name} limit cannot be read") from exc
        return self._counted(count, ttl_ms)

    def hit_sync(self, client: redis.Redis, subject: str) -> WindowCount:
        """`hit` for sync code (Django views)."""
        key = self.key(subject)
        try:
            with client.pipeline(transaction=True) as pipe:
                pipe.incr(key)
                pipe.pexpire(key, int(self.window_s * 1000), nx=True)
                pipe.pttl(key)
                count, _, ttl_ms = pipe.execute()
        except REDIS_FAILURES as exc:
            raise RedisUnavailable(f"the {self.name} limit cannot be counted") from exc
        return self._counted(count, ttl_ms)

    def peek_sync(self, client: redis.Redis, subject: str) -> WindowCount:
        """`peek` for sync code (Django views)."""
        key = self.key(subject)
        try:
            with client.pipeline(transaction=False) as pipe:
                pipe.get(key)
                pipe.pttl(key)
                count, ttl_ms = pipe.execute()
        except REDIS_FAILURES as exc:
            raise RedisUnavailable(f"the {self.name} limit cannot be read") from exc
        return self._counted(count, ttl_ms)

    def clear_sync(self, client: redis.Redis, subject: str) -> None:
        """Forget `subject`'s count (a successful sign-in clears its username's failures)."""
        try:
            client.delete(self.key(subject))
        except REDIS_FAILURES as exc:
            raise RedisUnavailable(f"the {self.name} limit cannot be cleared") from exc


class LocalWindow:
    """A sliding window in this process's memory: at most `limit` events in any `window_s`.

    It keeps the times of the last `limit` admitted events only, so its memory is bounded
    by the limit, whatever the client sends.
    """

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._times: deque[float] = deque(maxlen=limit)

    def admit(self, now: float | None = None) -> WindowCount:
        """Count the event if the window has room; `over` says it was refused instead."""
        now = time.monotonic() if now is None else now
        if len(self._times) < self.limit or now - self._times[0] >= self.window_s:
            self._times.append(now)
            return WindowCount(len(self._times), self.limit, self.window_s)
        return WindowCount(self.limit + 1, self.limit, self._times[0] + self.window_s - now)
