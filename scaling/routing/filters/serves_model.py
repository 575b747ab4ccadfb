"""Drop workers of other deployments: a worker serves one model, the request names one."""

from inference.snapshot import WorkerView
from scaling.routing.router import Filter, Load, RouteContext


class ServesModel(Filter):
    """Belongs to the deployment the request is for."""

    def keep(self, worker: WorkerView, request: RouteContext, load: Load) -> bool:
        return worker.deployment == request.deployment
