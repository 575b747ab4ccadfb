"""A record cache shared across processes: process memory -> Redis -> database.

Reads go process cache -> Redis -> database. Writes (revocation, policy changes) are
published to Redis with a plain SET, while readers that loaded from the database fill
Redis with SET NX: a reader that raced a revocation can never overwrite it. Every process
re-reads Redis once its short local entry ages out, so a change reaches all of them
within AUTH_PROCESS_CACHE_TTL_S plus one round trip. Used for API keys, quota limits and
cache policies.
"""

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Generic, TypeVar, cast

from django.conf import settings

from foundation.db import database_read
from foundation.redis_clients import REDIS_FAILURES, RedisUnavailable, async_redis, sync_redis
from foundation.single_flight import SingleFlight

# Redis heals itself within this TTL even if a publish was lost; "missing" answers (unknown
# ids) live shorter, and each process keeps at most LOCAL_CACHE_MAX_ENTRIES records so
# that probing with random ids cannot grow its memory.
REDIS_RECORD_TTL_S = 300
REDIS_MISSING_TTL_S = 60
LOCAL_CACHE_MAX_ENTRIES = 100_000
_MISSING = json.dumps({"missing": True})

T = TypeVar("T")


class RecordCache(Generic[T]):
    def __init__(
        self,
        namespace: str,
        load: Callable[[str], T | None],
        decode: Callable[[dict[str, Any]], T],
    ) -> None:
        self.namespace = namespace
        self._load = load
        self._decode = decode
        self._local: OrderedDict[str, tuple[T | None, float]] = OrderedDict()
        self._flights: SingleFlight[T | None] = SingleFlight()

    def redis_key(self, ident: str) -> str:
        return f"sluice:{self.namespace}:{ident}"

    async def get(self, ident: str) -> T | None:
        now = time.monotonic()
        cached = self._local.get(ident)
        if cached is not None and now - cached[1] < settings.AUTH_PROCESS_CACHE_TTL_S:
            return cached[0]
        record = await self._flights.run(ident, lambda: self._fetch(ident))
        self._local[ident] = (record, now)
        self._local.move_to_end(ident)
        if len(self._local) > LOCAL_CACHE_MAX_ENTRIES:
            self._local.popitem(last=False)
        return record

    async def _fetch(self, ident: str) -> T | None:
        client = async_redis()
        try:
            raw = cast(str | None, await client.get(self.redis_key(ident)))
            if raw is None:
                loaded = await database_read(self._load)(ident)
                fresh = encode_record(loaded)
                # SET NX GET: keep (and use) whatever a writer published meanwhile.
                ttl = REDIS_RECORD_TTL_S if loaded is not None else REDIS_MISSING_TTL_S
                previous = await client.set(self.redis_key(ident), fresh, nx=True, get=True, ex=ttl)
                raw = str(previous) if previous is not None else fresh
        except REDIS_FAILURES as exc:
            raise RedisUnavailable(f"Redis unreachable while reading {self.namespace}") from exc
        data = json.loads(raw)
        return None if data.get("missing") else self._decode(data)

    def publish(self, ident: str, record: T | None) -> None:
        """Overwrite the shared record after a write; local caches age out within a second."""
        sync_redis().set(self.redis_key(ident), encode_record(record), ex=REDIS_RECORD_TTL_S)
        self._local.pop(ident, None)

    def clear_local(self) -> None:
        self._local.clear()


def encode_record(record: object | None) -> str:
    if record is None:
        return _MISSING
    return json.dumps(asdict(record))  # type: ignore[call-overload]
