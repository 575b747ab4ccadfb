"""One interface for everything that starts and stops model replicas.

The autoscaler never talks to processes or clusters directly: it asks an Actuator to
start or stop a replica, or to put one to sleep or wake it (vLLM's sleep mode, over HTTP by
default), and changes a worker's routing state (ready, warm, draining) itself through
inference.fleet, which every actuator's workers share.
"""

import json
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from inference.models import ModelDeployment, Worker

SLEEP_LEVEL = 1  # weights to host memory, KV cache dropped: the same model wakes in seconds
SLEEP_MODE_TIMEOUT_S = 30.0  # well inside the loop's lease (3 ticks): a slower wake failed


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

    def replicas_on_their_way(self, deployment: ModelDeployment) -> int:
        """Replicas asked for whose worker has not registered yet (a pod waiting for a GPU
        node to be provisioned): capacity coming, which the loop counts as starting so it
        does not ask for it again every tick. 0 where a start registers its worker at once."""
        return 0

    def sleep_replica(self, worker: Worker) -> None:
        """Put a replica out of traffic into vLLM's sleep mode (level 1): its GPU memory is
        freed, the process stays. Over HTTP at the worker's URL, as the scraper reaches it;
        needs a worker started with sleep mode (labels `sleep_mode`)."""
        _post(f"{worker.url}/sleep?level={SLEEP_LEVEL}")

    def wake_replica(self, worker: Worker) -> float:
        """Wake a sleeping replica; returns once it is awake, with the seconds it took.
        Runs in a thread beside other wakes: it must not touch the database."""
        started = time.monotonic()
        body = _post(f"{worker.url}/wake_up")
        if body.get("status", "awake") != "awake":
            raise ActuatorError(f"{worker.url} still sleeps after /wake_up: {body}")
        return time.monotonic() - started


# Straight to the worker, as the scraper's aiohttp session goes: no proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _post(url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, data=b"", method="POST")  # noqa: S310 - a worker's URL
    try:
        with _DIRECT.open(request, timeout=SLEEP_MODE_TIMEOUT_S) as reply:
            raw = reply.read()
    except urllib.error.HTTPError as exc:
        raise ActuatorError(f"POST {url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise ActuatorError(f"POST {url}: {exc}") from exc
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = {}
    return body if isinstance(body, dict) else {}
