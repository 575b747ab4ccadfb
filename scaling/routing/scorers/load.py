"""Rate workers by how busy they are, so load spreads and no worker's queue grows alone."""

from collections.abc import Sequence

from inference.snapshot import WorkerView
from scaling.routing.router import Load, RouteContext, Scorer


class LoadScorer(Scorer):
    """Fewer requests is better; KV-cache usage (0-1) counts as a fraction of a request, so
    it separates workers with equal counts in favour of the one with more free memory.
    Scaled so the least loaded candidate scores 1 and the most loaded 0."""

    def scores(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        values = [load.requests(w) + w.kv_usage for w in workers]
        low, high = min(values), max(values)
        if high - low < 1e-9:
            return [1.0] * len(workers)
        return [(high - value) / (high - low) for value in values]
