"""Replicas as pods of a Kubernetes Deployment, scaled through its scale subresource.

- start: read the Deployment's scale and patch spec.replicas up by one
  (AppsV1Api.patch_namespaced_deployment_scale); spot replicas go to a second
  Deployment, `<name>-spot`, whose pod template selects spot nodes (docs/autoscaling.md);
- stop: the drained pod gets `controller.kubernetes.io/pod-deletion-cost: -1000`, so the
  ReplicaSet removes that pod, and not one with streams in flight, when the scale is
  patched down by one;
- reconcile: pods carrying the label `sluice.io/deployment=<name>` become workers at
  http://<pod IP>:<port> (starting, or warm while warm starts are pending); pods that are
  gone become dead. A pod annotated `sluice.io/sleep-mode: "true"` (its vLLM runs with
  --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1) can be put to sleep in the warm pool;
  sleep and wake go to the pod over HTTP, as the scraper does (Actuator.sleep_replica).

The `kubernetes` package is imported only when this actuator is built.
"""

import logging
from typing import Any

from inference import fleet
from inference.models import ModelDeployment, Worker
from inference.worker_labels import on_spot
from scaling.autoscale.actuators.base import Actuator, ActuatorError, Replica

logger = logging.getLogger(__name__)
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
LABEL = "sluice.io/deployment"
POOL_LABEL = "sluice.io/pool"  # on-demand | spot
SLEEP_ANNOTATION = "sluice.io/sleep-mode"  # "true": vLLM started with sleep mode
REGISTERED_BY = "autoscaler-k8s"


class KubernetesActuator(Actuator):
    name = "kubernetes"

    def __init__(
        self,
        namespace: str = "sluice",
        port: int = 8000,
        name_template: str = "vllm-{name}",
        api_client: Any = None,
    ) -> None:
        try:
            from kubernetes import client, config  # type: ignore[import-untyped]
        except ImportError as exc:
            raise ActuatorError(
                "the kubernetes actuator needs the `kubernetes` package: "
                "pip install -e '.[kubernetes]'"
            ) from exc
        if api_client is None:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
        self.client = client
        self.apps = client.AppsV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.namespace, self.port, self.name_template = namespace, port, name_template
        self.pending_warm: dict[int, int] = {}

    def k8s_name(self, deployment: ModelDeployment, spot: bool = False) -> str:
        """Kubernetes names are DNS labels: lower case, dashes."""
        base = self.name_template.format(name=deployment.name).lower().replace("_", "-")
        base = base.replace(".", "-").replace("/", "-")
        return f"{base}-spot" if spot else base

    def replicas(self, name: str) -> int:
        scale = self._call(self.apps.read_namespaced_deployment_scale, name, self.namespace)
        return int(scale.spec.replicas or 0)

    def scale(self, name: str, replicas: int) -> None:
        body = {"spec": {"replicas": max(replicas, 0)}}
        self._call(self.apps.patch_namespaced_deployment_scale, name, self.namespace, body)

    def start_replica(
        self, deployment: ModelDeployment, *, warm: bool = False, spot: bool = False
    ) -> Replica:
        name = self.k8s_name(deployment, spot)
        count = self.replicas(name) + 1
        self.scale(name, count)
        if warm:
            self.pending_warm[deployment.pk] = self.pending_warm.get(deployment.pk, 0) + 1
        return Replica(key=f"{name}#{count}", url="", alive=True)

    def stop_replica(self, worker: Worker) -> None:
        pod = worker.labels.get("pod")
        spot = on_spot(worker.labels)
        name = self.k8s_name(worker.deployment, spot)
        if isinstance(pod, str):
            patch = {"metadata": {"annotations": {DELETION_COST: "-1000"}}}
            self._call(self.core.patch_namespaced_pod, pod, self.namespace, patch)
        else:
            logger.warning(
                "worker %s names no pod; Kubernetes picks which pod to remove", worker.url
            )
        self.scale(name, self.replicas(name) - 1)
        fleet.set_worker_state(worker, Worker.State.DEAD, "scaled down by the autoscaler")

    def list_replicas(self, deployment: ModelDeployment) -> list[Replica]:
        return [
            Replica(key=pod.metadata.name, url=self._url(pod), alive=_ready(pod))
            for pod in self._pods(deployment)
        ]

    def replicas_on_their_way(self, deployment: ModelDeployment) -> int:
        """The scale asked for, less the pods that have an address (reconcile registers
        those): a Pending pod has none, and a pod the ReplicaSet has not made yet is not
        listed at all. On-demand pods only: a spot pool's pending pods are not counted."""
        registered = sum(
            1
            for pod in self._pods(deployment)
            if self._url(pod) and pod.metadata.deletion_timestamp is None
        )
        return max(self.replicas(self.k8s_name(deployment)) - registered, 0)

    def reconcile(self, deployment: ModelDeployment) -> None:
        seen = set()
        for pod in self._pods(deployment):
            url = self._url(pod)
            if not url or pod.metadata.deletion_timestamp is not None:
                continue
            seen.add(url)
            if not Worker.objects.filter(url=url).exclude(state=Worker.State.DEAD).exists():
                self._register(deployment, pod, url)
        for worker in Worker.objects.filter(
            deployment=deployment, registered_by=REGISTERED_BY
        ).exclude(state=Worker.State.DEAD):
            if worker.url not in seen:
                fleet.set_worker_state(worker, Worker.State.DEAD, "its pod is gone")

    def _register(self, deployment: ModelDeployment, pod: Any, url: str) -> None:
        warm = self.pending_warm.get(deployment.pk, 0) > 0
        if warm:
            self.pending_warm[deployment.pk] -= 1
        labels = {
            "actuator": self.name,
            "pod": pod.metadata.name,
            "spot": (pod.metadata.labels or {}).get(POOL_LABEL) == "spot",
            "sleep_mode": (pod.metadata.annotations or {}).get(SLEEP_ANNOTATION) == "true",
        }
        state = Worker.State.WARM if warm else Worker.State.STARTING
        fleet.register_worker(
            deployment, url, registered_by=REGISTERED_BY, labels=labels, state=state
        )

    def _pods(self, deployment: ModelDeployment) -> list[Any]:
        selector = f"{LABEL}={self.k8s_name(deployment)}"
        pods = self._call(self.core.list_namespaced_pod, self.namespace, label_selector=selector)
        return list(pods.items)

    def _url(self, pod: Any) -> str:
        ip = pod.status.pod_ip if pod.status else None
        return f"http://{ip}:{self.port}" if ip else ""

    def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except self.client.exceptions.ApiException as exc:
            raise ActuatorError(f"Kubernetes API {exc.status} {exc.reason}: {exc.body}") from exc


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
