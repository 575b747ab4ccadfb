"""Which deployments scale from zero: those whose autoscale policy is enabled with
`min_replicas` 0. A request for one that finds no routable worker waits in the dispatch
queue (up to SCALE_FROM_ZERO_TIMEOUT_S) instead of failing at once: the queue it joins is
published (scaling/routing/queue_depth.py), which is the autoscaler's `from_zero` signal to
wake a sleeping replica or start one, and the dispatcher's re-checks serve it as soon as
that replica is routable. Any other deployment without a worker still fails at once (503):
nothing would come for it.

Read from the database at most every REFRESH_S per process, and only on that path (a
deployment with routable workers never asks).
"""

import logging
import time

from django.db import DatabaseError

from foundation.db import database_read
from foundation.single_flight import SingleFlight
from scaling.models import AutoscalePolicy

logger = logging.getLogger(__name__)
REFRESH_S = 5.0


class ColdStartDeployments:
    def __init__(self) -> None:
        self._names: frozenset[str] = frozenset()
        self._loaded_at = float("-inf")
        self._flights: SingleFlight[frozenset[str]] = SingleFlight()

    async def waits_for_replica(self, deployment: str) -> bool:
        """A database that cannot be read keeps the last answer (none: no deployment
        waits), said in the log: a request then fails at once, as it would have anyway."""
        return deployment in await self._current()

    async def any_deployment(self) -> bool:
        """Whether any deployment scales from zero (the HTTP adapter readies keep-alives
        for streams only then)."""
        return bool(await self._current())

    async def _current(self) -> frozenset[str]:
        if time.monotonic() - self._loaded_at >= REFRESH_S:
            try:
                self._names = await self._flights.run("cold-start", database_read(_load))
            except DatabaseError as exc:
                logger.error("scale-from-zero policies unreadable, kept as they were: %s", exc)
            self._loaded_at = time.monotonic()
        return self._names

    def clear_local(self) -> None:
        self._loaded_at = float("-inf")


def _load() -> frozenset[str]:
    policies = AutoscalePolicy.objects.filter(enabled=True, min_replicas=0)
    return frozenset(policies.values_list("deployment__name", flat=True))


cold_start = ColdStartDeployments()
