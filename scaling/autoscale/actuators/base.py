"""One interface for everything that starts and stops model replicas.

The autoscaler never talks to processes or clusters directly: it asks an Actuator to
start or stop a replica, and changes a worker's routing state (ready, warm, draining)
itself through inference.fleet, which every actuator's workers share.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass

from inference.models import ModelDeployment, Worker


@dataclass(frozen=True)
class Replica:
    """A replica as its actuator knows it (a process, a pod)."""

    key: str  # pid, pod name, or "<deployment>#<n>" for a requested but unseen pod
    url: str  # where the worker serves; "" until known
    alive: bool


class ActuatorError(RuntimeError):
    """The infrastructure refused or failed; the decision is recorded with this error."""


class Actuator(ABC):
    name = "actuator"

    @abstractmethod
    def start_replica(
        self, deployment: ModelDeployment, *, warm: bool = False, spot: bool = False
    ) -> Replica:
        """Start one replica. warm: register it held out of traffic (the warm pool)."""

    @abstractmethod
    def stop_replica(self, worker: Worker) -> None:
        """Stop a replica the autoscaler has drained (no streams in flight, not loading)."""

    @abstractmethod
    def list_replicas(self, deployment: ModelDeployment) -> list[Replica]:
        """The replicas this actuator runs for the deployment."""

    @abstractmethod
    def reconcile(self, deployment: ModelDeployment) -> None:
        """Bring the worker table in line with reality (exited processes, new pods)."""
