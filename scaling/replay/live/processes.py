"""The simulator processes of a live replay, and the scraper that watches them come up.

The production LocalProcessActuator and Scraper do the work; these subclasses only give
the processes the replay's worker (fixed latency or a profile, held back for the scaled
start-up time) and write down each replica's life (started, first healthy, stopped), which
is what the report bills as GPU-seconds and measures as start-up time.
"""

import subprocess
import sys
import time
from dataclasses import dataclass

from inference import fleet
from inference.models import ModelDeployment, Worker
from inference.scraper import Scraper
from scaling.autoscale.actuators.base import Replica
from scaling.autoscale.actuators.local import LocalProcessActuator
from scaling.replay.live.options import FIXED, LiveOptions

# Starts the simulator after the scaled start-up time: the process answers nothing while
# "loading", exactly as a vLLM server that is still loading weights.
_DELAYED_START = (
    "import runpy, sys, time; time.sleep(float(sys.argv.pop(1))); "
    "runpy.run_module('inference.sim', run_name='__main__', alter_sys=True)"
)


@dataclass
class ReplicaLife:
    url: str
    pid: int
    started: float  # monotonic
    warm: bool
    initial: bool
    ready: float | None = None
    stopped: float | None = None
    exited: bool = False  # the process died on its own (reconcile found it)


class ReplayActuator(LocalProcessActuator):
    """The LocalProcessActuator with the replay's worker command and a record of every
    replica's life (start, ready, stop) for GPU-seconds."""

    def __init__(self, options: LiveOptions) -> None:
        profile = "h100-llama3-8b" if options.worker == FIXED else options.worker
        super().__init__(sim_profile=profile)  # its deployment is marked simulated
        self.options = options
        self.startup_delay_s = 0.0
        self.initial = True
        self.lives: dict[str, ReplicaLife] = {}

    def command(self, deployment: ModelDeployment, port: int) -> list[str]:
        args = super().command(deployment, port)[3:]  # after python -m inference.sim
        if self.options.worker == FIXED:
            args += [
                "--fixed-ttft-ms",
                f"{self.options.worker_ttft_s * 1000:g}",
                "--fixed-itl-ms",
                f"{self.options.worker_itl_s * 1000:g}",
            ]
        if self.startup_delay_s > 0:
            return [sys.executable, "-c", _DELAYED_START, f"{self.startup_delay_s:g}", *args]
        return [sys.executable, "-m", "inference.sim", *args]

    def start_replica(
        self, deployment: ModelDeployment, *, warm: bool = False, spot: bool = False
    ) -> Replica:
        replica = super().start_replica(deployment, warm=warm, spot=spot)
        self.lives[replica.url] = ReplicaLife(
            url=replica.url,
            pid=int(replica.key),
            started=time.monotonic(),
            warm=warm,
            initial=self.initial,
        )
        return replica

    def stop_replica(self, worker: Worker) -> None:
        super().stop_replica(worker)
        self._ended(worker.url)

    def reconcile(self, deployment: ModelDeployment) -> None:
        for url, process in self.processes.items():
            if process.poll() is not None and url in self.lives:
                self._ended(url, exited=True)
        super().reconcile(deployment)

    def _ended(self, url: str, exited: bool = False) -> None:
        life = self.lives.get(url)
        if life is not None and life.stopped is None:
            life.stopped, life.exited = time.monotonic(), exited

    def stop_everything(self) -> None:
        """SIGTERM every process at once, then wait (a SIGKILL after 10 s), then mark the
        workers dead: faster than stopping them one by one when a run ends or is cut."""
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for url, process in list(self.processes.items()):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
            self._ended(url)
            worker = Worker.objects.filter(url=url).first()
            if worker is not None:
                fleet.set_worker_state(worker, Worker.State.DEAD, "live replay ended")
            del self.processes[url]


def replay_scraper(deployment_id: int, lives: dict[str, ReplicaLife]) -> Scraper:
    """The production scraper, over this replay's deployment only (a shared database may
    hold other deployments' workers), noting when each worker first answered."""

    def note_ready(worker: Worker, ok: bool) -> None:
        life = lives.get(worker.url)
        if ok and life is not None and life.ready is None:
            life.ready = time.monotonic()

    return Scraper(deployment_id=deployment_id, on_health=note_ready)
