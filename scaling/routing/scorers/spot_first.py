"""Rate spot workers above on-demand ones, for batch lines: the cheapest capacity first.

The autoscaler starts spot replicas only for deployments of the batch tier (labelled
`spot`, scaling/autoscale); batch lines are what they are for, and interactive routing
never runs this scorer (policies.for_batch adds it to batch-priority dispatch only).
"""

from collections.abc import Sequence

from inference.snapshot import WorkerView
from scaling.routing.router import Load, RouteContext, Scorer


def is_spot(worker: WorkerView) -> bool:
    """The reading billing, GPU costing and the autoscaler share (inference/worker_labels.py:
    the JSON true only), so a worker routed as spot is also priced as spot."""
    return worker.spot


class SpotFirst(Scorer):
    """1 for a worker labelled spot, 0 for the rest."""

    def scores(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        return [1.0 if is_spot(w) else 0.0 for w in workers]
