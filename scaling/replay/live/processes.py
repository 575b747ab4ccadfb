"""The simulator processes of a live replay, and the scraper that watches them come up.

The production LocalProcessActuator and Scraper do the work; these subclasses only give
the processes the replay's worker (fixed latency or a profile, held back for the scaled
start-up time, waking from sleep mode in the scaled wake time) and write down each
replica's life (started, first healthy, asleep, stopped), which is what the report bills
as GPU-seconds and measures as start-up and wake times.
"""

import subprocess
import sys
import time
from dataclasses import dataclass, field

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
    # Spells in sleep mode (monotonic): from the sleep's answer to the wake's request (or
    # the stop), when the replica held no GPU memory; and how long each wake took.
    asleep: list[tuple[float, float | None]] = field(default_factory=list)
    wakes_s: list[float] = field(default_factory=list)

    def fell_asleep(self, at: float) -> None:
        if not self.asleep or self.asleep[-1][1] is not None:
            self.asleep.append((at, None))

    def woke(self, at: float) -> None:
        if self.asleep and self.asleep[-1][1] is None:
            self.asleep[-1] = (self.asleep[-1][0], at)

    def asleep_within(self, start: float, end: float) -> float:
        """Seconds asleep inside [start, end] (a spell still open ends at the stop, or end)."""
        total, stopped = 0.0, self.stopped if self.stopped is not None else end
        for since, until in self.asleep:
            last = until if until is not None else stopped
            total += max(min(last, end) - max(since, start), 0.0)
        return total


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
        # In simulated seconds, divided by --time-scale (1 here): the scaled wake time.
        args += ["--wake-s", f"{self.options.worker_wake_s:g}"]
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

    def sleep_replica(self, worker: Worker) -> None:
        super().sleep_replica(worker)
        life = self.lives.get(worker.url)
        if life is not None:
            life.fell_asleep(time.monotonic())

    def wake_replica(self, worker: Worker) -> float:
        """Asleep until the wake is asked for: from then on it loads its GPU memory back.
        Runs in a thread beside other wakes, on its own replica's life only."""
        life = self.lives.get(worker.url)
        if life is not None:
            life.woke(time.monotonic())
        took = super().wake_replica(worker)
        if life is not None:
            life.wakes_s.append(took)
        return took

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
