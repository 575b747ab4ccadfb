"""Drop workers this gateway process already keeps full, so the dispatcher queues instead.

Past its in-flight target a worker's batch only grows its own queue; holding the request
in the dispatcher lets it go to whichever worker frees a slot first.
"""

from inference.snapshot import WorkerView
from scaling.routing.router import Filter, Load, RouteContext


class BelowInFlightLimit(Filter):
    """Below this process's in-flight target for it: a fuller batch would only queue."""

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        return load.own(worker) < load.slots(worker)
