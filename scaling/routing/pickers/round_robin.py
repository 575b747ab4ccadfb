"""Pick every worker in turn, blind to load and scores: the baseline the others beat."""

from collections.abc import Sequence

from inference.snapshot import WorkerView
from scaling.routing.router import Picker, RouteContext


class RoundRobin(Picker):
    """The next worker after the last one picked, in URL order, per deployment; blind to
    scores. Following URLs rather than a counter keeps the rotation fair while workers
    fill up, join and leave."""

    def __init__(self) -> None:
        self.last_url: dict[str, str] = {}

    def pick(
        self, workers: Sequence[WorkerView], totals: Sequence[float], request: RouteContext
    ) -> WorkerView:
        ordered = sorted(workers, key=lambda w: w.url)
        last = self.last_url.get(request.deployment, "")
        worker = next((w for w in ordered if w.url > last), ordered[0])
        self.last_url[request.deployment] = worker.url
        return worker
