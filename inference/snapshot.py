"""The fleet as every gateway process sees it: one Redis hash written by the scraper.

Gateway processes read the whole hash at most once per FLEET_REFRESH_S. A snapshot older
than FLEET_STALE_AFTER_S means the scraper is not running; its workers are then treated
as unroutable rather than trusted on old numbers.
"""

import json
import time
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields

from django.conf import settings

from foundation.redis_clients import async_redis
from foundation.single_flight import SingleFlight
from inference.worker_labels import on_spot

SNAPSHOT_KEY = "sluice:fleet:workers"


@dataclass(frozen=True)
class WorkerView:
    id: int
    url: str
    deployment: str
    upstream_model: str
    state: str
    max_in_flight: int
    labels: dict[str, object]
    healthy: bool
    running: float
    waiting: float
    kv_usage: float
    prefix_hit_rate: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    scraped_at: float  # when the reading was in: it shows the worker at no later time
    error: str
    # The context window its /v1/models reports (vLLM's max_model_len); None: not reported.
    max_model_len: int | None = None
    # In vLLM's sleep mode (weights offloaded, or waking): alive, answers /health, serves
    # nothing. Never routed to, whatever its state says (inference/scraper.py).
    sleeping: bool = False
    # Its load comes from its own metrics; False: it publishes none under a known name, so
    # only this gateway's in-flight count bounds it (inference/worker_metrics.py).
    reports_load: bool = True
    # When the scrape began asking: the reading shows the worker at no earlier time. None:
    # as scraped_at (a view built without it, a simulated fleet's).
    asked_at: float | None = None

    @property
    def reading_from(self) -> float:
        """The earliest moment the reading can show: a request the worker held before it
        is in the reading's counts unless it ended before scraped_at."""
        return self.scraped_at if self.asked_at is None else self.asked_at

    @property
    def fresh(self) -> bool:
        return time.time() - self.scraped_at < settings.FLEET_STALE_AFTER_S

    @property
    def spot(self) -> bool:
        """On spot capacity (labelled `"spot": true`): what it serves is billed at the
        deployment's spot discount."""
        return on_spot(self.labels)

    @property
    def routable(self) -> bool:
        return self.healthy and self.state == "ready" and self.fresh and not self.sleeping

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class FleetView:
    """A per-process copy of the snapshot, refreshed from Redis when older than a second."""

    def __init__(self) -> None:
        self._workers: list[WorkerView] = []
        self._loaded_at = float("-inf")
        self._flights: SingleFlight[list[WorkerView]] = SingleFlight()

    async def workers(self) -> list[WorkerView]:
        if time.monotonic() - self._loaded_at >= settings.FLEET_REFRESH_S:
            self._workers = await self._flights.run("workers", _read_snapshot)
            self._loaded_at = time.monotonic()
        return self._workers

    async def routable(self, deployment: str) -> list[WorkerView]:
        await self.workers()
        return self.cached_routable(deployment)

    def cached_urls(self) -> set[str]:
        """Every worker's URL in the copy already loaded (for sync callers)."""
        return {w.url for w in self._workers}

    def cached_routable(self, deployment: str) -> list[WorkerView]:
        """Routable workers from the copy already loaded (for sync callers)."""
        return [w for w in self._workers if w.deployment == deployment and w.routable]

    def stale(self, deployment: str) -> bool:
        """Whether the copy holds a worker of the deployment whose last scrape is too old (a
        paused or dead scraper): then its having no routable worker says nothing about its
        replicas."""
        return any(w.deployment == deployment and not w.fresh for w in self._workers)

    def reported_context_length(self, deployment: str) -> int | None:
        """The smallest context window the deployment's live workers report, from the copy
        already loaded: a request that fits it fits whichever worker it is routed to."""
        lengths = [
            w.max_model_len
            for w in self._workers
            if w.deployment == deployment and w.max_model_len and w.state != "dead"
        ]
        return min(lengths) if lengths else None

    def invalidate(self) -> None:
        self._loaded_at = float("-inf")


fleet_view = FleetView()


async def _read_snapshot() -> list[WorkerView]:
    raw = await async_redis().hgetall(SNAPSHOT_KEY)
    return [worker_view(json.loads(value)) for value in raw.values()]


def worker_view(fields: dict[str, object]) -> WorkerView:
    """A WorkerView from a snapshot entry, ignoring fields this process does not know: in a
    rolling upgrade a newer scraper may publish a field an older gateway lacks, and a
    refused entry would leave that gateway unable to route at all."""
    return WorkerView(**{k: v for k, v in fields.items() if k in _FIELDS})  # type: ignore[arg-type]


_FIELDS = frozenset(f.name for f in dataclass_fields(WorkerView))
