"""Rate highest the worker a session went to last: it holds the conversation in its cache.

A returning session (the OpenAI `user` field) resends its history; the worker that served
it before can reuse those tokens, as long as it is not carrying more than its fair share.
"""

from collections import OrderedDict
from collections.abc import Sequence

from inference.snapshot import WorkerView
from scaling.routing.hash_ring import EPSILON
from scaling.routing.router import Load, RouteContext, Scorer


class SessionAffinityScorer(Scorer):
    """1 for the worker this session used last, if it is a candidate still under the same
    load cap as prefixes; it holds the session's conversation so far in its cache."""

    def __init__(self, epsilon: float = EPSILON, max_sessions: int = 100_000) -> None:
        self.epsilon = epsilon
        self.max_sessions = max_sessions
        self.last_worker: OrderedDict[str, str] = OrderedDict()  # session -> url, LRU order

    def scores(
        self, workers: Sequence[WorkerView], request: RouteContext, load: Load
    ) -> list[float]:
        url = self.last_worker.get(request.session_key or "")
        if url is None:
            return [0.0] * len(workers)
        cap = load.capacity(workers, self.epsilon)
        return [1.0 if w.url == url and load.requests(w) < cap else 0.0 for w in workers]

    def picked(self, worker: WorkerView, request: RouteContext) -> None:
        if request.session_key is None:
            return
        self.last_worker[request.session_key] = worker.url
        self.last_worker.move_to_end(request.session_key)
        while len(self.last_worker) > self.max_sessions:
            self.last_worker.popitem(last=False)
