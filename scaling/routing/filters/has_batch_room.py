"""Drop workers with no spare capacity of their own for one more batch line.

The batch runner's meter bounds its lines by the deployment's spare capacity, summed over
its workers; without this filter the policy could still place them all on one worker
while another had the room (a worker was over its slots in a third of the samples of
`manage.py bench_batch`). Only batch-priority dispatch runs it (policies.for_batch).
"""

from inference.snapshot import WorkerView
from scaling.routing.batch_meter import WorkerAllowance
from scaling.routing.router import Filter, Load, RouteContext


class HasBatchRoom(Filter):
    """Below its own batch allowance: scraped spare plus our lines the scrape counted,
    less our lines on it now (scaling/routing/batch_meter.py)."""

    def __init__(self, allowance: WorkerAllowance) -> None:
        self.allowance = allowance

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        return self.allowance.room(worker) > 0
