"""The picker most policies use: the best weighted total wins."""

import random
from collections.abc import Sequence

from inference.snapshot import WorkerView
from scaling.routing.router import Picker, RouteContext


class BestScore(Picker):
    """The highest total; equal totals are broken at random, so equally good workers share
    the traffic instead of the first in the list taking it all."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()

    def pick(
        self, workers: Sequence[WorkerView], totals: Sequence[float], request: RouteContext
    ) -> WorkerView:
        best = max(totals)
        tied = [w for w, total in zip(workers, totals, strict=True) if total >= best - 1e-9]
        return tied[0] if len(tied) == 1 else self.rng.choice(tied)
