"""Rate highest the worker a request's prefix maps to, so its prefix cache is reused.

Requests sharing a prefix then land on one worker, whose cache holds that prefix once
instead of every worker computing it; the bounded-load ring (scaling/routing/hash_ring.py)
keeps one hot prefix from melting that worker.
"""

from collections.abc import Sequence

from inference.snapshot import WorkerView
from scaling.routing.hash_ring import EPSILON, bounded_owner
from scaling.routing.router import Load, RouteContext, Scorer


class PrefixAffinityScorer(Scorer):
    """1 for the worker the request's prefix maps to (bounded), 0 for the rest."""

    def __init__(self, epsilon: float = EPSILON) -> None:
        self.epsilon = epsilon

    def scores(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        if request.prefix_key is None:
            return [0.0] * len(workers)
        owner = bounded_owner(request.prefix_key, workers, load, self.epsilon)
        return [1.0 if w is owner else 0.0 for w in workers]
