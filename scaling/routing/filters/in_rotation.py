"""Drop workers that are not serving new requests: starting, warm, draining or dead.

The autoscaler moves workers through these states; only the router sees every request, so
it is the router that keeps new work off a worker on its way in or out.
"""

from inference.snapshot import WorkerView
from scaling.routing.router import Filter, Load, RouteContext


class InRotation(Filter):
    """Only `ready` workers take new requests: a draining one finishes its streams and
    leaves; starting, warm and dead ones are not serving, nor is one in sleep mode (the
    snapshot already leaves it out of the routable workers; this holds if that changes)."""

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        return worker.state == "ready" and not worker.sleeping
